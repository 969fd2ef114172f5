//! `ferry produce` and `ferry consume`: try the cluster by hand.

use std::time::Duration;

use anyhow::bail;
use bytes::Bytes;
use clap::Args;
use proto::errors::ErrorCode;
use tokio::io::AsyncBufReadExt;

use crate::Bootstrap;

/// Flags of `ferry produce`.
#[derive(Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    bootstrap: Bootstrap,
    /// The topic.
    #[arg(long)]
    topic: String,
    /// Send every record to this partition (default: batches go round-robin over partitions).
    #[arg(long)]
    partition: Option<u32>,
    /// all (-1), 1 or 0.
    #[arg(long, default_value = "all")]
    acks: String,
    /// Most records per request.
    #[arg(long, default_value_t = 500)]
    batch_size: usize,
}

/// Flags of `ferry consume`.
#[derive(Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    bootstrap: Bootstrap,
    /// The topic.
    #[arg(long)]
    topic: String,
    /// Only this partition.
    #[arg(long, conflicts_with = "group")]
    partition: Option<u32>,
    /// Join this consumer group (KIP-848): read the partitions its coordinator assigns, from
    /// the group's committed offsets, and commit what was printed.
    #[arg(long)]
    group: Option<String>,
    /// Start at the oldest record instead of the end (with --group: where the group has no
    /// committed offset).
    #[arg(long)]
    from_beginning: bool,
    /// Stop after this many records.
    #[arg(long)]
    max_records: Option<u64>,
    /// Stop when no record arrives for this long (ms).
    #[arg(long)]
    timeout_ms: Option<u64>,
}

fn parse_acks(s: &str) -> anyhow::Result<i32> {
    Ok(match s {
        "all" | "-1" => -1,
        "1" => 1,
        "0" => 0,
        other => bail!("--acks: {other:?} is not all, 1 or 0"),
    })
}

/// Sends stdin's lines; each batch is retried while the partition's leadership moves.
pub async fn produce(a: ProduceArgs) -> anyhow::Result<()> {
    let acks = parse_acks(&a.acks)?;
    let cluster = a.bootstrap.cluster()?;
    let t = cluster.refresh(&a.topic).await?;
    let partitions = t.partitions.len() as u32;
    if let Some(p) = a.partition {
        if p >= partitions {
            bail!(
                "UNKNOWN_TOPIC_OR_PARTITION (3): partition {}-{p} does not exist",
                a.topic
            );
        }
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut next = 0u32;
    let mut eof = false;
    while !eof {
        let mut batch: Vec<Bytes> = Vec::new();
        // Take what is ready, waiting briefly so typed lines go out at once.
        while batch.len() < a.batch_size.max(1) {
            let wait = if batch.is_empty() {
                Duration::from_secs(3600)
            } else {
                Duration::from_millis(5)
            };
            match tokio::time::timeout(wait, lines.next_line()).await {
                Ok(Ok(Some(l))) => batch.push(Bytes::from(l)),
                Ok(Ok(None)) => {
                    eof = true;
                    break;
                }
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => break,
            }
        }
        if batch.is_empty() {
            continue;
        }
        let p = a.partition.unwrap_or_else(|| {
            next = next.wrapping_add(1);
            next % partitions.max(1)
        });
        let mut tries = 0;
        loop {
            match cluster.produce_once(&a.topic, p, batch.clone(), acks).await {
                Ok(_) => break,
                Err(e)
                    if tries < 50
                        && matches!(
                            e.code(),
                            None | Some(ErrorCode::NOT_LEADER_OR_FOLLOWER) | Some(ErrorCode::LEADER_NOT_AVAILABLE)
                        ) =>
                {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => bail!("{}-{p}: {e}", a.topic),
            }
        }
    }
    Ok(())
}

/// Prints records as lines.
pub async fn consume(a: ConsumeArgs) -> anyhow::Result<()> {
    let cluster = a.bootstrap.cluster()?;
    if let Some(group) = a.group {
        let args = crate::group_consume::GroupArgs {
            group,
            topic: a.topic,
            from_beginning: a.from_beginning,
            max_records: a.max_records,
            timeout_ms: a.timeout_ms,
        };
        return crate::group_consume::run(cluster, args).await;
    }
    let t = cluster.refresh(&a.topic).await?;
    let parts: Vec<u32> = match a.partition {
        Some(p) => vec![p],
        None => t.partitions.iter().map(|p| p.partition).collect(),
    };
    let mut offsets = Vec::new();
    for p in &parts {
        let start = if a.from_beginning {
            0
        } else {
            cluster.fetch(&a.topic, *p, 0, 1, 0).await?.high_watermark
        };
        offsets.push(start);
    }
    let mut printed = 0u64;
    let mut idle_since = tokio::time::Instant::now();
    let wait = if parts.len() == 1 { 500 } else { 20 };
    loop {
        let mut got = false;
        for (i, p) in parts.iter().enumerate() {
            let r = match cluster.fetch(&a.topic, *p, offsets[i], 1 << 20, wait).await {
                Ok(r) => r,
                Err(e) if matches!(e.code(), None | Some(ErrorCode::NOT_LEADER_OR_FOLLOWER)) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                Err(e) => bail!("{}-{p}: {e}", a.topic),
            };
            for rec in r.records {
                println!("{}", String::from_utf8_lossy(&rec.value));
                offsets[i] = rec.offset + 1;
                printed += 1;
                got = true;
                if a.max_records.is_some_and(|m| printed >= m) {
                    return Ok(());
                }
            }
        }
        if got {
            idle_since = tokio::time::Instant::now();
        } else if a
            .timeout_ms
            .is_some_and(|t| idle_since.elapsed() >= Duration::from_millis(t))
        {
            return Ok(());
        }
    }
}
