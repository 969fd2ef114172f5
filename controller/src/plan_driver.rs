//! The plan driver: runs the stored plans on the active controller while it leads. It follows
//! `/brokers/` (its own view) and `/admin/plans/`, and on every change and every tick, for each
//! plan not ended, decides a step ([`crate::plan_step::step`]) and writes it in one transaction
//! fenced by the Raft term. A failed guard means something changed: the follows bring it, and
//! the next pass decides again. Thin: the decisions are `plan_step`'s and the scheduler's.
//!
//! A started move is recorded as started from the view's revision; the next step of any plan
//! waits until the view shows the partitions a step wrote, so every decision counts the moves
//! already started (caps hold across plans) and judges a started move only from a view that
//! holds it.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use metastore::{Client, FollowEvent};
use proto::cluster_view::ClusterView;
use proto::keys;
use proto::metastore as pb;
use tokio::sync::mpsc::Receiver;

use crate::plan::Plan;
use crate::plan_metrics::PlanMetrics;
use crate::plan_step::{step, StepInput, StepWrite};
use crate::plan_store::StoredPlan;
use crate::write_runner::term_guard;

/// How often plans are looked at without a change (a broker coming back, a paused plan
/// resumed elsewhere: the follows bring those too; the tick is a backstop).
pub const TICK: Duration = Duration::from_millis(500);

/// Zeroes the plan gauges when the driver stops (deposed): only the active controller's count.
struct ClearOnDrop(PlanMetrics);

impl Drop for ClearOnDrop {
    fn drop(&mut self) {
        self.0.clear();
    }
}

/// What the driver holds between passes.
#[derive(Default)]
struct Driver {
    view: ClusterView,
    /// The revision the view is at.
    revision: u64,
    plans: BTreeMap<u64, StoredPlan>,
    have_view: bool,
    have_plans: bool,
    /// A partition the last step wrote, at the revision it was guarded on: no step until the
    /// view shows it changed.
    wait_partition: Option<(String, u32, u64)>,
    /// Plans written, at the revision they were read at: not decided again until the follow
    /// brings the write.
    written: HashMap<u64, u64>,
    /// The last plan each step wrote, with its stored bytes: when the follow brings those
    /// bytes back, the plan is taken as it is instead of decoded again (a large plan's decode
    /// costs as much as its step).
    own: HashMap<u64, (bytes::Bytes, Plan)>,
}

impl Driver {
    /// Takes a `/brokers/` event into the view.
    fn absorb_view(&mut self, ev: FollowEvent) {
        let revision = match &ev {
            FollowEvent::Reset { revision, .. } => *revision,
            FollowEvent::Changes(w) => w.revision,
        };
        self.view.apply_all(ev.is_reset(), ev.changes());
        self.revision = self.revision.max(revision);
        if ev.is_reset() {
            self.revision = revision;
        }
        self.have_view = true;
    }

    /// Takes an `/admin/plans/` event into the plans held.
    fn absorb_plans(&mut self, ev: FollowEvent) {
        if ev.is_reset() {
            self.plans.clear();
        }
        for (key, value, revision) in ev.changes() {
            let Some(id) = keys::parse_plan_key(key) else { continue };
            let own = self.own.remove(&id);
            if let (Some((bytes, plan)), Some(v)) = (own, value) {
                if bytes.as_ref() == v {
                    self.plans.insert(id, StoredPlan { plan, revision });
                    continue;
                }
            }
            match value.map(Plan::decode) {
                Some(Ok(plan)) => {
                    self.plans.insert(id, StoredPlan { plan, revision });
                }
                Some(Err(e)) => {
                    tracing::warn!(plan = id, error = %e, "a stored plan does not decode; not run");
                    self.plans.remove(&id);
                }
                None => {
                    self.plans.remove(&id);
                }
            }
        }
        self.have_plans = true;
    }

    /// Whether the view shows the last step's partitions.
    fn caught_up(&self) -> bool {
        match &self.wait_partition {
            None => true,
            Some((t, p, rev)) => self.view.partition(t, *p).is_none_or(|e| e.mod_revision != *rev),
        }
    }

    /// The plans to decide now: not ended, and not waiting for their own write to come back.
    fn due(&self) -> Vec<StoredPlan> {
        self.plans
            .values()
            .filter(|s| !s.plan.state.is_terminal())
            .filter(|s| self.written.get(&s.plan.id) != Some(&s.revision))
            .cloned()
            .collect()
    }
}

/// Takes `first` and every event queued behind it on `rx` with `take`.
fn drain_queue(first: FollowEvent, rx: &mut Receiver<FollowEvent>, mut take: impl FnMut(FollowEvent)) {
    let mut next = Some(first);
    while let Some(ev) = next {
        take(ev);
        next = rx.try_recv().ok();
    }
}

/// Runs the plans while this node leads in `term`; the caller drops it when deposed.
pub async fn run(term: u64, client: &Client, metrics: &PlanMetrics) {
    let _clear = ClearOnDrop(metrics.clone());
    let mut brokers = client.follow("/brokers/");
    let mut plans = client.follow(keys::PLANS);
    let mut d = Driver::default();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut not_before = tokio::time::Instant::now();
    loop {
        tokio::select! {
            ev = brokers.recv() => {
                let Some(ev) = ev else { return };
                let (dd, rx) = crate::off_runtime(move || {
                    let (mut d, mut rx) = (d, brokers);
                    drain_queue(ev, &mut rx, |e| d.absorb_view(e));
                    (d, rx)
                }).await;
                (d, brokers) = (dd, rx);
            }
            ev = plans.recv() => {
                let Some(ev) = ev else { return };
                let (dd, rx) = crate::off_runtime(move || {
                    let (mut d, mut rx) = (d, plans);
                    drain_queue(ev, &mut rx, |e| d.absorb_plans(e));
                    (d, rx)
                }).await;
                (d, plans) = (dd, rx);
            }
            _ = tick.tick() => {}
        }
        if !(d.have_view && d.have_plans) || tokio::time::Instant::now() < not_before {
            continue;
        }
        metrics.set(d.plans.values().map(|s| &s.plan));
        if !d.caught_up() {
            continue;
        }
        let due = d.due();
        if due.is_empty() {
            continue;
        }
        let began = tokio::time::Instant::now();
        let result = pass(term, client, d, due).await;
        not_before = pace(began, tokio::time::Instant::now());
        d = match result {
            Ok(d) => d,
            Err((d, e)) => {
                tracing::debug!(error = %e, "plan driver: the metastore is unreachable; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
                d
            }
        };
    }
}

/// When the next pass may begin, after one that ran from `began` to `ended`: twice as long
/// again. A pass reads and rewrites whole plans, so with moves completing back to back, passes
/// one after the other would keep the controller busy with a large plan's bookkeeping (and
/// rewrite it for every completion); paced, the driver takes at most a third of a core, and
/// each pass settles what completed meanwhile. The controller shares its process with a Raft
/// node and a broker, which the moves themselves need. A small plan's pass takes
/// milliseconds, so it waits as little.
fn pace(began: tokio::time::Instant, ended: tokio::time::Instant) -> tokio::time::Instant {
    ended + 2 * ended.saturating_duration_since(began)
}

/// Decides and writes the step of each plan in `due` until one writes partitions (the next
/// waits for the view to show them).
async fn pass(
    term: u64,
    client: &Client,
    mut d: Driver,
    due: Vec<StoredPlan>,
) -> Result<Driver, (Driver, metastore::ClientError)> {
    let reads = tokio::try_join!(
        crate::reassign_admin::load_marker(client),
        crate::throttles::load_broker_configs(client)
    );
    let (marker, configs) = match reads {
        Ok((m, c)) => (m, std::sync::Arc::new(c)),
        Err(e) => return Err((d, e)),
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_millis() as u64);
    for stored in due {
        let configs = configs.clone();
        let (dd, decided) = crate::off_runtime(move || {
            let input = StepInput {
                view: &d.view,
                revision: d.revision,
                marker,
                brokers: &configs,
                now_ms,
            };
            let w = step(&stored.plan, stored.revision, &input);
            (d, w.map(|w| (w, stored.revision)))
        })
        .await;
        d = dd;
        let Some((w, read_at)) = decided else { continue };
        let wait = w.moves_partitions.then(|| first_partition(&w.guards)).flatten();
        let bytes = put_value(&w.ops, &keys::plan(w.plan.id));
        let StepWrite {
            plan,
            guards,
            ops,
            started,
            rolled_back,
            ..
        } = w;
        match write(term, client, guards, ops).await {
            Ok(true) => {
                tracing::info!(
                    plan = plan.id,
                    started,
                    rolled_back,
                    state = crate::plan_info::state_name(plan.state),
                    "plan step written"
                );
                d.written.insert(plan.id, read_at);
                if let Some(b) = bytes {
                    d.own.insert(plan.id, (b, plan));
                }
                if wait.is_some() {
                    d.wait_partition = wait;
                    return Ok(d);
                }
            }
            // Someone moved first (a partition, the plan, a throttle, the term): the follows
            // bring it, and the next pass decides again.
            Ok(false) => return Ok(d),
            Err(e) => return Err((d, e)),
        }
    }
    Ok(d)
}

/// The value the ops put at `key`, if they put one.
fn put_value(ops: &[pb::Op], key: &str) -> Option<bytes::Bytes> {
    ops.iter().find_map(|o| match &o.op {
        Some(pb::op::Op::Put(p)) if p.key == key => Some(p.value.clone()),
        _ => None,
    })
}

/// The first partition a step wrote and the revision it was guarded on.
fn first_partition(guards: &[pb::Guard]) -> Option<(String, u32, u64)> {
    guards.iter().find_map(|g| {
        let Some(keys::TopicKey::Partition(t, p)) = keys::parse_topic_key(&g.key) else {
            return None;
        };
        match g.check {
            Some(pb::guard::Check::ModRevision(rev)) => Some((t.to_string(), p, rev)),
            _ => None,
        }
    })
}

/// Writes a step fenced by `term`; `Ok(false)` when a guard failed.
async fn write(
    term: u64,
    client: &Client,
    mut guards: Vec<pb::Guard>,
    ops: Vec<pb::Op>,
) -> Result<bool, metastore::ClientError> {
    guards.push(term_guard(term));
    let resp = client
        .txn(pb::TxnRequest {
            guards,
            ops,
            request_id: String::new(),
        })
        .await?;
    Ok(resp.succeeded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_is_followed_by_a_pause_twice_as_long() {
        let t0 = tokio::time::Instant::now();
        let slow = pace(t0, t0 + Duration::from_millis(800));
        assert_eq!(slow, t0 + Duration::from_millis(2400));
        let quick = pace(t0, t0 + Duration::from_millis(3));
        assert_eq!(quick, t0 + Duration::from_millis(9));
    }

    #[test]
    fn a_plan_that_comes_back_as_written_is_not_decoded_again() {
        use crate::plan::{Caps, Names, PlanKind, PlanState};
        let plan = Plan {
            id: 3,
            kind: PlanKind::DrainBroker { broker: 2 },
            caps: Caps::default(),
            throttle_rate: 0,
            state: PlanState::Running,
            names: Names::default(),
            moves: vec![],
        };
        let ops = vec![crate::plan_step::plan_put(&plan)];
        let bytes = put_value(&ops, &keys::plan(3)).expect("the plan's put");
        let mut d = Driver::default();
        // A marker no decode could give: the held plan is the one taken.
        let mut held = plan.clone();
        held.throttle_rate = 77;
        d.own.insert(3, (bytes.clone(), held));
        let change = |value: &[u8]| FollowEvent::Reset {
            kvs: vec![pb::KeyValue {
                key: keys::plan(3),
                value: bytes::Bytes::copy_from_slice(value),
                mod_revision: 9,
                ..Default::default()
            }],
            revision: 9,
        };
        d.absorb_plans(change(&bytes));
        assert_eq!((d.plans[&3].plan.throttle_rate, d.plans[&3].revision), (77, 9));
        assert!(d.own.is_empty());
        // Other bytes (someone else's write) are decoded.
        d.own.insert(3, (bytes::Bytes::from_static(b"x"), plan.clone()));
        d.absorb_plans(change(&bytes));
        assert_eq!(d.plans[&3].plan.throttle_rate, 0);
    }
}
