//! The client side of the fault suite. It runs as a process of its own (inside a network
//! namespace when the suite partitions the network), driven by the `ferry-fault-client` binary:
//! a register workload that records its history, a probe of who leads, and the final read of
//! every node.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use metastore::{Client, ClientError};
use proto::metastore as pb;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tonic::{Response, Status};

use crate::history::{Call, Op, Outcome};

/// Register keys: read, written and compare-and-set by every client.
pub const REGISTER_PREFIX: &str = "/fault/r/";
/// Keys each written once, by one client: every acknowledged one must survive.
pub const UNIQUE_PREFIX: &str = "/fault/u/";

/// What the workload does.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The nodes, HOST:PORT.
    pub endpoints: Vec<String>,
    /// Concurrent clients, each with its own connections.
    pub clients: u32,
    /// Register keys.
    pub keys: u32,
    /// How long clients start new operations.
    pub duration: Duration,
    /// Deadline of one attempt at one node; the client library then tries the next node, with
    /// the same request id, for up to its retry window.
    pub attempt_timeout: Duration,
    /// A client gives up on an operation after this long (a write's outcome is then unknown).
    pub op_timeout: Duration,
    /// Each client waits up to this long between operations, to keep histories checkable.
    pub think: Duration,
    /// Read replicas without a quorum round: such reads may be stale, so this is only for
    /// showing that the checker catches stale reads in a real run.
    pub serializable_reads: bool,
    /// Seeds the clients' choices.
    pub seed: u64,
}

/// Runs `fut` with a deadline; a miss is `DEADLINE_EXCEEDED`, which the client library retries.
async fn attempt<T>(
    timeout: Duration,
    fut: impl Future<Output = Result<Response<T>, Status>>,
) -> Result<Response<T>, Status> {
    tokio::time::timeout(timeout, fut)
        .await
        .unwrap_or_else(|_| Err(Status::deadline_exceeded("attempt timed out")))
}

/// How a failed write ended: only a refusal that no node can have applied is definite.
fn write_error(e: &ClientError) -> Outcome {
    use tonic::Code;
    match e.code() {
        Code::InvalidArgument | Code::PermissionDenied | Code::Unauthenticated | Code::Unimplemented => Outcome::Failed,
        _ => Outcome::Unknown,
    }
}

/// The node that answered.
fn member(h: &Option<pb::ResponseHeader>) -> u64 {
    h.as_ref().map_or(0, |h| h.member_id)
}

/// Puts `value` at `key`, retried with one request id; (outcome, node that answered).
async fn put(c: &Client, t: Duration, key: &str, value: &str) -> (Outcome, u64) {
    let req = pb::PutRequest {
        key: key.into(),
        value: value.to_string().into(),
        lease: 0,
        request_id: c.new_request_id(),
    };
    let r = c
        .call(|mut m| {
            let req = req.clone();
            async move { attempt(t, m.put(req)).await }
        })
        .await;
    match r {
        Ok(r) => (Outcome::Ok, member(&r.header)),
        Err(e) => (write_error(&e), 0),
    }
}

/// A read of `key`: linearizable unless `serializable`; (outcome, node that answered).
async fn get(c: &Client, t: Duration, key: &str, serializable: bool) -> (Outcome, u64) {
    let req = pb::GetRequest {
        key: key.into(),
        serializable,
    };
    let r = c
        .call(|mut m| {
            let req = req.clone();
            async move { attempt(t, m.get(req)).await }
        })
        .await;
    match r {
        Ok(r) => (
            Outcome::Read {
                value: r.kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned()),
            },
            member(&r.header),
        ),
        Err(_) => (Outcome::Unknown, 0),
    }
}

/// Puts `to` at `key` if it holds `from` (or is absent, for `None`); (outcome, node that
/// answered).
async fn cas(c: &Client, t: Duration, key: &str, from: Option<&str>, to: &str) -> (Outcome, u64) {
    let check = match from {
        Some(v) => pb::guard::Check::Value(v.to_string().into()),
        None => pb::guard::Check::Absent(true),
    };
    let req = pb::TxnRequest {
        guards: vec![pb::Guard {
            key: key.into(),
            check: Some(check),
        }],
        ops: vec![pb::Op {
            op: Some(pb::op::Op::Put(pb::PutOp {
                key: key.into(),
                value: to.to_string().into(),
                lease: 0,
            })),
        }],
        request_id: c.new_request_id(),
    };
    let r = c
        .call(|mut m| {
            let req = req.clone();
            async move { attempt(t, m.txn(req)).await }
        })
        .await;
    match r {
        Ok(r) if r.succeeded => (Outcome::Ok, member(&r.header)),
        Ok(r) => (Outcome::CasFailed, member(&r.header)),
        Err(e) => (write_error(&e), 0),
    }
}

/// Runs the workload and returns its history; times are from the workload's start.
pub async fn run_workload(w: &Workload) -> anyhow::Result<Vec<Op>> {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for id in 0..w.clients {
        let client = Client::new(&w.endpoints)?.starting_at(id as usize);
        let w = w.clone();
        tasks.push(tokio::spawn(async move { one_client(id, client, &w, start).await }));
    }
    let mut ops = Vec::new();
    for t in tasks {
        ops.extend(t.await?);
    }
    Ok(ops)
}

async fn one_client(id: u32, client: Client, w: &Workload, start: Instant) -> Vec<Op> {
    let now = || start.elapsed().as_micros() as u64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(w.seed ^ (u64::from(id) << 32));
    // The value this client last read of each register, for its compare-and-sets.
    let mut last_read: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut ops = Vec::new();
    let t = w.attempt_timeout;
    let mut seq = 0u64;
    while start.elapsed() < w.duration {
        seq += 1;
        let value = format!("c{id}-{seq}");
        let roll = rng.random_range(0..100);
        let (key, call) = if roll < 10 {
            (format!("{UNIQUE_PREFIX}{id}/{seq:06}"), Call::Write { value })
        } else {
            let key = format!("{REGISTER_PREFIX}{}", rng.random_range(0..w.keys));
            let call = match (roll, last_read.get(&key)) {
                (10..=49, _) => Call::Read,
                (50..=74, _) => Call::Write { value },
                (_, Some(from)) => Call::Cas {
                    from: from.clone(),
                    to: value,
                },
                (_, None) => Call::Read,
            };
            (key, call)
        };
        let invoke_us = now();
        let run = async {
            match &call {
                Call::Read => get(&client, t, &key, w.serializable_reads).await,
                Call::Write { value } => put(&client, t, &key, value).await,
                Call::Cas { from, to } => cas(&client, t, &key, from.as_deref(), to).await,
            }
        };
        let (outcome, node) = tokio::time::timeout(w.op_timeout, run)
            .await
            .unwrap_or((Outcome::Unknown, 0));
        let complete_us = now();
        if let Outcome::Read { value } = &outcome {
            last_read.insert(key.clone(), value.clone());
        }
        ops.push(Op {
            client: id,
            key,
            call,
            outcome,
            invoke_us,
            complete_us,
            node,
        });
        if !w.think.is_zero() {
            tokio::time::sleep(w.think.mul_f64(rng.random_range(0.0..1.0))).await;
        }
    }
    ops
}

/// One node's view, from its Status.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeView {
    /// The endpoint asked (index into the endpoints).
    pub endpoint: usize,
    /// The node's id.
    pub member: u64,
    /// The leader it knows, 0 for none.
    pub leader: u64,
    /// Its Raft term.
    pub term: u64,
    /// Its store's revision.
    pub revision: u64,
}

/// Asks every node for its status, each within `timeout`; nodes that do not answer are left out.
pub async fn probe(endpoints: &[String], timeout: Duration) -> anyhow::Result<Vec<NodeView>> {
    let client = Client::new(endpoints)?;
    let asks = (0..endpoints.len()).map(|i| {
        let client = client.clone();
        async move {
            let s = tokio::time::timeout(timeout, client.status_of(i)).await.ok()?.ok()?;
            let h = s.header.unwrap_or_default();
            Some(NodeView {
                endpoint: i,
                member: h.member_id,
                leader: h.leader_id,
                term: h.raft_term,
                revision: h.revision,
            })
        }
    });
    Ok(futures::future::join_all(asks).await.into_iter().flatten().collect())
}

/// The leader named by the node with the highest term that names one.
pub fn leader_of(views: &[NodeView]) -> Option<u64> {
    views
        .iter()
        .filter(|v| v.leader != 0)
        .max_by_key(|v| v.term)
        .map(|v| v.leader)
}

/// One node's own copy of the suite's keys.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeDump {
    /// The revision it was read at.
    pub revision: u64,
    /// Every key under the suite's prefix, with its value.
    pub kvs: BTreeMap<String, String>,
}

/// What the cluster holds at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FinalState {
    /// Each register's value after everything else, linearizably: by a read, or when reads were
    /// not served, confirmed by a transaction guarded on it. `None` if neither worked.
    pub registers: Option<BTreeMap<String, Option<String>>>,
    /// Whether linearizable reads were served within the window.
    pub reads_served: bool,
    /// Seconds from the start of the closing reads to their end (or to giving up).
    pub read_wait_s: f64,
    /// Each node's copy (by endpoint), read locally once it has applied a write made after the
    /// workload.
    pub nodes: Vec<NodeDump>,
}

/// Retries `f` every 200 ms until it succeeds or `within` passes.
async fn retry<T, Fut: Future<Output = Result<T, ClientError>>>(
    within: Duration,
    what: &str,
    mut f: impl FnMut() -> Fut,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + within;
    loop {
        match tokio::time::timeout(within, f()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) if Instant::now() >= deadline => anyhow::bail!("{what}: {e}"),
            Err(_) => anyhow::bail!("{what}: no answer within {within:?}"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Each attempt of the closing calls at one node is cut after this long, so that one stuck
/// node does not hold the client (the library itself sets no deadline per attempt).
const CLOSING_ATTEMPT: Duration = Duration::from_secs(2);

/// Reads the end state: a write after everything; each node's own copy once it has applied
/// that write (within `within`); then linearizable reads of the registers (within `reads_within`;
/// their absence is reported, not an error, since it says nothing about safety).
pub async fn final_state(
    endpoints: &[String],
    keys: u32,
    within: Duration,
    reads_within: Duration,
) -> anyhow::Result<FinalState> {
    let client = Client::new(endpoints)?;
    let t = CLOSING_ATTEMPT;
    let last = retry(within, "the closing write", || {
        let req = pb::PutRequest {
            key: "/fault/done".into(),
            value: "1".into(),
            lease: 0,
            request_id: client.new_request_id(),
        };
        client.call(move |mut m| {
            let req = req.clone();
            async move { attempt(t, m.put(req)).await }
        })
    })
    .await?
    .header
    .map_or(0, |h| h.revision);
    let mut nodes = Vec::new();
    for (i, endpoint) in endpoints.iter().enumerate() {
        let deadline = Instant::now() + within;
        loop {
            match tokio::time::timeout(t, client.status_of(i))
                .await
                .ok()
                .and_then(Result::ok)
            {
                Some(s) if s.header.as_ref().is_some_and(|h| h.revision >= last) => break,
                _ if Instant::now() >= deadline => anyhow::bail!("node at {endpoint} did not catch up"),
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        let range = pb::RangeRequest {
            prefix: "/fault/".into(),
            serializable: true,
            ..Default::default()
        };
        let r = client
            .call_endpoint(i, |mut c| async move { attempt(within, c.range(range)).await })
            .await?;
        nodes.push(NodeDump {
            revision: r.header.map_or(0, |h| h.revision),
            kvs: r
                .kvs
                .into_iter()
                .map(|kv| (kv.key, String::from_utf8_lossy(&kv.value).into_owned()))
                .collect(),
        });
    }
    let started = Instant::now();
    let mut registers = Some(BTreeMap::new());
    for k in 0..keys {
        let key = format!("{REGISTER_PREFIX}{k}");
        let req = pb::GetRequest {
            key: key.clone(),
            serializable: false,
        };
        let left = reads_within.saturating_sub(started.elapsed());
        let read = retry(left, "a closing read", || {
            client.call(|mut m| {
                let req = req.clone();
                async move { attempt(t, m.get(req)).await }
            })
        })
        .await;
        match (read, registers.as_mut()) {
            (Ok(r), Some(regs)) => {
                regs.insert(key, r.kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned()));
            }
            _ => {
                registers = None;
                break;
            }
        }
    }
    let read_wait_s = started.elapsed().as_secs_f64();
    let reads_served = registers.is_some();
    if !reads_served {
        let mut confirmed = BTreeMap::new();
        for k in 0..keys {
            let key = format!("{REGISTER_PREFIX}{k}");
            let Some(v) = confirm_by_txn(&client, &key, within).await else {
                break;
            };
            confirmed.insert(key, v);
        }
        registers = (confirmed.len() == keys as usize).then_some(confirmed);
    }
    Ok(FinalState {
        registers,
        reads_served,
        read_wait_s,
        nodes,
    })
}

/// A register's value, linearizably, without a linearizable read: a replica's value, confirmed
/// by a transaction whose only content is a guard on that value (it goes through the log, so its
/// guard sees the latest state). Retried while the value moves; `None` if no answer came.
async fn confirm_by_txn(client: &Client, key: &str, within: Duration) -> Option<Option<String>> {
    let t = CLOSING_ATTEMPT;
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let req = pb::GetRequest {
            key: key.into(),
            serializable: true,
        };
        let seen = client
            .call(|mut m| {
                let req = req.clone();
                async move { attempt(t, m.get(req)).await }
            })
            .await
            .ok()?
            .kv
            .map(|kv| kv.value);
        let check = match &seen {
            Some(v) => pb::guard::Check::Value(v.clone()),
            None => pb::guard::Check::Absent(true),
        };
        let req = pb::TxnRequest {
            guards: vec![pb::Guard {
                key: key.into(),
                check: Some(check),
            }],
            ops: vec![],
            request_id: client.new_request_id(),
        };
        let r = client
            .call(|mut m| {
                let req = req.clone();
                async move { attempt(t, m.txn(req)).await }
            })
            .await;
        if r.is_ok_and(|r| r.succeeded) {
            return Some(seen.map(|v| String::from_utf8_lossy(&v).into_owned()));
        }
    }
    None
}

/// What the end state lacks: acknowledged unique writes missing on a node, and nodes that
/// applied up to the same revision yet hold different keys or values. Empty when all is well.
pub fn durability_problems(ops: &[Op], end: &FinalState) -> Vec<String> {
    let acked: Vec<(&str, &str)> = ops
        .iter()
        .filter(|o| o.key.starts_with(UNIQUE_PREFIX) && o.write_ok())
        .filter_map(|o| Some((o.key.as_str(), o.written()?)))
        .collect();
    let mut problems = Vec::new();
    for (n, node) in end.nodes.iter().enumerate() {
        for (k, v) in &acked {
            if node.kvs.get(*k).map(String::as_str) != Some(*v) {
                problems.push(format!(
                    "endpoint {n}: acknowledged write {k} = {v}, but it holds {:?}",
                    node.kvs.get(*k)
                ));
            }
        }
    }
    for (n, a) in end.nodes.iter().enumerate() {
        for (m, b) in end.nodes.iter().enumerate().skip(n + 1) {
            if a.revision == b.revision && a.kvs != b.kvs {
                let differ = a
                    .kvs
                    .keys()
                    .chain(b.kvs.keys())
                    .find(|k| a.kvs.get(*k) != b.kvs.get(*k))
                    .cloned()
                    .unwrap_or_default();
                problems.push(format!(
                    "endpoints {n} and {m} both at revision {} differ, e.g. at {differ}",
                    a.revision
                ));
            }
        }
    }
    problems
}

/// Waits until the cluster takes a write.
pub async fn wait_ready(endpoints: &[String], within: Duration) -> anyhow::Result<()> {
    let client = Client::new(endpoints)?;
    retry(within, "the cluster did not take a write", || {
        client.put("/fault/ready", "1")
    })
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, value: &str, outcome: Outcome) -> Op {
        Op {
            client: 0,
            key: key.into(),
            call: Call::Write { value: value.into() },
            outcome,
            invoke_us: 0,
            complete_us: 1,
            node: 1,
        }
    }

    #[test]
    fn durability_flags_lost_acknowledged_writes_and_diverged_replicas() {
        let u1 = format!("{UNIQUE_PREFIX}0/1");
        let u2 = format!("{UNIQUE_PREFIX}0/2");
        let r0 = format!("{REGISTER_PREFIX}0");
        let ops = vec![put(&u1, "a", Outcome::Ok), put(&u2, "b", Outcome::Unknown)];
        let good = NodeDump {
            revision: 9,
            kvs: [(u1.clone(), "a".into()), (r0.clone(), "x".into())].into(),
        };
        let mut end = FinalState {
            registers: None,
            reads_served: true,
            read_wait_s: 0.0,
            nodes: vec![good.clone(), good.clone()],
        };
        assert!(durability_problems(&ops, &end).is_empty());
        // The unknown write may be missing or present; replicas at other revisions may differ.
        end.nodes[1].kvs.insert(u2, "b".into());
        end.nodes[1].revision = 10;
        assert!(durability_problems(&ops, &end).is_empty());
        end.nodes[1].revision = 9;
        assert_eq!(durability_problems(&ops, &end).len(), 1);
        end.nodes[0].kvs.remove(&u1);
        let p = durability_problems(&ops, &end);
        assert_eq!(p.len(), 2, "{p:?}");
    }
}
