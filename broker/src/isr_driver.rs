//! The ISR driver: every 100 ms the partitions this broker leads that may gain a follower
//! ([`isr::Candidates`]) check whether their ISR should change, and every
//! [`isr::full_scan_every_ms`] all of them do (for followers that lag). The changes of a pass go
//! to the controller together, up to [`proto::MAX_REPORT_BATCH`] in one AlterPartitions request, as
//! Kafka's brokers batch AlterPartition: thousands of partitions catching up together (a large
//! reassignment) cost the controller one read and one write per batch, not per partition. The
//! answer (or the metadata watch) brings each partition's new state.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use proto::errors::ErrorCode;
use proto::ferry::{AlterPartitionRequest, AlterPartitionResponse, AlterPartitionsRequest};

use crate::controller_channels::{ControllerChannels, REPORT_BATCHES_IN_FLIGHT};
use crate::isr;
use crate::replica::{Replica, Role};
use crate::replica_manager::BrokerCore;

/// Replicas the ISR scan checks between two yields to the runtime.
const ISR_SCAN_YIELD_EVERY: usize = 256;

/// Runs the ISR driver until the broker stops.
pub async fn isr_loop(core: Arc<BrokerCore>, controller: Option<ControllerChannels>) {
    let Some(controller) = controller else {
        tracing::error!("no quorum address to send ISR changes to");
        return;
    };
    let in_flight = Arc::new(tokio::sync::Semaphore::new(REPORT_BATCHES_IN_FLIGHT));
    let full_every = Duration::from_millis(isr::full_scan_every_ms(core.config.replica_lag_max_ms));
    let mut next_full = tokio::time::Instant::now();
    loop {
        // A pause after each pass, not a fixed tick: a pass over 100,000 replicas takes longer
        // than a tick, and passes back to back would occupy a worker for good.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let candidates = core.isr_candidates.take();
        let replicas: Vec<Arc<Replica>> = if tokio::time::Instant::now() >= next_full {
            next_full = tokio::time::Instant::now() + full_every;
            core.replicas.read().values().cloned().collect()
        } else if candidates.is_empty() {
            continue;
        } else {
            let all = core.replicas.read();
            candidates.iter().filter_map(|tp| all.get(tp).cloned()).collect()
        };
        // Which process each registered broker is, for replicas joining an ISR.
        let registered: HashMap<i32, u64> = core
            .view
            .read()
            .brokers
            .iter()
            .map(|(id, b)| (*id, b.incarnation))
            .collect();
        let mut batch = Vec::new();
        for (i, r) in replicas.into_iter().enumerate() {
            if i % ISR_SCAN_YIELD_EVERY == ISR_SCAN_YIELD_EVERY - 1 {
                // Long passes give way, so Raft heartbeats on the same runtime are not starved.
                tokio::task::yield_now().await;
            }
            let Some(req) = isr_request(&core, &r, &registered) else {
                continue;
            };
            tracing::info!(replica = %r.name(), isr = ?req.new_isr, "asking for an ISR change");
            batch.push((r, req));
            if batch.len() == proto::MAX_REPORT_BATCH {
                send(&core, &controller, &in_flight, std::mem::take(&mut batch)).await;
            }
        }
        if !batch.is_empty() {
            send(&core, &controller, &in_flight, batch).await;
        }
    }
}

/// Sends a batch once a slot is free (a bounded number at a time, so that thousands of
/// partitions catching up together are not served one round trip after another).
async fn send(
    core: &Arc<BrokerCore>,
    controller: &ControllerChannels,
    in_flight: &Arc<tokio::sync::Semaphore>,
    batch: Vec<(Arc<Replica>, AlterPartitionRequest)>,
) {
    let Ok(permit) = in_flight.clone().acquire_owned().await else {
        return;
    };
    let (core, controller) = (core.clone(), controller.clone());
    tokio::spawn(async move {
        let _permit = permit;
        send_isr_changes(&controller, &batch).await;
        // Whatever the answer, the next tick looks again (another follower may have caught up
        // while this change was in flight).
        for (r, _) in &batch {
            core.isr_candidates.add((r.topic.clone(), r.partition));
        }
    });
}

/// The ISR change a replica this broker leads should ask for, if any; marks it in flight.
fn isr_request(core: &BrokerCore, r: &Replica, registered: &HashMap<i32, u64>) -> Option<AlterPartitionRequest> {
    if !matches!(r.state().role, Role::Leader { .. }) {
        return None;
    }
    let now = r.now_ms();
    let leo = r.log().log_end_offset();
    let mut st = r.state();
    let Role::Leader { epoch } = st.role else {
        return None;
    };
    for p in st.followers.values_mut() {
        p.observe_leader_end(leo, now);
    }
    if st.isr_change_in_flight {
        return None;
    }
    let new_isr = isr::next_isr(
        core.id,
        st.high_watermark,
        &st.meta.isr,
        &st.meta.replicas,
        &st.followers,
        registered,
        isr::LagClock {
            now_ms: now,
            lag_max_ms: core.config.replica_lag_max_ms,
        },
    )?;
    st.isr_change_in_flight = true;
    st.pending_isr = Some(new_isr.clone());
    let joining_incarnations = new_isr
        .iter()
        .filter(|b| !st.meta.isr.contains(b))
        .filter_map(|b| st.followers.get(b).map(|p| (*b, p.incarnation)))
        .collect();
    Some(AlterPartitionRequest {
        topic: r.topic.clone(),
        partition: r.partition,
        leader: core.id,
        leader_epoch: epoch,
        partition_epoch: st.meta.partition_epoch,
        new_isr,
        joining_incarnations,
    })
}

/// Sends a batch of ISR changes to the controller and applies the states it answers with.
async fn send_isr_changes(controller: &ControllerChannels, batch: &[(Arc<Replica>, AlterPartitionRequest)]) {
    let items: Vec<AlterPartitionRequest> = batch.iter().map(|(_, req)| req.clone()).collect();
    let answers = controller
        .send_batch(
            "ISR changes",
            &items,
            |mut admin, items| async move {
                let resp = admin.alter_partitions(AlterPartitionsRequest { items }).await?;
                Ok(resp.into_inner().results)
            },
            |mut admin, req| async move { Ok(admin.alter_partition(req).await?.into_inner()) },
        )
        .await;
    for ((r, _), answer) in batch.iter().zip(answers) {
        apply_answer(r, answer);
    }
}

/// Applies the controller's answer to one ISR change (none when the request failed) and ends
/// the change in flight.
fn apply_answer(r: &Replica, answer: Option<AlterPartitionResponse>) {
    let state = answer.and_then(|resp| {
        if resp.error_code != 0 {
            tracing::info!(replica = %r.name(), code = %ErrorCode(resp.error_code), message = resp.error_message, "ISR change refused");
        }
        resp.state
    });
    if let Some(state) = state {
        r.apply_metadata(&state);
    }
    {
        let mut st = r.state();
        st.isr_change_in_flight = false;
        st.pending_isr = None;
    }
    // A leaver no longer holds the watermark back.
    r.update_high_watermark();
}
