//! `ferry reassign`: kafka-reassign-partitions.sh's actions, flags, files and messages over the
//! `Admin` service. Throttles given here belong to the reassignment and go when it ends.

use std::collections::BTreeSet;

use anyhow::bail;
use broker::ClusterClient;
use clap::{ArgGroup, Args};
use proto::ferry::*;

use crate::reassign_file::{
    assignment_json, parse_file, read_text, rollback_or_missing, FileEntry, ReassignmentFile, TopicsFile,
};
use crate::{Bootstrap, ExitCode};

/// Flags of `ferry reassign`.
#[derive(Args)]
#[command(group(ArgGroup::new("action").required(true)
    .args(["generate", "execute", "verify", "cancel", "list", "cancel_all", "remove_cancel", "progress"])))]
pub struct ReassignArgs {
    #[command(flatten)]
    bootstrap: Bootstrap,
    /// Propose a reassignment of the topics in --topics-to-move-json-file onto --broker-list.
    #[arg(long)]
    generate: bool,
    /// `{"version":1,"topics":[{"topic":"t"}]}`, for --generate.
    #[arg(long)]
    topics_to_move_json_file: Option<std::path::PathBuf>,
    /// Brokers to place replicas on, for --generate: 1,2,3.
    #[arg(long, value_delimiter = ',')]
    broker_list: Vec<i32>,
    /// Ignore racks in --generate.
    #[arg(long)]
    disable_rack_aware: bool,
    /// Start the reassignment in the file.
    #[arg(long)]
    execute: bool,
    /// Report the status of the reassignment in the file.
    #[arg(long)]
    verify: bool,
    /// Cancel the file's partitions' reassignments, restoring their original replicas.
    #[arg(long)]
    cancel: bool,
    /// List the running reassignments.
    #[arg(long)]
    list: bool,
    /// Cancel every running reassignment and refuse new ones until --remove-cancel.
    #[arg(long)]
    cancel_all: bool,
    /// Remove the marker left by --cancel-all.
    #[arg(long)]
    remove_cancel: bool,
    /// The reassignment JSON file.
    #[arg(long)]
    reassignment_json_file: Option<std::path::PathBuf>,
    /// Replication throttle in bytes/s for the moving replicas; removed when the move ends.
    #[arg(long)]
    throttle: Option<i64>,
    /// Execute even while other reassignments run.
    #[arg(long)]
    additional: bool,
    /// Accepted for compatibility: Ferry never removes throttles set by hand.
    #[arg(long)]
    preserve_throttles: bool,
    /// Per partition and in total: bytes copied and left, rate and ETA of running reassignments.
    #[arg(long)]
    progress: bool,
    /// With --progress: live progress bars until every reassignment is done.
    #[arg(long, requires = "progress")]
    watch: bool,
    /// Throttle in bytes/s for moves between the log dirs of a broker, set on the brokers with
    /// a named log dir in the file.
    #[arg(long)]
    replica_alter_log_dirs_throttle: Option<i64>,
}

fn read_file(a: &ReassignArgs) -> anyhow::Result<ReassignmentFile> {
    parse_file(&read_text(
        a.reassignment_json_file.as_ref(),
        "--reassignment-json-file",
    )?)
}

/// `--generate`: the current assignment of the topics and a proposal that keeps what it can.
async fn generate(c: &ClusterClient, a: &ReassignArgs) -> anyhow::Result<()> {
    let text = read_text(a.topics_to_move_json_file.as_ref(), "--topics-to-move-json-file")?;
    let f: TopicsFile = serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("topics file: {e}"))?;
    if f.version != 1 {
        bail!("topics file: unknown version {}; only 1 is supported", f.version);
    }
    if a.broker_list.is_empty() {
        bail!("--broker-list is required with --generate");
    }
    let cluster = c
        .admin_call(|mut x| async move { x.describe_cluster(DescribeClusterRequest {}).await })
        .await?;
    let mut slots = Vec::new();
    // A broker whose every log dir is cordoned keeps its replicas but takes none new.
    let mut closed = BTreeSet::new();
    for id in &a.broker_list {
        let Some(b) = cluster.brokers.iter().find(|b| b.id == *id) else {
            bail!("--broker-list: broker {id} is not registered");
        };
        if !proto::cordon::takes_new_replicas(&b.log_dirs, &b.cordoned_log_dirs) {
            closed.insert(*id);
        }
        slots.push(controller::placement::BrokerSlot {
            id: *id,
            rack: (!b.rack.is_empty()).then(|| b.rack.clone()),
        });
    }
    let req = DescribeTopicsRequest {
        topics: f.topics.iter().map(|t| t.topic.clone()).collect(),
    };
    let d = c
        .admin_call(|mut x| {
            let req = req.clone();
            async move { x.describe_topics(req).await }
        })
        .await?;
    if let Some(t) = d.topics.iter().find(|t| t.error_code != 0) {
        bail!("{}", t.error_message);
    }
    let current: Vec<(String, u32, Vec<i32>)> = d
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.topic.clone(),
                    p.partition,
                    p.state.clone().unwrap_or_default().replicas,
                )
            })
        })
        .collect();
    let lists: Vec<Vec<i32>> = current.iter().map(|(_, _, r)| r.clone()).collect();
    let proposal =
        controller::placement::propose_moves(&lists, &slots, !a.disable_rack_aware, &closed).map_err(|e| match e {
            controller::placement::PlacementError::NoBrokerFor { index, .. } => {
                let (t, p, _) = &current[index];
                anyhow::anyhow!("{t}-{p}: {e}")
            }
            e => e.into(),
        })?;
    let proposed: Vec<(String, u32, Vec<i32>)> = current
        .iter()
        .zip(proposal)
        .map(|((t, p, _), r)| (t.clone(), *p, r))
        .collect();
    println!("Current partition replica assignment");
    println!("{}\n", assignment_json(&current)?);
    println!("Proposed partition reassignment configuration");
    println!("{}", assignment_json(&proposed)?);
    Ok(())
}

fn ids(v: &[i32]) -> String {
    v.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Each file entry's current replicas, `None` for a partition the cluster does not have.
async fn current(c: &ClusterClient, f: &ReassignmentFile) -> anyhow::Result<Vec<(FileEntry, Option<Vec<i32>>)>> {
    let topics: BTreeSet<String> = f.partitions.iter().map(|e| e.topic.clone()).collect();
    let req = DescribeTopicsRequest {
        topics: topics.into_iter().collect(),
    };
    let d = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.describe_topics(req).await }
        })
        .await?;
    Ok(f.partitions
        .iter()
        .map(|e| {
            let replicas = d
                .topics
                .iter()
                .find(|t| t.topic == e.topic)
                .and_then(|t| t.partitions.iter().find(|p| p.partition == e.partition))
                .and_then(|p| p.state.as_ref())
                .map(|s| s.replicas.clone());
            (e.clone(), replicas)
        })
        .collect())
}

async fn running(c: &ClusterClient) -> anyhow::Result<ListPartitionReassignmentsResponse> {
    Ok(c.admin_call(|mut a| async move {
        a.list_partition_reassignments(ListPartitionReassignmentsRequest::default())
            .await
    })
    .await?)
}

async fn alter(
    c: &ClusterClient,
    req: AlterPartitionReassignmentsRequest,
) -> anyhow::Result<AlterPartitionReassignmentsResponse> {
    Ok(c.admin_call(|mut a| {
        let req = req.clone();
        async move { a.alter_partition_reassignments(req).await }
    })
    .await?)
}

fn print_errors(r: &AlterPartitionReassignmentsResponse) -> anyhow::Error {
    println!("Error reassigning partition(s):");
    let bad: Vec<_> = r.results.iter().filter(|x| x.error_code != 0).collect();
    if bad.is_empty() {
        println!("{}", r.error_message);
    }
    for x in bad {
        println!("{}-{}: {}", x.topic, x.partition, x.error_message);
    }
    ExitCode(1).into()
}

/// Runs the command.
pub async fn run(a: ReassignArgs) -> anyhow::Result<()> {
    let c = a.bootstrap.cluster()?;
    if a.progress {
        return crate::reassign_progress::run(&c, a.watch).await;
    }
    if a.list {
        return list(&c).await;
    }
    if a.cancel_all {
        return cancel_all(&c).await;
    }
    if a.remove_cancel {
        return remove_cancel(&c).await;
    }
    if a.generate {
        return generate(&c, &a).await;
    }
    let f = read_file(&a)?;
    if a.execute {
        return execute(&c, &a, &f).await;
    }
    let l = running(&c).await?;
    let moving: BTreeSet<(String, u32)> = l.reassignments.iter().map(|r| (r.topic.clone(), r.partition)).collect();
    if a.verify {
        return verify(&c, &f, &moving).await;
    }
    cancel(&c, &f, &moving).await
}

/// `--list`: the running reassignments, and whether a cancel-all is in force.
async fn list(c: &ClusterClient) -> anyhow::Result<()> {
    let l = running(c).await?;
    if l.reassignments.is_empty() {
        println!("No partition reassignments found.");
    } else {
        println!("Current partition reassignments:");
        for r in &l.reassignments {
            println!(
                "{}-{}: replicas: {}. adding: {}. removing: {}.",
                r.topic,
                r.partition,
                ids(&r.replicas),
                ids(&r.adding),
                ids(&r.removing)
            );
        }
    }
    if l.cancel_in_progress {
        println!("A cancel-all is in force: new reassignments are refused until --remove-cancel.");
    }
    Ok(())
}

/// `--cancel-all`: cancels every running reassignment and refuses new ones.
async fn cancel_all(c: &ClusterClient) -> anyhow::Result<()> {
    let r = c
        .admin_call(|mut x| async move { x.cancel_all_reassignments(CancelAllReassignmentsRequest {}).await })
        .await?;
    if r.error_code != 0 {
        println!("Some reassignments could not be cancelled: {}", r.error_message);
    }
    let n = r.cancelled.len();
    println!(
        "Successfully cancelled all partition reassignments ({n} partition{}).",
        plural(n)
    );
    println!("New reassignments are refused until --remove-cancel.");
    Ok(())
}

/// `--remove-cancel`: removes the cancel-all marker.
async fn remove_cancel(c: &ClusterClient) -> anyhow::Result<()> {
    let r = c
        .admin_call(|mut x| async move { x.remove_cancel(RemoveCancelRequest {}).await })
        .await?;
    println!(
        "{}",
        if r.removed {
            "Removed the cancel-all marker; reassignments may be submitted again."
        } else {
            "No cancel-all marker was present."
        }
    );
    Ok(())
}

/// `--execute`: prints the rollback file, then starts the file's reassignment.
async fn execute(c: &ClusterClient, a: &ReassignArgs, f: &ReassignmentFile) -> anyhow::Result<()> {
    // As Kafka's tool does, everything checked here fails before the rollback file is printed.
    if !a.additional && !running(c).await?.reassignments.is_empty() {
        println!("Cannot execute because there is an existing partition assignment.  Use --additional to override this and create a new partition assignment in addition to the existing one.");
        return Err(ExitCode(1).into());
    }
    let rollback = rollback_or_missing(&current(c, f).await?).map_err(anyhow::Error::msg)?;
    println!("Current partition replica assignment\n");
    println!("{}\n", assignment_json(&rollback)?);
    println!("Save this to use as the --reassignment-json-file option during rollback");
    // The dir-move throttle goes on first, so that no move starts unthrottled.
    set_dir_move_throttle(c, f, a.replica_alter_log_dirs_throttle).await?;
    let req = AlterPartitionReassignmentsRequest {
        partitions: f
            .partitions
            .iter()
            .map(|e| ReassignmentTarget {
                topic: e.topic.clone(),
                partition: e.partition,
                replicas: Some(Replicas {
                    brokers: e.replicas.clone(),
                }),
                log_dirs: e.log_dirs.clone().unwrap_or_default(),
            })
            .collect(),
        throttle_rate: a.throttle,
        validate_only: false,
    };
    let r = alter(c, req).await?;
    if r.error_code != 0 {
        return Err(print_errors(&r));
    }
    if let Some(t) = a.throttle {
        println!("The inter-broker throttle limit was set to {t} B/s. It belongs to this reassignment and is removed when it ends; no --verify is needed.");
    }
    print_started(f);
    Ok(())
}

/// The partitions and log dir moves `--execute` started.
fn print_started(f: &ReassignmentFile) {
    let names: Vec<String> = f
        .partitions
        .iter()
        .map(|e| format!("{}-{}", e.topic, e.partition))
        .collect();
    println!(
        "Successfully started partition reassignment{} for {}",
        plural(names.len()),
        names.join(",")
    );
    let moves: Vec<String> = named_dirs(f)
        .iter()
        .map(|(b, topic, p, _)| format!("{topic}-{p}-{b}"))
        .collect();
    if !moves.is_empty() {
        println!(
            "Successfully started log directory move{} for: {}",
            plural(moves.len()),
            moves.join(",")
        );
    }
}

/// `--verify`: each file partition's status, then its log dir moves'.
async fn verify(c: &ClusterClient, f: &ReassignmentFile, moving: &BTreeSet<(String, u32)>) -> anyhow::Result<()> {
    println!("Status of partition reassignment:");
    for (e, replicas) in current(c, f).await? {
        let replicas = replicas.unwrap_or_default();
        let name = format!("{}-{}", e.topic, e.partition);
        if moving.contains(&(e.topic.clone(), e.partition)) {
            println!("Reassignment of partition {name} is still in progress.");
        } else if replicas == e.replicas {
            println!("Reassignment of partition {name} is completed.");
        } else {
            println!(
                "There is no active reassignment of partition {name}, but replica set is {} rather than {}.",
                ids(&replicas),
                ids(&e.replicas)
            );
        }
    }
    verify_dir_moves(c, f).await
}

/// `--cancel`: cancels the file's partitions that are moving.
async fn cancel(c: &ClusterClient, f: &ReassignmentFile, moving: &BTreeSet<(String, u32)>) -> anyhow::Result<()> {
    let active: Vec<&FileEntry> = f
        .partitions
        .iter()
        .filter(|e| moving.contains(&(e.topic.clone(), e.partition)))
        .collect();
    if active.is_empty() {
        println!("None of the specified partition reassignments are active.");
        return Ok(());
    }
    let req = AlterPartitionReassignmentsRequest {
        partitions: active
            .iter()
            .map(|e| ReassignmentTarget {
                topic: e.topic.clone(),
                partition: e.partition,
                replicas: None,
                log_dirs: vec![],
            })
            .collect(),
        throttle_rate: None,
        validate_only: false,
    };
    let r = alter(c, req).await?;
    if r.error_code != 0 {
        return Err(print_errors(&r));
    }
    // A move that finished after the list, or cannot roll back now, is answered on its own;
    // every other partition was cancelled.
    let refused: BTreeSet<(&str, u32)> = r.results.iter().map(|x| (x.topic.as_str(), x.partition)).collect();
    let names: Vec<String> = active
        .iter()
        .filter(|e| !refused.contains(&(e.topic.as_str(), e.partition)))
        .map(|e| format!("{}-{}", e.topic, e.partition))
        .collect();
    println!(
        "Successfully cancelled partition reassignment{} for: {}",
        plural(names.len()),
        names.join(",")
    );
    for x in &r.results {
        println!("Not cancelled: {}-{}: {}", x.topic, x.partition, x.error_message);
    }
    Ok(())
}

/// The replicas the file names a log dir for: (broker, topic, partition, dir).
fn named_dirs(f: &ReassignmentFile) -> Vec<(i32, String, u32, String)> {
    let mut out = Vec::new();
    for e in &f.partitions {
        for (b, d) in e.replicas.iter().zip(e.log_dirs.iter().flatten()) {
            if d != "any" {
                out.push((*b, e.topic.clone(), e.partition, d.clone()));
            }
        }
    }
    out
}

/// Sets the dir-move throttle on each broker the file names a log dir for.
async fn set_dir_move_throttle(c: &ClusterClient, f: &ReassignmentFile, throttle: Option<i64>) -> anyhow::Result<()> {
    let Some(rate) = throttle else {
        return Ok(());
    };
    if rate <= 0 {
        bail!("--replica-alter-log-dirs-throttle must be positive, got {rate}");
    }
    let brokers: BTreeSet<i32> = named_dirs(f).iter().map(|n| n.0).collect();
    for b in &brokers {
        let req = AlterConfigsRequest {
            resource: Some(ConfigResource {
                r#type: config_resource::Type::Broker as i32,
                name: b.to_string(),
            }),
            set: [(proto::topic_config::ALTER_LOG_DIRS_RATE.to_string(), rate.to_string())].into(),
            delete: vec![],
            validate_only: false,
            ops: vec![],
        };
        let r = c
            .admin_call(|mut x| {
                let req = req.clone();
                async move { x.alter_configs(req).await }
            })
            .await?;
        if r.error_code != 0 {
            bail!("setting the log dir throttle on broker {b}: {}", r.error_message);
        }
    }
    if !brokers.is_empty() {
        println!("The replica-alter-dir throttle limit was set to {rate} B/s");
    }
    Ok(())
}

/// Kafka's per-replica lines for the replicas the file puts in a named dir.
async fn verify_dir_moves(c: &ClusterClient, f: &ReassignmentFile) -> anyhow::Result<()> {
    let named = named_dirs(f);
    if named.is_empty() {
        return Ok(());
    }
    let mut brokers: Vec<i32> = named.iter().map(|n| n.0).collect();
    brokers.sort_unstable();
    brokers.dedup();
    let topics: Vec<String> = named.iter().map(|n| n.1.clone()).collect();
    let answers = c.describe_log_dirs(&brokers, &topics).await?;
    for (b, topic, partition, dir) in named {
        let done = answers.iter().filter(|a| a.broker_id == b).any(|a| {
            a.dirs.iter().any(|d| {
                d.path == dir
                    && d.replicas
                        .iter()
                        .any(|r| r.topic == topic && r.partition == partition && !r.is_future)
            })
        });
        let name = format!("{topic}-{partition}-{b}");
        if done {
            println!("Reassignment of replica {name} completed successfully.");
        } else {
            println!("Reassignment of replica {name} is still in progress.");
        }
    }
    Ok(())
}
