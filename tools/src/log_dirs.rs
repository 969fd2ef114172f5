//! `ferry log-dirs`: kafka-log-dirs.sh's `--describe`, and `--move` to move replicas between the
//! log dirs of one broker (Kafka does this through the reassignment tool; Ferry offers both).

use anyhow::{bail, Context};
use clap::{ArgGroup, Args};
use proto::ferry::{DescribeLogDirsResponse, ReplicaLogDirMove};
use serde::Serialize;

use crate::{Bootstrap, ExitCode};

/// Flags of `ferry log-dirs`.
#[derive(Args)]
#[command(group(ArgGroup::new("action").required(true).args(["describe", "move_"])))]
pub struct LogDirsArgs {
    #[command(flatten)]
    bootstrap: Bootstrap,
    /// Print each broker's log dirs and the replicas in them, as Kafka's JSON.
    #[arg(long)]
    describe: bool,
    /// Move replicas of one broker (--broker) to a log dir (--log-dir).
    #[arg(long = "move")]
    move_: bool,
    /// Brokers to describe, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    broker_list: Vec<i32>,
    /// Topics to describe, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    topic_list: Vec<String>,
    /// The broker whose replicas move (with --move).
    #[arg(long)]
    broker: Option<i32>,
    /// Replicas to move, as `<topic>-<partition>`, comma-separated (with --move).
    #[arg(long, value_delimiter = ',')]
    partitions: Vec<String>,
    /// The destination log dir, an absolute path (with --move).
    #[arg(long)]
    log_dir: Option<String>,
}

#[derive(Serialize)]
struct Out {
    version: u32,
    brokers: Vec<BrokerOut>,
}

#[derive(Serialize)]
struct BrokerOut {
    broker: i32,
    #[serde(rename = "logDirs")]
    log_dirs: Vec<DirOut>,
}

#[derive(Serialize)]
struct DirOut {
    #[serde(rename = "logDir")]
    log_dir: String,
    error: Option<String>,
    partitions: Vec<PartitionOut>,
}

#[derive(Serialize)]
struct PartitionOut {
    partition: String,
    size: u64,
    #[serde(rename = "offsetLag")]
    offset_lag: i64,
    #[serde(rename = "isFuture")]
    is_future: bool,
}

/// Kafka's `kafka-log-dirs --describe` JSON for the brokers' answers.
pub fn describe_json(answers: &[DescribeLogDirsResponse]) -> String {
    let out = Out {
        version: 1,
        brokers: answers
            .iter()
            .map(|b| BrokerOut {
                broker: b.broker_id,
                log_dirs: b
                    .dirs
                    .iter()
                    .map(|d| DirOut {
                        log_dir: d.path.clone(),
                        error: (d.error_code != 0).then(|| {
                            // Kafka prints the exception's class name here.
                            format!("KafkaStorageException: {}", d.error_message)
                        }),
                        partitions: d
                            .replicas
                            .iter()
                            .map(|r| PartitionOut {
                                partition: format!("{}-{}", r.topic, r.partition),
                                size: r.size,
                                offset_lag: r.offset_lag,
                                is_future: r.is_future,
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
    };
    // Plain structs of strings and numbers always serialize.
    serde_json::to_string(&out).unwrap_or_default()
}

/// Splits `<topic>-<partition>`.
fn parse_partition(s: &str) -> anyhow::Result<(String, u32)> {
    let (topic, p) = s
        .rsplit_once('-')
        .filter(|(t, _)| !t.is_empty())
        .with_context(|| format!("--partitions: '{s}' is not <topic>-<partition>"))?;
    let p = p
        .parse()
        .with_context(|| format!("--partitions: '{s}': '{p}' is not a partition number"))?;
    Ok((topic.to_string(), p))
}

/// Runs `ferry log-dirs`.
pub async fn run(a: LogDirsArgs) -> anyhow::Result<()> {
    let client = a.bootstrap.cluster()?;
    if a.describe {
        println!("Querying brokers for log directories information");
        let answers = client.describe_log_dirs(&a.broker_list, &a.topic_list).await?;
        let ids: Vec<String> = answers.iter().map(|b| b.broker_id.to_string()).collect();
        println!("Received log directory information from brokers {}", ids.join(","));
        println!("{}", describe_json(&answers));
        return Ok(());
    }
    let Some(broker) = a.broker else {
        bail!("--move needs --broker");
    };
    let Some(dir) = a.log_dir else {
        bail!("--move needs --log-dir");
    };
    if a.partitions.is_empty() {
        bail!("--move needs --partitions");
    }
    let moves = a
        .partitions
        .iter()
        .map(|s| {
            parse_partition(s).map(|(topic, partition)| ReplicaLogDirMove {
                topic,
                partition,
                dir: dir.clone(),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let resp = client.alter_replica_log_dirs(broker, moves).await?;
    if resp.error_code != 0 {
        eprintln!("{}", resp.error_message);
        for r in &resp.results {
            eprintln!("  {}", r.error_message);
        }
        return Err(ExitCode(1).into());
    }
    let mut failed = false;
    for r in &resp.results {
        match r.error_code {
            0 => println!("Moving replica {}-{}-{broker} to {dir}.", r.topic, r.partition),
            9 => println!("{}", r.error_message),
            _ => {
                failed = true;
                eprintln!("{}", r.error_message);
            }
        }
    }
    if failed {
        return Err(ExitCode(1).into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::ferry::{LogDirDescription, LogDirReplica};

    #[test]
    fn describe_prints_kafkas_json() {
        let answers = vec![DescribeLogDirsResponse {
            broker_id: 0,
            dirs: vec![
                LogDirDescription {
                    path: "/d1".into(),
                    replicas: vec![LogDirReplica {
                        topic: "foo".into(),
                        partition: 0,
                        size: 123,
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                LogDirDescription {
                    path: "/d2".into(),
                    error_code: 56,
                    error_message: "disk gone".into(),
                    ..Default::default()
                },
            ],
        }];
        assert_eq!(
            describe_json(&answers),
            r#"{"version":1,"brokers":[{"broker":0,"logDirs":[{"logDir":"/d1","error":null,"partitions":[{"partition":"foo-0","size":123,"offsetLag":0,"isFuture":false}]},{"logDir":"/d2","error":"KafkaStorageException: disk gone","partitions":[]}]}]}"#
        );
    }

    #[test]
    fn partitions_parse_with_dashes_in_topics() {
        assert_eq!(parse_partition("a-b-3").unwrap(), ("a-b".to_string(), 3));
        assert!(parse_partition("nodash").is_err());
        assert!(parse_partition("t-x").is_err());
    }
}
