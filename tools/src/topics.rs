//! `ferry topics`: kafka-topics.sh's actions and flags over the `Admin` service.

use std::collections::HashMap;

use anyhow::bail;
use broker::ClusterClient;
use clap::{ArgGroup, Args};
use proto::ferry::*;

use crate::{Bootstrap, ExitCode};

/// Flags of `ferry topics`.
#[derive(Args)]
#[command(group(ArgGroup::new("action").required(true).args(["create", "delete", "describe", "list", "alter"])))]
pub struct TopicsArgs {
    #[command(flatten)]
    bootstrap: Bootstrap,
    /// Create a topic.
    #[arg(long)]
    create: bool,
    /// Delete a topic.
    #[arg(long)]
    delete: bool,
    /// Describe topics (all without --topic).
    #[arg(long)]
    describe: bool,
    /// List topic names.
    #[arg(long)]
    list: bool,
    /// Raise a topic's partition count (--partitions).
    #[arg(long)]
    alter: bool,
    /// The topic.
    #[arg(long)]
    topic: Option<String>,
    /// Number of partitions (with --create or --alter).
    #[arg(long)]
    partitions: Option<i32>,
    /// Replication factor (with --create).
    #[arg(long)]
    replication_factor: Option<i32>,
    /// Explicit replicas: partitions separated by ',', brokers by ':' (e.g. 1:2,2:3).
    #[arg(long)]
    replica_assignment: Option<String>,
    /// A topic config, k=v; repeat for more.
    #[arg(long = "config")]
    configs: Vec<String>,
    /// Check the request without applying it.
    #[arg(long)]
    validate_only: bool,
}

/// Parses `1:2:3,2:3:1`.
pub fn parse_assignment(s: &str) -> anyhow::Result<Vec<Replicas>> {
    s.split(',')
        .enumerate()
        .map(|(i, part)| {
            let brokers = part
                .split(':')
                .map(|b| {
                    b.trim()
                        .parse::<i32>()
                        .map_err(|_| anyhow::anyhow!("--replica-assignment: partition {i}: {b:?} is not a broker id"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(Replicas { brokers })
        })
        .collect()
}

fn parse_configs(v: &[String]) -> anyhow::Result<HashMap<String, String>> {
    v.iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => bail!("--config: {kv:?} is not k=v"),
        })
        .collect()
}

fn fail(message: &str) -> anyhow::Error {
    eprintln!("Error while executing topic command : {message}");
    ExitCode(1).into()
}

/// The request's own error, if it was refused whole, else the first topic's.
fn check(error_code: i32, error_message: &str, results: &[TopicResult]) -> anyhow::Result<()> {
    if error_code != 0 {
        return Err(fail(error_message));
    }
    match results.iter().find(|r| r.error_code != 0) {
        Some(r) => Err(fail(&r.error_message)),
        None => Ok(()),
    }
}

fn ids(v: &[i32]) -> String {
    v.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

/// The `--topic` the action needs.
fn topic(a: &TopicsArgs) -> anyhow::Result<String> {
    a.topic
        .clone()
        .ok_or_else(|| fail("--topic is required for this action"))
}

/// Runs the command.
pub async fn run(a: TopicsArgs) -> anyhow::Result<()> {
    let cluster = a.bootstrap.cluster()?;
    if a.create {
        create(&cluster, &a).await
    } else if a.delete {
        delete(&cluster, &a).await
    } else if a.alter {
        alter(&cluster, &a).await
    } else {
        describe(&cluster, &a).await
    }
}

/// `--create`: one topic, by count and replication factor or by explicit replicas.
async fn create(cluster: &ClusterClient, a: &TopicsArgs) -> anyhow::Result<()> {
    let assignment = a.replica_assignment.as_deref().map(parse_assignment).transpose()?;
    let name = topic(a)?;
    let t = NewTopic {
        topic: name.clone(),
        partitions: if assignment.is_some() {
            -1
        } else {
            a.partitions.unwrap_or(1)
        },
        replication_factor: if assignment.is_some() {
            -1
        } else {
            a.replication_factor.unwrap_or(1)
        },
        assignment: assignment.unwrap_or_default(),
        config: parse_configs(&a.configs)?,
    };
    let req = CreateTopicsRequest {
        topics: vec![t],
        validate_only: a.validate_only,
    };
    let r = cluster
        .admin_call(|mut c| {
            let req = req.clone();
            async move { c.create_topics(req).await }
        })
        .await?;
    check(r.error_code, &r.error_message, &r.results)?;
    println!("Created topic {name}.");
    Ok(())
}

/// `--delete`: one topic.
async fn delete(cluster: &ClusterClient, a: &TopicsArgs) -> anyhow::Result<()> {
    let name = topic(a)?;
    let req = DeleteTopicsRequest {
        topics: vec![name.clone()],
    };
    let r = cluster
        .admin_call(|mut c| {
            let req = req.clone();
            async move { c.delete_topics(req).await }
        })
        .await?;
    check(r.error_code, &r.error_message, &r.results)?;
    println!("Deleted topic {name}.");
    Ok(())
}

/// `--alter`: raises one topic's partition count.
async fn alter(cluster: &ClusterClient, a: &TopicsArgs) -> anyhow::Result<()> {
    let name = topic(a)?;
    let Some(count) = a.partitions else {
        return Err(fail("--alter needs --partitions"));
    };
    let assignment = a.replica_assignment.as_deref().map(parse_assignment).transpose()?;
    let req = CreatePartitionsRequest {
        topics: vec![PartitionCount {
            topic: name.clone(),
            count,
            assignment: assignment.unwrap_or_default(),
        }],
        validate_only: a.validate_only,
    };
    let r = cluster
        .admin_call(|mut c| {
            let req = req.clone();
            async move { c.create_partitions(req).await }
        })
        .await?;
    check(r.error_code, &r.error_message, &r.results)?;
    println!("Altered topic {name}: {count} partitions.");
    Ok(())
}

/// `--describe` and `--list`: the topic (or all), described or only named.
async fn describe(cluster: &ClusterClient, a: &TopicsArgs) -> anyhow::Result<()> {
    let req = DescribeTopicsRequest {
        topics: a.topic.iter().cloned().collect(),
    };
    let r = cluster
        .admin_call(|mut c| {
            let req = req.clone();
            async move { c.describe_topics(req).await }
        })
        .await?;
    if r.error_code != 0 {
        return Err(fail(&r.error_message));
    }
    if let Some(t) = r.topics.iter().find(|t| t.error_code != 0) {
        return Err(fail(&t.error_message));
    }
    for t in &r.topics {
        if a.list {
            println!("{}", t.topic);
        } else {
            print_topic(t);
        }
    }
    Ok(())
}

/// kafka-topics.sh's description of one topic: a summary line, then one line per partition.
fn print_topic(t: &TopicDescription) {
    let rf = t
        .partitions
        .first()
        .and_then(|p| p.state.as_ref())
        .map_or(0, |s| s.replicas.len());
    let mut configs: Vec<String> = t.config.iter().map(|(k, v)| format!("{k}={v}")).collect();
    configs.sort();
    println!(
        "Topic: {}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {rf}\tConfigs: {}",
        t.topic,
        t.topic_id,
        t.partitions.len(),
        configs.join(",")
    );
    for p in &t.partitions {
        let s = p.state.clone().unwrap_or_default();
        let leader = if s.leader < 0 {
            "none".to_string()
        } else {
            s.leader.to_string()
        };
        println!(
            "\tTopic: {}\tPartition: {}\tLeader: {leader}\tReplicas: {}\tIsr: {}",
            t.topic,
            p.partition,
            ids(&s.replicas),
            ids(&s.isr)
        );
    }
}
