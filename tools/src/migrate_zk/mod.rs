//! `ferry migrate-zk`: imports a Kafka cluster's metadata from ZooKeeper into the metastore in
//! one guarded transaction, in-flight reassignments and their throttles included, with the
//! ACLs and SCRAM credentials. `parse` and `security` type the znodes, `plan` turns them into
//! Ferry's keys; this module only reads and writes.

pub mod parse;
pub mod plan;
pub mod security;
pub mod zk;

use std::collections::BTreeMap;
use std::time::Instant;

use clap::Args;
use proto::ferry::ClusterIdRecord;
use proto::keys;
use proto::metastore as pb;

use crate::{Bootstrap, ExitCode};
use plan::{Plan, Value};

/// Flags of `ferry migrate-zk`.
#[derive(Args)]
pub struct MigrateZkArgs {
    #[command(flatten)]
    bootstrap: Bootstrap,
    /// The Kafka cluster's ZooKeeper: HOST:PORT[,HOST:PORT...][/chroot]. Only read.
    #[arg(long)]
    zookeeper: String,
    /// Print what would be imported, in Kafka's JSON, and write nothing.
    #[arg(long, conflicts_with = "verify")]
    dry_run: bool,
    /// Compare ZooKeeper with the metastore and print each difference (exit 1 if any).
    #[arg(long)]
    verify: bool,
    /// Import what is valid and list the malformed or contradicting znodes left out.
    #[arg(long)]
    skip_invalid: bool,
}

/// Prefixes of the keys an import may write; read back to compare.
const PREFIXES: &[&str] = &[
    keys::TOPICS,
    keys::BROKER_CONFIGS,
    keys::CLUSTER_ID,
    keys::REASSIGN_CANCEL,
    keys::ACLS,
    keys::SCRAM_USERS,
];

fn secs(t: Instant) -> String {
    format!("{:.2} s", t.elapsed().as_secs_f64())
}

/// Runs the command.
pub async fn run(a: MigrateZkArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let zk = zk::connect(&a.zookeeper).await?;
    let mut raw = zk::read(&zk).await?;
    let (security, refused) = zk::read_security(&zk).await?;
    raw.extend(security);
    let read_time = secs(started);
    let mut cluster = parse::parse(&raw)?;
    security::parse_into(&raw, &mut cluster);
    cluster.problems.extend(refused);
    let plan = plan::plan(&cluster);
    eprintln!(
        "Read {} znodes from ZooKeeper in {read_time}; {} keys planned.",
        raw.len(),
        plan.writes.len()
    );
    if a.verify {
        return verify(&a.bootstrap.client()?, &plan).await;
    }
    if !plan.skipped.is_empty() {
        if !a.skip_invalid {
            for s in &plan.skipped {
                eprintln!("error: {s}");
            }
            eprintln!(
                "Nothing was imported: {} znode(s) are malformed or contradict others. Fix them, or use --skip-invalid to import the rest.",
                plan.skipped.len()
            );
            return Err(ExitCode(1).into());
        }
        for s in &plan.skipped {
            println!("Skipped: {s}");
        }
    }
    if a.dry_run {
        print!("{}", plan.render());
        println!("Would import {}.", plan.summary());
        println!("Dry run: nothing was written.");
        return Ok(());
    }
    import(&a.bootstrap.client()?, &plan).await?;
    for n in &plan.notes {
        println!("Note: {n}");
    }
    eprintln!("Done in {}.", secs(started));
    Ok(())
}

/// Reads every key under the prefixes an import writes.
async fn stored(client: &metastore::Client) -> anyhow::Result<BTreeMap<String, pb::KeyValue>> {
    let mut out = BTreeMap::new();
    for p in PREFIXES {
        for kv in client.range(p, 0).await?.kvs {
            out.insert(kv.key.clone(), kv);
        }
    }
    Ok(out)
}

/// The cluster id the metastore holds, if any.
fn stored_cluster_id(stored: &BTreeMap<String, pb::KeyValue>) -> Option<String> {
    let kv = stored.get(keys::CLUSTER_ID)?;
    match Value::ClusterId(ClusterIdRecord::default()).decode_like(&kv.value) {
        Some(Value::ClusterId(c)) => Some(c.id),
        // An undecodable id is still not this cluster's.
        _ => Some(String::from_utf8_lossy(&kv.value).into_owned()),
    }
}

fn put(key: &str, value: &Value) -> pb::Op {
    pb::Op {
        op: Some(pb::op::Op::Put(pb::PutOp {
            key: key.to_string(),
            value: value.encode().into(),
            lease: 0,
        })),
    }
}

fn guard(key: &str, check: pb::guard::Check) -> pb::Guard {
    pb::Guard {
        key: key.to_string(),
        check: Some(check),
    }
}

/// Imports `plan`. A cluster that has just formed gives itself an id at the same time
/// (`generated`); an import that lost that race to it reads again and replaces it.
async fn import(client: &metastore::Client, plan: &Plan) -> anyhow::Result<()> {
    for _ in 0..3 {
        if import_once(client, plan).await? {
            return Ok(());
        }
    }
    eprintln!("error: the metastore kept changing during the import; nothing was written. Run it again.");
    Err(ExitCode(1).into())
}

/// One try of [`import`]; `Ok(false)` when only the cluster's new id got in its way.
async fn import_once(client: &metastore::Client, plan: &Plan) -> anyhow::Result<bool> {
    let mut before = stored(client).await?;
    // The id Ferry gave the cluster when it formed is replaced by the Kafka cluster's: the
    // import then reads as into a cluster that never had one, guarded on that record.
    let generated = before
        .get(keys::CLUSTER_ID)
        .and_then(|kv| <ClusterIdRecord as prost::Message>::decode(kv.value.as_ref()).ok())
        .filter(|r| r.generated)
        .and_then(|_| before.remove(keys::CLUSTER_ID));
    if let Some(ours) = stored_cluster_id(&before).filter(|id| *id != plan.cluster_id) {
        eprintln!(
            "error: {}: the metastore already holds cluster {ours:?}, and ZooKeeper holds cluster {:?}; refusing to import. Nothing was written.",
            keys::CLUSTER_ID,
            plan.cluster_id
        );
        return Err(ExitCode(1).into());
    }
    // After a first import Ferry owns the metadata (moves complete, leaders change), so a
    // re-run may only find it unchanged: it never recreates or overwrites a key.
    let imported = before.contains_key(keys::CLUSTER_ID);
    let mut puts = Vec::new();
    let mut conflicts = Vec::new();
    let mut unchanged = 0usize;
    for (k, v) in &plan.writes {
        match before.get(k) {
            None if !imported => puts.push((k, v)),
            Some(kv) if v.same_as(&kv.value) => unchanged += 1,
            _ => conflicts.push(k.as_str()),
        }
    }
    if !conflicts.is_empty() {
        let what = if imported {
            format!(
                "the metastore already holds an import of cluster {} and",
                plan.cluster_id
            )
        } else {
            "the metastore already holds keys of this import:".to_string()
        };
        eprintln!(
            "error: {what} {} key(s) differ from ZooKeeper, the first: {}. Nothing was written; `ferry migrate-zk --verify` shows the differences.",
            conflicts.len(),
            conflicts.iter().take(5).copied().collect::<Vec<_>>().join(", ")
        );
        return Err(ExitCode(1).into());
    }
    if puts.is_empty() {
        println!(
            "Nothing changed: the metastore already holds {} ({unchanged} keys unchanged).",
            plan.summary()
        );
        return Ok(true);
    }
    // Race-free: the cluster id and every key written are still absent when the entry applies.
    let guards: Vec<pb::Guard> = puts
        .iter()
        .map(|(k, _)| match &generated {
            Some(kv) if k.as_str() == keys::CLUSTER_ID => guard(k, pb::guard::Check::ModRevision(kv.mod_revision)),
            _ => guard(k, pb::guard::Check::Absent(true)),
        })
        .collect();
    let ops: Vec<pb::Op> = puts.iter().map(|(k, v)| put(k, v)).collect();
    let n = ops.len();
    let resp = client
        .txn(pb::TxnRequest {
            guards,
            ops,
            request_id: String::new(),
        })
        .await?;
    if !resp.succeeded && resp.failed_reason.contains(keys::CLUSTER_ID) {
        return Ok(false);
    }
    if !resp.succeeded {
        eprintln!(
            "error: the metastore changed during the import ({}); nothing was written. Run it again.",
            resp.failed_reason
        );
        return Err(ExitCode(1).into());
    }
    println!(
        "Imported {}: {n} keys written in one transaction (revision {}).",
        plan.summary(),
        resp.header.map_or(0, |h| h.revision)
    );
    Ok(true)
}

/// The differences between what ZooKeeper says and what the metastore holds, one a line.
pub fn differences(plan: &Plan, stored: &BTreeMap<String, pb::KeyValue>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in &plan.writes {
        let ours = stored.get(k).map(|kv| kv.value.as_ref());
        if let Some(d) = plan::security_differences(k, Some(v), ours) {
            out.extend(d);
            continue;
        }
        match stored.get(k) {
            None => out.push(format!("{k}: in ZooKeeper {}, missing in Ferry", v.describe())),
            Some(kv) => match v.decode_like(&kv.value) {
                Some(ours) if v.agrees_with(&ours) => {}
                Some(ours) => out.push(format!(
                    "{k}: in ZooKeeper {}, in Ferry {}",
                    v.describe(),
                    ours.describe()
                )),
                None => out.push(format!("{k}: in ZooKeeper {}, undecodable in Ferry", v.describe())),
            },
        }
    }
    // What Ferry holds of the imported kinds that ZooKeeper does not.
    for (k, kv) in stored.iter().filter(|(k, _)| !plan.writes.contains_key(*k)) {
        if let Some(d) = plan::security_differences(k, None, Some(kv.value.as_ref())) {
            out.extend(d);
            continue;
        }
        let topic_of = |t: &str| plan.writes.contains_key(&keys::topic(t));
        let extra = match keys::parse_topic_key(k) {
            Some(keys::TopicKey::Partition(t, _)) => topic_of(t),
            Some(keys::TopicKey::Topic(_)) => true,
            None => k.as_str() == keys::REASSIGN_CANCEL,
        };
        if extra {
            out.push(format!("{k}: missing in ZooKeeper, present in Ferry"));
        }
    }
    out
}

async fn verify(client: &metastore::Client, plan: &Plan) -> anyhow::Result<()> {
    for s in &plan.skipped {
        println!("Not comparable (invalid in ZooKeeper): {s}");
    }
    let stored = stored(client).await?;
    let diffs = differences(plan, &stored);
    for d in &diffs {
        println!("{d}");
    }
    if diffs.is_empty() && plan.skipped.is_empty() {
        println!("No differences: the metastore holds {}.", plan.summary());
        return Ok(());
    }
    println!("{} difference(s) between ZooKeeper and the metastore.", diffs.len());
    Err(ExitCode(1).into())
}
