//! Helpers for tests of the plans the controller runs: create, show, alter and undrain them on
//! the Admin service, read partition states from the metastore, sample the moves in flight per
//! broker, produce steadily at acks=all and read every acknowledged record back.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use broker::ClusterClient;
use bytes::Bytes;
use prost::Message;
use proto::ferry::config_resource::Type;
use proto::ferry::*;

use crate::data::read_all;
use crate::reassign::{config_of, create, produce_n};

/// Creates `topic` with `partitions` partitions, each on broker 4 and one of brokers 1 to 3, with
/// about 20 kB each: a drain of broker 4 moves every one.
pub async fn topic_on_four(c: &ClusterClient, topic: &str, partitions: u32) {
    let assignment = (0..partitions).map(|p| vec![4, 1 + (p % 3) as i32]).collect();
    create(c, topic, assignment, &[]).await;
    for p in 0..partitions {
        produce_n(c, topic, p, 4, 10, 500).await;
    }
}

/// Waits until plan `id` runs at least one move.
pub async fn until_a_move_runs(c: &ClusterClient, id: u64) {
    crate::wait_until(Duration::from_secs(60), "a move running", || async {
        show(c, id, false).await.running > 0
    })
    .await;
}

/// CreatePlan, as answered.
pub async fn create_plan(c: &ClusterClient, req: CreatePlanRequest) -> CreatePlanResponse {
    c.admin_call(|mut a| {
        let req = req.clone();
        async move { a.create_plan(req).await }
    })
    .await
    .expect("admin reachable")
}

/// CreatePlan that must be accepted; the plan stored.
pub async fn create_ok(c: &ClusterClient, req: CreatePlanRequest) -> PlanInfo {
    let r = create_plan(c, req).await;
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    r.plan.expect("the plan stored")
}

/// Plan `id` as ListPlans answers it, with its moves when `with_moves`.
pub async fn show(c: &ClusterClient, id: u64, with_moves: bool) -> PlanInfo {
    let r = c
        .admin_call(|mut a| async move {
            a.list_plans(ListPlansRequest {
                id: Some(id),
                with_moves,
            })
            .await
        })
        .await
        .expect("admin reachable");
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    r.plans.into_iter().next().expect("the plan")
}

/// AlterPlan (pause, resume or cancel) that must be accepted; the plan as written.
pub async fn alter_plan(c: &ClusterClient, id: u64, action: alter_plan_request::Action) -> PlanInfo {
    let r = c
        .admin_call(|mut a| async move {
            a.alter_plan(AlterPlanRequest {
                id,
                action: action as i32,
            })
            .await
        })
        .await
        .expect("admin reachable");
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    r.plan.expect("the plan altered")
}

/// Undrain of a broker (or one of its dirs) that must be accepted; the plans it stopped.
pub async fn undrain(c: &ClusterClient, broker: i32, dir: Option<&str>) -> Vec<u64> {
    let req = UndrainRequest {
        broker,
        dir: dir.map(str::to_string),
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.undrain(req).await }
        })
        .await
        .expect("admin reachable");
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    r.stopped
}

/// A drain of `broker` with caps of `into` moves into and `out` out of each broker, and a
/// throttle (bytes/s) when given.
pub fn drain_req(broker: i32, into: i64, out: i64, throttle: Option<i64>) -> CreatePlanRequest {
    CreatePlanRequest {
        kind: Some(create_plan_request::Kind::DrainBroker(DrainBrokerPlan { broker })),
        caps: Some(PlanCaps {
            max_moves_into_broker: Some(into),
            max_moves_out_of_broker: Some(out),
            ..Default::default()
        }),
        throttle_rate: throttle,
        dry_run: false,
    }
}

/// Waits until plan `id` is in `state`; panics with the last answer after `timeout`.
pub async fn wait_state(c: &ClusterClient, id: u64, state: &str, timeout: Duration) -> PlanInfo {
    let mut last = None;
    let waited = tokio::time::timeout(timeout, async {
        loop {
            let p = show(c, id, false).await;
            if p.state == state {
                return p;
            }
            last = Some(p);
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await;
    waited.unwrap_or_else(|_| panic!("plan {id} never became {state}: {last:?}"))
}

/// Polls `f` every 100 ms until it gives a value; panics with `what` after `timeout`.
pub async fn poll<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether a plan state is one a plan ends in.
pub fn is_terminal(state: &str) -> bool {
    matches!(state, "done" | "cancelled" | "failed")
}

/// Every partition state of `topic`, read from the metastore.
pub async fn states(meta: &metastore::Client, topic: &str) -> BTreeMap<u32, PartitionState> {
    let r = meta
        .range(&format!("/brokers/topics/{topic}/partitions/"), 0)
        .await
        .expect("metastore reachable");
    r.kvs
        .iter()
        .filter_map(|kv| {
            let p: u32 = kv.key.rsplit('/').next()?.parse().ok()?;
            Some((p, PartitionState::decode(kv.value.as_ref()).ok()?))
        })
        .collect()
}

/// The partitions of `topic` with a reassignment in flight, read from the metastore.
pub async fn moving(meta: &metastore::Client, topic: &str) -> BTreeSet<u32> {
    states(meta, topic)
        .await
        .into_iter()
        .filter(|(_, s)| s.reassignment.is_some())
        .map(|(p, _)| p)
        .collect()
}

/// Sorted, to compare replica sets.
pub fn sorted(v: &[i32]) -> Vec<i32> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v
}

/// The most moves seen at once into and out of any broker.
#[derive(Debug, Default, Clone, Copy)]
pub struct Peak {
    /// Most adding replicas on one broker at once.
    pub into: usize,
    /// Most removing replicas on one broker at once.
    pub out: usize,
    /// Samples taken.
    pub samples: usize,
}

/// Samples `topic`'s reassignment state in the metastore every 100 ms until `stop`: the most
/// moves at once into and out of any broker.
pub fn sample_peaks(meta: metastore::Client, topic: &str, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Peak> {
    let topic = topic.to_string();
    tokio::spawn(async move {
        let mut peak = Peak::default();
        while !stop.load(Ordering::Relaxed) {
            let (mut into, mut out) = (BTreeMap::<i32, usize>::new(), BTreeMap::<i32, usize>::new());
            for s in states(&meta, &topic).await.values() {
                for b in &s.adding {
                    *into.entry(*b).or_default() += 1;
                }
                for b in &s.removing {
                    *out.entry(*b).or_default() += 1;
                }
            }
            peak.into = peak.into.max(into.values().copied().max().unwrap_or(0));
            peak.out = peak.out.max(out.values().copied().max().unwrap_or(0));
            peak.samples += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        peak
    })
}

/// An acknowledged record: partition, offset, value.
pub type Acked = (u32, i64, String);

/// Produces one record at a time at acks=all over `partitions` of `topic`, every 20 ms, until
/// `stop` or `bound` records; keeps each acknowledged one.
pub fn produce_steadily(
    c: ClusterClient,
    topic: &str,
    partitions: u32,
    bound: u32,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<Acked>> {
    let topic = topic.to_string();
    tokio::spawn(async move {
        let mut acked = Vec::new();
        for i in 0..bound {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let p = i % partitions;
            let value = format!("steady-{i}");
            if let Ok(offset) = c.produce_once(&topic, p, vec![Bytes::from(value.clone())], -1).await {
                acked.push((p, offset, value));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        acked
    })
}

/// Each acknowledged record of `topic` is read back at its offset.
pub async fn every_ack_read_back(c: &ClusterClient, topic: &str, acked: &[Acked]) {
    let mut by_partition: BTreeMap<u32, Vec<&Acked>> = BTreeMap::new();
    for a in acked {
        by_partition.entry(a.0).or_default().push(a);
    }
    for (p, want) in by_partition {
        let log: BTreeMap<i64, String> = read_all(c, topic, p).await.into_iter().collect();
        for (_, offset, value) in want {
            assert_eq!(log.get(offset), Some(value), "{topic}-{p} offset {offset}");
        }
    }
}

/// No reassignment and no reassignment-owned throttle on any partition of `topic`, and no
/// throttle config on `brokers` or the topic.
pub async fn no_throttle_left(c: &ClusterClient, meta: &metastore::Client, topic: &str, brokers: &[i32]) {
    for (p, s) in states(meta, topic).await {
        assert_eq!(s.throttle_rate, 0, "{topic}-{p} kept its throttle");
        assert!(s.reassignment.is_none(), "{topic}-{p} still moves");
    }
    for b in brokers {
        let cfg = config_of(c, Type::Broker, &b.to_string()).await;
        assert!(!cfg.keys().any(|k| k.contains("throttled")), "broker {b}: {cfg:?}");
    }
    let cfg = config_of(c, Type::Topic, topic).await;
    assert!(!cfg.keys().any(|k| k.contains("throttled")), "topic {topic}: {cfg:?}");
}

/// Broker `id`'s registration, if it is registered.
pub async fn registration(c: &ClusterClient, id: i32) -> Option<BrokerRegistration> {
    c.brokers().await.ok()?.into_iter().find(|b| b.id == id)
}

/// Broker `id`'s dynamic `cordoned.log.dirs`, "" when not set.
pub async fn cordon_config(c: &ClusterClient, id: i32) -> String {
    config_of(c, Type::Broker, &id.to_string())
        .await
        .get("cordoned.log.dirs")
        .cloned()
        .unwrap_or_default()
}

/// Sets (`Some`) or deletes (`None`) broker `id`'s `cordoned.log.dirs`, and waits until the
/// broker has published `want` as its cordoned dirs.
pub async fn set_cordon(c: &ClusterClient, id: i32, value: Option<&str>, want: &[String]) {
    let req = AlterConfigsRequest {
        resource: Some(ConfigResource {
            r#type: Type::Broker as i32,
            name: id.to_string(),
        }),
        set: value
            .map(|v| [("cordoned.log.dirs".to_string(), v.to_string())].into())
            .unwrap_or_default(),
        delete: if value.is_none() {
            vec!["cordoned.log.dirs".into()]
        } else {
            vec![]
        },
        validate_only: false,
        ops: vec![],
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.alter_configs(req).await }
        })
        .await
        .expect("admin reachable");
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    wait_cordoned(c, id, want).await;
}

/// Waits until broker `id` has published exactly `want` as its cordoned dirs.
pub async fn wait_cordoned(c: &ClusterClient, id: i32, want: &[String]) {
    let want = sorted_dirs(want);
    crate::wait_until(
        Duration::from_secs(60),
        &format!("broker {id} to cordon {want:?}"),
        || {
            let (c, want) = (c.clone(), want.clone());
            async move {
                registration(&c, id)
                    .await
                    .is_some_and(|r| sorted_dirs(&r.cordoned_log_dirs) == want)
            }
        },
    )
    .await;
}

fn sorted_dirs(d: &[String]) -> Vec<String> {
    let mut d = d.to_vec();
    d.sort();
    d
}
