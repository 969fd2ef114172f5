//! Plans the controller stores and runs (CreatePlan, ListPlans, AlterPlan on the Admin service),
//! on real clusters of processes: a broker drain under per-broker caps with acks=all produce
//! running, the same drain with the active controller SIGKILLed twice, a cancel mid-plan, and
//! bad input refused by name with nothing stored.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use broker::ClusterClient;
use proto::errors::ErrorCode;
use proto::ferry::config_resource::Type;
use proto::ferry::*;
use tests::plans::{
    create_plan, drain_req, every_ack_read_back, no_throttle_left, produce_steadily, sample_peaks, show, states,
    topic_on_four, until_a_move_runs, wait_state,
};
use tests::reassign::{config_of, create, start_brokers, start_four};
use tests::wait_until;

const TOPIC: &str = "d";

/// A drain of broker 4 with caps of 4 moves into and out of each broker, under acks=all produce:
/// never more than 4 moves at once per broker, every acknowledged record read back, the broker
/// empty and cordoned at the end, no throttle left, and Kafka's tool lists the moves meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_drain_empties_the_broker_under_produce() {
    const PARTITIONS: u32 = 32;
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let c = four.client.clone();
    topic_on_four(&c, TOPIC, PARTITIONS).await;

    let stop = Arc::new(AtomicBool::new(false));
    let producer = produce_steadily(c.clone(), TOPIC, PARTITIONS, 20_000, stop.clone());
    let sampler = sample_peaks(four.meta.clone(), TOPIC, stop.clone());
    let r = create_plan(&c, drain_req(4, 4, 4, Some(20_000))).await;
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    let plan = r.plan.unwrap();
    assert_eq!(plan.moves_total, PARTITIONS, "{plan:?}");

    // Kafka's tool sees the plan's moves: they are reassignments.
    let b = k.bootstrap();
    let mut listed = String::new();
    for _ in 0..5 {
        let (ok, out) = tests::kafka::tool_of(
            None,
            "kafka-reassign-partitions",
            &["--bootstrap-server", &b, "--list"],
            "",
        );
        if ok && out.contains(&format!("{TOPIC}-")) {
            listed = out;
            break;
        }
    }
    assert!(
        listed.contains("removing: 4"),
        "kafka-reassign-partitions --list: {listed}"
    );

    let done = wait_state(&c, plan.id, "done", Duration::from_secs(300)).await;
    stop.store(true, Ordering::Relaxed);
    let acked = producer.await.unwrap();
    let peak = sampler.await.unwrap();
    assert_eq!((done.done, done.skipped, done.failed), (PARTITIONS, 0, 0), "{done:?}");
    assert!(peak.into <= 4 && peak.out <= 4, "caps exceeded: {peak:?}");
    assert!(peak.out >= 2, "moves ran side by side: {peak:?}");
    for (p, s) in states(&four.meta, TOPIC).await {
        assert!(
            !s.replicas.contains(&4),
            "{TOPIC}-{p} still on broker 4: {:?}",
            s.replicas
        );
    }
    assert_eq!(
        config_of(&c, Type::Broker, "4")
            .await
            .get("cordoned.log.dirs")
            .map(String::as_str),
        Some("*")
    );
    no_throttle_left(&c, &four.meta, TOPIC, &[1, 2, 3, 4]).await;
    assert!(acked.len() > 50, "the producer kept going: {}", acked.len());
    every_ack_read_back(&c, TOPIC, &acked).await;
}

async fn controller_id(c: &ClusterClient) -> i32 {
    for _ in 0..300 {
        let r = c
            .admin_call(|mut a| async move { a.describe_cluster(DescribeClusterRequest {}).await })
            .await;
        if let Some(id) = r.ok().map(|r| r.controller_id as i32).filter(|id| *id != 0) {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no active controller");
}

/// The same drain with the active controller SIGKILLed twice mid-plan: the plan completes,
/// each partition ends at the plan's target, and the counts add up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_survives_two_controller_kills() {
    const PARTITIONS: u32 = 24;
    let dir = tempfile::tempdir().unwrap();
    let mut f = start_brokers(dir.path(), 4);
    let c = f.client.clone();
    topic_on_four(&c, TOPIC, PARTITIONS).await;
    let r = create_plan(&c, drain_req(4, 3, 3, Some(20_000))).await;
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    let id = r.plan.unwrap().id;
    for kill in 0..2 {
        wait_until(Duration::from_secs(120), "more moves done", || async {
            let p = show(&c, id, false).await;
            p.done >= (kill + 1) * PARTITIONS / 4 && p.running > 0
        })
        .await;
        let ctl = controller_id(&c).await;
        let n = f.nodes.get_mut(&ctl).unwrap();
        n.kill();
        tokio::time::sleep(Duration::from_millis(300)).await;
        n.spawn();
    }
    let done = wait_state(&c, id, "done", Duration::from_secs(300)).await;
    assert_eq!(done.done + done.skipped + done.failed, done.moves_total);
    assert_eq!((done.done, done.moves_total), (PARTITIONS, PARTITIONS), "{done:?}");
    let plan = show(&c, id, true).await;
    let now = states(&f.meta, TOPIC).await;
    for m in &plan.moves {
        let mut want = m.to_replicas.clone();
        let mut got = now[&m.partition].replicas.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{TOPIC}-{} ends at the plan's target", m.partition);
        assert_eq!(m.state, "done");
    }
    no_throttle_left(&c, &f.meta, TOPIC, &[1, 2, 3, 4]).await;
}

/// A cancel mid-plan: the moves in flight roll back to their original replicas, the queued ones
/// are dropped, the plan ends cancelled, and no throttle is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_rolls_back_the_moves_in_flight_and_drops_the_rest() {
    const PARTITIONS: u32 = 12;
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    topic_on_four(&c, TOPIC, PARTITIONS).await;
    let before = states(&f.meta, TOPIC).await;
    // 20 kB at 4 kB/s: each move lasts seconds.
    let r = create_plan(&c, drain_req(4, 2, 2, Some(4_000))).await;
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    let id = r.plan.unwrap().id;
    until_a_move_runs(&c, id).await;
    let r = c
        .admin_call(|mut a| async move {
            a.alter_plan(AlterPlanRequest {
                id,
                action: alter_plan_request::Action::Cancel as i32,
            })
            .await
        })
        .await
        .unwrap();
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    assert_eq!(r.plan.as_ref().unwrap().queued, 0, "queued moves dropped at once");
    let end = wait_state(&c, id, "cancelled", Duration::from_secs(120)).await;
    assert_eq!(end.queued + end.running, 0, "{end:?}");
    let plan = show(&c, id, true).await;
    let now = states(&f.meta, TOPIC).await;
    let mut rolled_back = 0;
    for m in &plan.moves {
        let s = &now[&m.partition];
        if m.state == "done" {
            assert_eq!(s.replicas, m.to_replicas, "a move done before the cancel stays done");
        } else {
            assert_eq!(m.state, "skipped", "{m:?}");
            assert_eq!(
                s.replicas, before[&m.partition].replicas,
                "{TOPIC}-{} is back",
                m.partition
            );
            rolled_back += usize::from(m.reason.contains("rolled back"));
        }
    }
    assert!(rolled_back >= 1, "a move in flight was rolled back: {:?}", plan.moves);
    no_throttle_left(&c, &f.meta, TOPIC, &[1, 2, 3, 4]).await;
}

/// Keys under `/admin/plans/` and `/config/`, to show that a refused request stored nothing.
async fn stored(meta: &metastore::Client) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for prefix in ["/admin/plans/", "/config/"] {
        let r = meta.range(prefix, 0).await.unwrap();
        out.extend(r.kvs.into_iter().map(|kv| (kv.key, kv.mod_revision)));
    }
    out
}

/// Caps of zero, an unknown broker or dir, and a drain of a broker the replication factor
/// needs: refused with a message naming the field, and nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_plans_are_refused_by_name_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    // A dry run answers the moves and stores nothing.
    create(&c, "small", vec![vec![4, 1]], &[]).await;
    let before = stored(&f.meta).await;
    let mut dry = drain_req(4, 4, 4, Some(1000));
    dry.dry_run = true;
    let r = create_plan(&c, dry).await;
    assert_eq!(r.error_code, ErrorCode::NONE.0, "{}", r.error_message);
    let p = r.plan.unwrap();
    assert_eq!((p.state.as_str(), p.moves.len()), ("dry-run", 1));
    assert_eq!(stored(&f.meta).await, before, "a dry run stores nothing");

    create(&c, "rf4", vec![vec![1, 2, 3, 4]], &[]).await;
    let before = stored(&f.meta).await;
    let dir_req = |dir: &str| CreatePlanRequest {
        kind: Some(create_plan_request::Kind::DrainDir(DrainDirPlan {
            broker: 1,
            dir: dir.into(),
        })),
        ..Default::default()
    };
    for (req, field) in [
        (drain_req(2, 0, 0, Some(1000)), "max_moves_into_broker"),
        (drain_req(9, 4, 4, Some(1000)), "broker 9 is not registered"),
        (drain_req(2, 4, 4, Some(0)), "throttle_rate"),
        (dir_req("/no/such/dir"), "no log dir '/no/such/dir'"),
        (drain_req(2, 4, 4, Some(1000)), "cannot drain broker 2: partition rf4-0"),
    ] {
        let r = create_plan(&c, req).await;
        assert_ne!(r.error_code, 0, "refused: {field}");
        assert!(r.error_message.contains(field), "{field}: {}", r.error_message);
        assert!(r.plan.is_none());
    }
    assert_eq!(stored(&f.meta).await, before, "nothing stored");
}
