//! Measures reassignment at scale on a running cluster, with empty partitions so that only
//! metadata moves: the time to commit one submit of N partitions, the time until every adding
//! replica exists on its broker (as its DescribeLogDirs reports), the time until every move has
//! completed (each adding replica has also joined the ISR and the move is committed), and the time
//! to commit a cancel-all over N pending moves. With brokers, the submit waits until every
//! replica of the new topic exists, so that their creation is not timed as part of the move, and
//! cancel-all is timed twice: right after a submit, while the brokers start creating the adding
//! replicas (`cancel_busy_s`), and over moves whose adding replicas exist (`cancel_all_s`).
//! The leader answers a submit once it has applied it; `applied_s` is the time until every
//! quorum node has, and the next step waits for that, so that it is not timed while followers
//! still apply. Prints a table and JSON lines.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use broker::ClusterClient;
use clap::Parser;
use proto::ferry::*;

/// Reassignment scale benchmark.
#[derive(Parser)]
struct Args {
    /// Quorum nodes, HOST:PORT[,...].
    #[arg(long, default_value = "127.0.0.1:7701")]
    bootstrap_server: String,
    /// Partition counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10000")]
    partitions: Vec<u32>,
    /// Server process ids, for their peak resident memory.
    #[arg(long, value_delimiter = ',')]
    server_pids: Vec<u32>,
    /// Give up waiting for completion after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout_s: u64,
    /// Register these broker ids without running brokers, for metadata-only runs on
    /// quorum-only nodes; they are removed at the end.
    #[arg(long, value_delimiter = ',')]
    fake_brokers: Vec<i32>,
    /// Do not wait for the moves to complete: cancel-all rolls back the submitted moves.
    #[arg(long)]
    no_complete: bool,
    /// The cluster credential file (a quorum node's `cluster-credential`): registering fake
    /// brokers writes the cluster's own keys.
    #[arg(long, env = "FERRY_CLUSTER_CREDENTIAL_FILE")]
    cluster_credential_file: Option<std::path::PathBuf>,
    /// Instead of the sizes, send requests just over each default limit and report the
    /// servers' resident memory before and their peak after (each must be refused).
    #[arg(long)]
    over_limit: bool,
}

/// A metastore client that carries the credential when one is given.
fn trusted_client(endpoints: &[String], credential: Option<&std::path::Path>) -> anyhow::Result<metastore::Client> {
    let m = metastore::Client::new(endpoints)?;
    if let Some(path) = credential {
        // A cluster that just formed writes the file a moment later.
        for _ in 0..300 {
            if path.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        m.set_credential_file(path)?;
    }
    Ok(m)
}

/// Puts registrations for brokers that do not run, so that topics and moves can name them.
async fn register_fake(endpoints: &[String], ids: &[i32], credential: Option<&std::path::Path>) -> anyhow::Result<()> {
    use prost::Message;
    let m = trusted_client(endpoints, credential)?;
    for id in ids {
        let reg = BrokerRegistration {
            id: *id,
            endpoint: "127.0.0.1:1".into(),
            ..Default::default()
        };
        m.put(&proto::keys::broker(*id), reg.encode_to_vec()).await?;
    }
    Ok(())
}

async fn unregister_fake(
    endpoints: &[String],
    ids: &[i32],
    credential: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let m = trusted_client(endpoints, credential)?;
    for id in ids {
        m.delete(&proto::keys::broker(*id)).await?;
    }
    Ok(())
}

/// A memory figure of `/proc/<pid>/status` (`VmHWM`: the peak; `VmRSS`: now) in MiB.
fn rss_mib(pid: u32, field: &str) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn peak_rss_mib(pid: u32) -> Option<f64> {
    rss_mib(pid, "VmHWM:")
}

/// Prints one refused request: a table row and a JSON line, with the servers' peak memory.
fn report_refusal(pids: &[u32], what: &str, refusal: String) {
    let peaks: Vec<String> = pids
        .iter()
        .filter_map(|p| peak_rss_mib(*p))
        .map(|v| format!("{v:.0}"))
        .collect();
    println!(
        "{what:<51} {:<31} {}",
        refusal.chars().take(31).collect::<String>(),
        peaks.join(",")
    );
    println!(
        "{}",
        serde_json::json!({"workload": "over_limit", "request": what, "refusal": refusal, "peak_rss_mib": peaks})
    );
}

/// Creates one topic; the first topic error, if it was refused.
async fn create_refusal(c: &ClusterClient, topic: NewTopic) -> anyhow::Result<Option<String>> {
    let req = CreateTopicsRequest {
        topics: vec![topic],
        validate_only: false,
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.create_topics(req).await }
        })
        .await?;
    Ok(r.results
        .iter()
        .find(|r| r.error_code != 0)
        .map(|r| r.error_message.clone()))
}

/// Requests just over each default limit; every one must be refused, naming its limit.
async fn over_limit(c: &ClusterClient, m: &metastore::Client, pids: &[u32]) -> anyhow::Result<()> {
    let limits = controller::limits::RequestLimits::default();
    let over_topic = limits.max_partitions_per_topic + 1;
    let over_request = limits.max_partitions_per_request + 1;
    let before: Vec<f64> = pids.iter().filter_map(|p| rss_mib(*p, "VmRSS:")).collect();
    println!(
        "request                                             refused_with                    peak_rss_mib_per_node"
    );
    // A count: the work it asks for is 2^31 records from a request of a few bytes.
    let count = NewTopic {
        topic: "over-count".into(),
        partitions: i32::MAX,
        replication_factor: 3,
        ..Default::default()
    };
    let refusal = create_refusal(c, count)
        .await?
        .context("a topic of 2^31 - 1 partitions was created")?;
    report_refusal(pids, "CreateTopics partitions=2147483647 rf=3", refusal);
    // An explicit assignment one partition over the topic limit.
    let assignment = NewTopic {
        topic: "over-assignment".into(),
        partitions: -1,
        replication_factor: -1,
        assignment: (0..over_topic).map(|_| Replicas { brokers: vec![1, 2, 3] }).collect(),
        ..Default::default()
    };
    let refusal = create_refusal(c, assignment)
        .await?
        .context("an over-limit assignment was created")?;
    report_refusal(pids, &format!("CreateTopics assignment of {over_topic} x 3"), refusal);
    // A reassignment one partition over the request limit.
    let r = reassign(c, "over-move", over_request, Some(vec![1, 2, 3])).await?;
    if r.error_code == 0 {
        bail!("a reassignment of {over_request} partitions was accepted");
    }
    report_refusal(
        pids,
        &format!("AlterPartitionReassignments of {over_request}"),
        r.error_message,
    );
    // One message over the byte limit.
    let big = limits.max_request_bytes + (1 << 20);
    match m.put("/over-limit", vec![0u8; big]).await {
        Ok(_) => bail!("a put of {big} bytes was accepted"),
        Err(e) => report_refusal(pids, &format!("Put of {} MiB", big >> 20), e.to_string()),
    }
    println!(
        "resident before: {} MiB",
        before.iter().map(|v| format!("{v:.0}")).collect::<Vec<_>>().join(",")
    );
    Ok(())
}

/// Sends one reassignment of partitions `0..n` of `topic` to `target` (`None`: cancel them).
async fn reassign(
    c: &ClusterClient,
    topic: &str,
    n: u32,
    target: Option<Vec<i32>>,
) -> anyhow::Result<AlterPartitionReassignmentsResponse> {
    let build = || AlterPartitionReassignmentsRequest {
        partitions: (0..n)
            .map(|p| ReassignmentTarget {
                topic: topic.to_string(),
                partition: p,
                replicas: target.clone().map(|brokers| Replicas { brokers }),
                log_dirs: vec![],
            })
            .collect(),
        throttle_rate: None,
        validate_only: false,
    };
    // Built once, as a client would; built again only for a retry (a copy of a 1,000,000-partition
    // request for every attempt was part of the timed submit).
    let mut first = Some(build());
    Ok(c.admin_call(|mut a| {
        let req = first.take().unwrap_or_else(build);
        async move { a.alter_partition_reassignments(req).await }
    })
    .await?)
}

async fn alter(c: &ClusterClient, topic: &str, n: u32, target: Option<i32>) -> anyhow::Result<()> {
    let r = reassign(c, topic, n, target.map(|b| vec![b])).await?;
    if r.error_code != 0 {
        bail!("submit refused: {}", r.error_message);
    }
    Ok(())
}

/// Replicas of `topic` that `broker` hosts (future logs of dir moves not counted).
async fn hosted(c: &ClusterClient, topic: &str, broker: i32) -> anyhow::Result<usize> {
    let req = AdminDescribeLogDirsRequest {
        brokers: vec![broker],
        topics: vec![topic.to_string()],
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.describe_log_dirs(req).await }
        })
        .await?;
    Ok(r.brokers
        .iter()
        .filter_map(|b| b.log_dirs.as_ref())
        .flat_map(|l| &l.dirs)
        .flat_map(|d| &d.replicas)
        .filter(|r| !r.is_future)
        .count())
}

async fn pending(c: &ClusterClient) -> anyhow::Result<usize> {
    let r = c
        .admin_call(|mut a| async move {
            a.list_partition_reassignments(ListPartitionReassignmentsRequest::default())
                .await
        })
        .await?;
    Ok(r.reassignments.len())
}

/// Waits until `broker` hosts all `n` partitions of `topic`.
async fn wait_hosted(c: &ClusterClient, topic: &str, broker: i32, n: u32, timeout_s: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    // A failed call only means asking again.
    while hosted(c, topic, broker).await.unwrap_or(0) < n as usize {
        if Instant::now() > deadline {
            bail!("broker {broker} did not host all {n} partitions of {topic} after {timeout_s} s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Commits a cancel-all, then removes the marker; returns its time and how many it cancelled.
async fn cancel_all(c: &ClusterClient) -> anyhow::Result<(f64, usize)> {
    let t = Instant::now();
    let r = c
        .admin_call(|mut a| async move { a.cancel_all_reassignments(CancelAllReassignmentsRequest {}).await })
        .await?;
    let took = t.elapsed().as_secs_f64();
    if r.error_code != 0 {
        bail!("cancel-all failed: {}", r.error_message);
    }
    c.admin_call(|mut a| async move { a.remove_cancel(RemoveCancelRequest {}).await })
        .await?;
    Ok((took, r.cancelled.len()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    // RUST_LOG=broker=debug shows each failed admin call before it is retried.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let endpoints: Vec<String> = a.bootstrap_server.split(',').map(String::from).collect();
    let c = ClusterClient::new(&endpoints)?.with_timeout(Duration::from_secs(600));
    register_fake(&endpoints, &a.fake_brokers, a.cluster_credential_file.as_deref()).await?;
    let m = metastore::Client::new(&endpoints)?;
    if a.over_limit {
        over_limit(&c, &m, &a.server_pids).await?;
        return unregister_fake(&endpoints, &a.fake_brokers, a.cluster_credential_file.as_deref()).await;
    }
    println!("partitions  create_s  submit_s  applied_s  exist_s  complete_s  cancel_busy_s  cancel_all_s  peak_rss_mib  term_start  term_end");
    for &n in &a.partitions {
        measure(&a, &c, &m, n).await?;
    }
    unregister_fake(&endpoints, &a.fake_brokers, a.cluster_credential_file.as_deref()).await?;
    Ok(())
}

/// Waits until every node's revision is at least the highest one any node reports now.
async fn wait_all_applied(m: &metastore::Client, timeout_s: u64) -> anyhow::Result<()> {
    let nodes = m.endpoints().len();
    let revision = |i| async move { m.status_of(i).await.ok().and_then(|s| s.header).map(|h| h.revision) };
    let mut target = 0;
    for i in 0..nodes {
        target = target.max(revision(i).await.unwrap_or(0));
    }
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    for i in 0..nodes {
        while revision(i).await.is_none_or(|r| r < target) {
            if Instant::now() > deadline {
                bail!("node {i} did not apply revision {target} in {timeout_s} s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// Creates a topic of `n` partitions on broker 1, with one replica each.
async fn create_topic(c: &ClusterClient, topic: &str, n: u32) -> anyhow::Result<()> {
    let req = CreateTopicsRequest {
        topics: vec![NewTopic {
            topic: topic.to_string(),
            partitions: -1,
            replication_factor: -1,
            assignment: (0..n).map(|_| Replicas { brokers: vec![1] }).collect(),
            config: Default::default(),
        }],
        validate_only: false,
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.create_topics(req).await }
        })
        .await
        .context("creating the topic")?;
    if let Some(e) = r.results.iter().find(|r| r.error_code != 0) {
        bail!("create refused: {}", e.error_message);
    }
    Ok(())
}

/// Waits for the moves submitted at `t` to broker 2 to complete: the seconds until every adding
/// replica existed, and until every move completed.
async fn wait_complete(
    c: &ClusterClient,
    topic: &str,
    n: u32,
    t: Instant,
    timeout_s: u64,
) -> anyhow::Result<(f64, f64)> {
    let mut exist_s = f64::NAN;
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    loop {
        // A replica joins the ISR only after it exists, so completion bounds existence.
        // Read after the answer arrives: an upper bound by one DescribeLogDirs call. A
        // failed call only means asking again.
        if exist_s.is_nan() && hosted(c, topic, 2).await.unwrap_or(0) >= n as usize {
            exist_s = t.elapsed().as_secs_f64();
            eprintln!("{n} partitions: every adding replica exists after {exist_s:.2} s");
        }
        if pending(c).await? == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("moves still pending after {timeout_s} s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let complete_s = t.elapsed().as_secs_f64();
    if exist_s.is_nan() {
        exist_s = complete_s;
    }
    Ok((exist_s, complete_s))
}

/// One size: creates a topic of `n` partitions, moves, cancels, prints a row and a JSON line,
/// and deletes the topic.
async fn measure(a: &Args, c: &ClusterClient, m: &metastore::Client, n: u32) -> anyhow::Result<()> {
    let term_start = m.highest_term().await.unwrap_or(0);
    let topic = format!("scale-{n}-{}", uuid::Uuid::new_v4().simple());
    let t = Instant::now();
    create_topic(c, &topic, n).await?;
    let create_s = t.elapsed().as_secs_f64();
    wait_all_applied(m, a.timeout_s).await?;
    if a.fake_brokers.is_empty() {
        // The move starts from a topic whose replicas all exist, as it would in production:
        // otherwise the first broker's creating them is timed as part of the move.
        wait_hosted(c, &topic, 1, n, a.timeout_s).await?;
        eprintln!(
            "{n} partitions: every replica of the new topic exists after {:.2} s",
            t.elapsed().as_secs_f64()
        );
    }

    let t = Instant::now();
    alter(c, &topic, n, Some(2)).await?;
    let submit_s = t.elapsed().as_secs_f64();
    wait_all_applied(m, a.timeout_s).await?;
    let applied_s = t.elapsed().as_secs_f64();
    let mut complete_s = f64::NAN;
    let mut exist_s = f64::NAN;
    let mut cancel_busy_s = f64::NAN;
    if !a.no_complete {
        (exist_s, complete_s) = wait_complete(c, &topic, n, t, a.timeout_s).await?;
        // Pending moves to a broker for cancel-all to roll back. First cancelled at once,
        // while the brokers start creating the adding replicas; then submitted again and
        // cancelled once those replicas exist (a move under way).
        alter(c, &topic, n, Some(3)).await?;
        cancel_busy_s = cancel_all(c).await?.0;
        alter(c, &topic, n, Some(3)).await?;
        wait_hosted(c, &topic, 3, n, a.timeout_s).await?;
    }
    let (cancel_s, cancelled) = cancel_all(c).await?;
    let peak = a
        .server_pids
        .iter()
        .filter_map(|p| peak_rss_mib(*p))
        .fold(0.0f64, f64::max);
    // A term that moved means the requests caused elections.
    let term_end = m.highest_term().await.unwrap_or(0);
    println!(
        "{n:>10}  {create_s:>8.2}  {submit_s:>8.2}  {applied_s:>9.2}  {exist_s:>7.2}  {complete_s:>10.2}  {cancel_busy_s:>13.2}  {cancel_s:>12.2}  {peak:>12.0}  {term_start:>10}  {term_end:>8}"
    );
    println!(
        "{}",
        serde_json::json!({"workload": "reassign", "partitions": n, "create_s": create_s, "submit_s": submit_s, "applied_s": applied_s,
            "exist_s": exist_s, "complete_s": complete_s, "cancel_busy_s": cancel_busy_s, "cancel_all_s": cancel_s, "cancelled": cancelled, "peak_rss_mib": peak,
            "raft_term_start": term_start, "raft_term_end": term_end})
    );
    let del = DeleteTopicsRequest { topics: vec![topic] };
    c.admin_call(|mut a| {
        let req = del.clone();
        async move { a.delete_topics(req).await }
    })
    .await?;
    Ok(())
}
