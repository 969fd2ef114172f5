//! AlterThrottles: replication throttles set by hand on brokers (rates) and topics (throttled
//! replicas), each either kept until changed by hand or removed by Ferry ("auto-remove"). An
//! auto-remove throttle is armed by the first reassignment that starts in its scope (the broker's
//! replicas, or the topic) and removed once none in its scope moves. Arming rides on the submit
//! transaction; removal is a guarded write of the active controller, which fails if a submit
//! committed since it looked (every submit bumps `keys::REASSIGN_EPOCH`).

use std::collections::{BTreeMap, HashMap};

use metastore::Client;
use prost::Message;
use proto::cluster_view::ClusterView;
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::*;
use proto::metastore as pb;
use proto::{keys, topic_config};

use crate::store::{at_revision, load_view, put_op};
use crate::write_runner::{Plan, Runner};

/// Where a record's auto-remove throttles apply.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// The replicas on one broker.
    Broker(i32),
    /// The partitions of one topic.
    Topic(String),
}

impl Scope {
    /// Whether a partition of `topic` in `state` falls in the scope.
    pub fn touches(&self, topic: &str, state: &PartitionState) -> bool {
        match self {
            Scope::Topic(t) => t == topic,
            Scope::Broker(b) => state.replicas.contains(b),
        }
    }

    /// The metastore key of the record holding the scope's configs.
    pub fn key(&self) -> String {
        match self {
            Scope::Broker(b) => keys::broker_config(*b),
            Scope::Topic(t) => keys::topic(t),
        }
    }
}

/// Whether any partition in the scope is moving.
pub fn scope_moving(view: &ClusterView, scope: &Scope) -> bool {
    let moving = |t: &str, e: &proto::cluster_view::TopicEntry| {
        e.partitions
            .values()
            .any(|p| p.state.is_moving() && scope.touches(t, &p.state))
    };
    match scope {
        Scope::Topic(t) => view.topics.get(t).is_some_and(|e| moving(t, e)),
        Scope::Broker(_) => view.topics.iter().any(|(t, e)| moving(t, e)),
    }
}

/// Whether a record's auto-remove throttles go now: armed, and nothing in scope moves.
pub fn due(auto: &AutoRemove, scope_moving: bool) -> bool {
    auto.armed && !auto.keys.is_empty() && !scope_moving
}

/// The record's auto-remove set armed, or `None` when there is nothing to arm.
pub fn armed(auto: &AutoRemove) -> Option<AutoRemove> {
    (!auto.armed && !auto.keys.is_empty()).then(|| AutoRemove {
        keys: auto.keys.clone(),
        armed: true,
    })
}

/// Removes the auto-remove keys from `config`; the auto-remove set is then empty.
pub fn remove_auto(config: &mut HashMap<String, String>, auto: &mut AutoRemove) {
    for k in auto.keys.drain(..) {
        config.remove(&k);
    }
    auto.armed = false;
}

/// Sets (`Some(v)`), removes (`Some("")`) or leaves (`None`) one throttle key, marking it
/// auto-remove or hand-kept.
fn set_key(
    config: &mut HashMap<String, String>,
    auto: &mut AutoRemove,
    key: &str,
    value: Option<String>,
    auto_remove: bool,
) {
    let Some(v) = value else {
        return;
    };
    auto.keys.retain(|k| k != key);
    if v.is_empty() {
        config.remove(key);
        return;
    }
    config.insert(key.to_string(), v);
    if auto_remove {
        auto.keys.push(key.to_string());
        auto.keys.sort();
    }
}

/// One record's next configs.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordWrite {
    /// The record's scope.
    pub scope: Scope,
    /// The revision it was read at (0: not stored yet).
    pub revision: u64,
    /// Its next configs.
    pub config: HashMap<String, String>,
    /// Its next auto-remove set.
    pub auto: AutoRemove,
}

/// Stored broker config records: by broker id, the record and its revision.
pub type BrokerConfigs = BTreeMap<i32, (BrokerConfigRecord, u64)>;

fn rate(field: &str, r: Option<i64>) -> Result<Option<String>, Refusal> {
    match r {
        Some(r) if r < 0 => Err(Refusal::new(
            ErrorCode::INVALID_THROTTLE,
            format!("{field}: {r} bytes/s; a throttle must be 0 (remove) or greater"),
        )),
        Some(0) => Ok(Some(String::new())),
        Some(r) => Ok(Some(r.to_string())),
        None => Ok(None),
    }
}

/// A record's write, started from what is stored when the request has not touched it yet.
fn record_write(
    out: &mut BTreeMap<Scope, RecordWrite>,
    scope: Scope,
    stored: impl FnOnce() -> (u64, HashMap<String, String>, Option<AutoRemove>),
) -> &mut RecordWrite {
    out.entry(scope.clone()).or_insert_with(|| {
        let (revision, config, auto) = stored();
        RecordWrite {
            scope,
            revision,
            config,
            auto: auto.unwrap_or_default(),
        }
    })
}

/// Checks one broker's throttle and plans its record's write.
fn plan_broker(
    b: &BrokerThrottle,
    view: &ClusterView,
    brokers: &BrokerConfigs,
    out: &mut BTreeMap<Scope, RecordWrite>,
) -> Result<(), Refusal> {
    let name = format!("broker {}", b.broker);
    if !view.brokers.contains_key(&b.broker) {
        return Err(Refusal::new(
            ErrorCode::BROKER_NOT_AVAILABLE,
            format!("{name}: not a registered broker"),
        ));
    }
    let leader = rate(&format!("{name}: leader_rate"), b.leader_rate)?;
    let follower = rate(&format!("{name}: follower_rate"), b.follower_rate)?;
    let w = record_write(out, Scope::Broker(b.broker), || {
        let (rec, revision) = brokers.get(&b.broker).cloned().unwrap_or_default();
        (revision, rec.config, rec.auto_remove)
    });
    set_key(
        &mut w.config,
        &mut w.auto,
        topic_config::LEADER_THROTTLED_RATE,
        leader,
        b.auto_remove,
    );
    set_key(
        &mut w.config,
        &mut w.auto,
        topic_config::FOLLOWER_THROTTLED_RATE,
        follower,
        b.auto_remove,
    );
    Ok(())
}

/// Checks one topic's throttled replicas and plans its record's write.
fn plan_topic(t: &TopicThrottle, view: &ClusterView, out: &mut BTreeMap<Scope, RecordWrite>) -> Result<(), Refusal> {
    let entry = view
        .topics
        .get(&t.topic)
        .filter(|e| e.record.is_some())
        .ok_or_else(|| {
            Refusal::new(
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                format!("topic {:?}: does not exist", t.topic),
            )
        })?;
    let lists = [
        (topic_config::LEADER_THROTTLED_REPLICAS, &t.leader_replicas),
        (topic_config::FOLLOWER_THROTTLED_REPLICAS, &t.follower_replicas),
    ];
    let given: HashMap<String, String> = lists
        .iter()
        .filter_map(|(k, v)| v.as_ref().filter(|v| !v.is_empty()).map(|v| (k.to_string(), v.clone())))
        .collect();
    topic_config::validate(&given)
        .map_err(|e| Refusal::new(ErrorCode::INVALID_CONFIG, format!("topic {:?}: {e}", t.topic)))?;
    let w = record_write(out, Scope::Topic(t.topic.clone()), || {
        let rec = entry.record.clone().unwrap_or_default();
        (entry.mod_revision, rec.config, rec.auto_remove)
    });
    for (k, v) in lists {
        set_key(&mut w.config, &mut w.auto, k, v.clone(), t.auto_remove);
    }
    Ok(())
}

/// Checks an AlterThrottles request against the cluster and plans each record's write. Every
/// entry is checked before anything is planned; the first bad one refuses the request.
pub fn plan(
    req: &AlterThrottlesRequest,
    view: &ClusterView,
    brokers: &BrokerConfigs,
) -> Result<Vec<RecordWrite>, Refusal> {
    let mut out: BTreeMap<Scope, RecordWrite> = BTreeMap::new();
    for b in &req.brokers {
        plan_broker(b, view, brokers, &mut out)?;
    }
    for t in &req.topics {
        plan_topic(t, view, &mut out)?;
    }
    // A scope with a reassignment already running is armed at once: its end removes the throttle.
    for w in out.values_mut() {
        if !w.auto.keys.is_empty() && scope_moving(view, &w.scope) {
            w.auto.armed = true;
        }
    }
    Ok(out.into_values().collect())
}

/// The put of a record write: a topic record keeps everything but its configs.
fn record_op(w: &RecordWrite, view: &ClusterView) -> pb::Op {
    let auto = (!w.auto.keys.is_empty()).then(|| w.auto.clone());
    match &w.scope {
        Scope::Broker(_) => put_op(
            w.scope.key(),
            &BrokerConfigRecord {
                config: w.config.clone(),
                auto_remove: auto,
            },
        ),
        Scope::Topic(t) => {
            let rec = view.topics.get(t).and_then(|e| e.record.clone()).unwrap_or_default();
            put_op(
                w.scope.key(),
                &TopicRecord {
                    config: w.config.clone(),
                    auto_remove: auto,
                    ..rec
                },
            )
        }
    }
}

/// Reads every broker config record.
pub async fn load_broker_configs(client: &Client) -> Result<BrokerConfigs, metastore::ClientError> {
    let resp = client
        .range_req(pb::RangeRequest {
            prefix: keys::BROKER_CONFIGS.into(),
            ..Default::default()
        })
        .await?;
    Ok(resp
        .kvs
        .iter()
        .filter_map(|kv| {
            let id: i32 = kv.key.strip_prefix(keys::BROKER_CONFIGS)?.parse().ok()?;
            let rec = BrokerConfigRecord::decode(kv.value.as_ref()).ok()?;
            Some((id, (rec, kv.mod_revision)))
        })
        .collect())
}

/// What AlterThrottles is planned on: the submit epoch's revision, the cluster view and the
/// broker config records.
type ThrottleState = (u64, ClusterView, BrokerConfigs);

async fn load_throttle_state(client: &Client) -> Result<ThrottleState, metastore::ClientError> {
    // Read before the view and guarded: a submit committed meanwhile (which would not see
    // these throttles to arm them) makes this request look again, and arm them itself.
    let epoch = client.get(keys::REASSIGN_EPOCH).await?.map_or(0, |kv| kv.mod_revision);
    let view = load_view(client).await?;
    let brokers = load_broker_configs(client).await?;
    Ok((epoch, view, brokers))
}

/// AlterThrottles' writes: every record it changes, guarded by its revision and the epoch.
fn alter_writes(req: &AlterThrottlesRequest, (epoch, view, brokers): ThrottleState) -> Result<Plan<()>, Refusal> {
    let writes = plan(req, &view, &brokers)
        .map_err(|Refusal { code, message }| Refusal::new(code, format!("nothing was changed: {message}")))?;
    if req.validate_only || writes.is_empty() {
        return Ok(Plan::answer(()));
    }
    let mut guards: Vec<pb::Guard> = writes.iter().map(|w| at_revision(w.scope.key(), w.revision)).collect();
    guards.push(at_revision(keys::REASSIGN_EPOCH.into(), epoch));
    let ops = writes.iter().map(|w| record_op(w, &view)).collect();
    Ok(Plan::write(guards, ops, ()))
}

/// AlterThrottles: checked whole, then one guarded write.
pub async fn alter(
    client: &Client,
    req: AlterThrottlesRequest,
) -> Result<AlterThrottlesResponse, metastore::ClientError> {
    let kept_changing = Refusal::new(ErrorCode::INVALID_UPDATE_VERSION, "the configs kept changing; retry");
    let outcome = Runner::new(client, "throttles", kept_changing)
        .run(|| load_throttle_state(client), |state| alter_writes(&req, state))
        .await?;
    Ok(match outcome {
        Ok(()) => AlterThrottlesResponse::default(),
        Err(Refusal { code, message }) => AlterThrottlesResponse {
            error_code: code.0,
            error_message: message,
        },
    })
}

/// The scopes a submit's partitions touch (their topics and the brokers of their replicas),
/// gathered partition by partition.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Touched {
    topics: std::collections::BTreeSet<String>,
    brokers: std::collections::BTreeSet<i32>,
}

impl Touched {
    /// Adds a partition of `topic` whose next state is `state`.
    pub fn add(&mut self, topic: &str, state: &PartitionState) {
        // A million partitions of one topic copy its name once.
        if !self.topics.contains(topic) {
            self.topics.insert(topic.to_string());
        }
        self.brokers.extend(state.replicas.iter().copied());
    }

    /// Whether no partition was added.
    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    fn scopes(self) -> impl Iterator<Item = Scope> {
        let brokers = self.brokers.into_iter().map(Scope::Broker);
        brokers.chain(self.topics.into_iter().map(Scope::Topic))
    }
}

/// What a submit adds for auto-remove throttles: a guard on the record of every scope its
/// submitted partitions touch, and a put arming each such record that has unarmed auto-remove
/// throttles. Guarding them all means an AlterThrottles landing between the submit's read and
/// its write makes the submit read again, so no throttle is left unarmed.
pub fn arming(view: &ClusterView, brokers: &BrokerConfigs, touched: Touched) -> (Vec<pb::Guard>, Vec<pb::Op>) {
    let (mut guards, mut ops) = (Vec::new(), Vec::new());
    for scope in touched.scopes() {
        let (revision, config, auto) = match &scope {
            Scope::Broker(b) => match brokers.get(b) {
                Some((rec, rev)) => (*rev, rec.config.clone(), rec.auto_remove.clone()),
                None => (0, HashMap::new(), None),
            },
            Scope::Topic(t) => match view.topics.get(t) {
                Some(e) => {
                    let rec = e.record.clone().unwrap_or_default();
                    (e.mod_revision, rec.config, rec.auto_remove)
                }
                None => continue,
            },
        };
        guards.push(at_revision(scope.key(), revision));
        if let Some(auto) = auto.as_ref().and_then(armed) {
            let w = RecordWrite {
                scope,
                revision,
                config,
                auto,
            };
            ops.push(record_op(&w, view));
        }
    }
    (guards, ops)
}

/// The records whose auto-remove throttles are due (armed, nothing in scope moving), as writes
/// that remove them.
pub fn removals(view: &ClusterView, brokers: &BrokerConfigs) -> Vec<RecordWrite> {
    let mut out = Vec::new();
    let mut consider = |scope: Scope, revision: u64, config: &HashMap<String, String>, auto: Option<&AutoRemove>| {
        let Some(auto) = auto else { return };
        if due(auto, scope_moving(view, &scope)) {
            let (mut config, mut auto) = (config.clone(), auto.clone());
            remove_auto(&mut config, &mut auto);
            out.push(RecordWrite {
                scope,
                revision,
                config,
                auto,
            });
        }
    };
    for (id, (rec, rev)) in brokers {
        consider(Scope::Broker(*id), *rev, &rec.config, rec.auto_remove.as_ref());
    }
    for (t, e) in &view.topics {
        if let Some(rec) = &e.record {
            consider(
                Scope::Topic(t.clone()),
                e.mod_revision,
                &rec.config,
                rec.auto_remove.as_ref(),
            );
        }
    }
    out
}

/// Removes the auto-remove throttles that are due, each in a write guarded by its record and by
/// the submit epoch (a submit since `view` was read may have armed them again), and fenced by
/// the controller's Raft term `term`. Returns how many were removed.
pub async fn remove_due(client: &Client, view: &ClusterView, term: u64) -> Result<usize, metastore::ClientError> {
    if removals(view, &load_broker_configs(client).await?).is_empty() {
        return Ok(0);
    }
    // The followed view may lag behind a submit that armed a throttle: decide again on a view
    // read after the epoch, so that such a submit is either in that view or fails the guard.
    let epoch = client.get(keys::REASSIGN_EPOCH).await?.map_or(0, |kv| kv.mod_revision);
    let view = &load_view(client).await?;
    let due = removals(view, &load_broker_configs(client).await?);
    // A failed guard leaves the record to the next pass, which decides again.
    let changed = Refusal::new(
        ErrorCode::INVALID_UPDATE_VERSION,
        "the throttle record or the submit epoch changed",
    );
    let runner = Runner::new(client, "auto-remove throttles", changed)
        .once()
        .fenced(term);
    let mut removed = 0;
    for w in &due {
        let guards = vec![
            at_revision(w.scope.key(), w.revision),
            at_revision(keys::REASSIGN_EPOCH.into(), epoch),
        ];
        if runner
            .write(Plan::write(guards, vec![record_op(w, view)], ()))
            .await?
            .is_ok()
        {
            tracing::info!(scope = ?w.scope, "removed auto-remove throttles: no reassignment in scope moves");
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view_with(moving: bool) -> ClusterView {
        let mut v = ClusterView::default();
        v.brokers.insert(1, BrokerRegistration::default());
        v.brokers.insert(2, BrokerRegistration::default());
        let topic = TopicEntry {
            record: Some(TopicRecord::default()),
            mod_revision: 5,
            partitions: [(
                0,
                PartitionEntry {
                    state: PartitionState {
                        replicas: vec![2, 1],
                        adding: if moving { vec![2] } else { vec![] },
                        removing: if moving { vec![1] } else { vec![] },
                        ..Default::default()
                    },
                    mod_revision: 6,
                },
            )]
            .into(),
        };
        v.topics.insert("t".into(), topic);
        v
    }
    use proto::cluster_view::{PartitionEntry, TopicEntry};

    fn req(auto_remove: bool) -> AlterThrottlesRequest {
        AlterThrottlesRequest {
            brokers: vec![BrokerThrottle {
                broker: 2,
                leader_rate: Some(1000),
                follower_rate: Some(2000),
                auto_remove,
            }],
            topics: vec![TopicThrottle {
                topic: "t".into(),
                leader_replicas: Some("*".into()),
                follower_replicas: None,
                auto_remove,
            }],
            validate_only: false,
        }
    }

    #[test]
    fn bad_entries_are_named() {
        let v = view_with(false);
        let mut r = req(true);
        r.brokers[0].broker = 9;
        assert_eq!(
            plan(&r, &v, &BTreeMap::new()).unwrap_err().code,
            ErrorCode::BROKER_NOT_AVAILABLE
        );
        let mut r = req(true);
        r.brokers[0].leader_rate = Some(-5);
        let Refusal { code, message: msg } = plan(&r, &v, &BTreeMap::new()).unwrap_err();
        assert_eq!(code, ErrorCode::INVALID_THROTTLE);
        assert!(msg.contains("broker 2: leader_rate"), "{msg}");
        let mut r = req(true);
        r.topics[0].topic = "nope".into();
        assert_eq!(
            plan(&r, &v, &BTreeMap::new()).unwrap_err().code,
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        );
        let mut r = req(true);
        r.topics[0].leader_replicas = Some("x:y".into());
        assert_eq!(
            plan(&r, &v, &BTreeMap::new()).unwrap_err().code,
            ErrorCode::INVALID_CONFIG
        );
    }

    #[test]
    fn auto_remove_throttles_arm_with_a_move_and_go_when_it_ends_and_manual_ones_stay() {
        let quiet = view_with(false);
        let hand = BrokerConfigRecord {
            config: [("leader.replication.throttled.rate".to_string(), "7".to_string())].into(),
            auto_remove: None,
        };
        let brokers: BrokerConfigs = [(2, (hand, 3))].into();
        let mut r = req(true);
        r.brokers[0].leader_rate = None; // the hand-set leader rate stays as it is
        let writes = plan(&r, &quiet, &brokers).unwrap();
        let b = writes.iter().find(|w| w.scope == Scope::Broker(2)).unwrap();
        assert_eq!(b.auto.keys, vec!["follower.replication.throttled.rate".to_string()]);
        assert!(!b.auto.armed, "nothing moves yet: it waits for a reassignment");
        assert_eq!(b.config["leader.replication.throttled.rate"], "7");

        // Stored, then a submit touching broker 2 arms both records.
        let stored: BrokerConfigs = [(
            2,
            (
                BrokerConfigRecord {
                    config: b.config.clone(),
                    auto_remove: Some(b.auto.clone()),
                },
                4,
            ),
        )]
        .into();
        let t = writes.iter().find(|w| w.scope == Scope::Topic("t".into())).unwrap();
        let mut moving = view_with(true);
        if let Some(e) = moving.topics.get_mut("t") {
            e.record = Some(TopicRecord {
                config: t.config.clone(),
                auto_remove: Some(t.auto.clone()),
                ..Default::default()
            });
        }
        let state = moving.topics["t"].partitions[&0].state.clone();
        let mut touched = Touched::default();
        touched.add("t", &state);
        touched.add("t", &state);
        let (guards, ops) = arming(&moving, &stored, touched);
        // Guards on topic t and brokers 1 and 2; puts arming t and broker 2 (1 has no record).
        assert_eq!((guards.len(), ops.len()), (3, 2));
        assert!(removals(&moving, &stored).is_empty(), "not armed yet");

        // Armed and still moving: kept. Armed and quiet: removed, the hand-set rate kept.
        let armed_rec = |r: &BrokerConfigRecord| BrokerConfigRecord {
            auto_remove: r.auto_remove.as_ref().map(|a| AutoRemove {
                armed: true,
                ..a.clone()
            }),
            ..r.clone()
        };
        let armed_brokers: BrokerConfigs = stored.iter().map(|(k, (r, v))| (*k, (armed_rec(r), *v))).collect();
        assert!(removals(&moving, &armed_brokers).is_empty());
        let done = view_with(false);
        let gone = removals(&done, &armed_brokers);
        assert_eq!(gone.len(), 1);
        assert_eq!(
            gone[0].config,
            [("leader.replication.throttled.rate".to_string(), "7".to_string())].into()
        );
        assert!(gone[0].auto.keys.is_empty());
    }

    #[test]
    fn a_throttle_set_while_its_scope_moves_is_armed_at_once() {
        let writes = plan(&req(true), &view_with(true), &BTreeMap::new()).unwrap();
        assert!(writes.iter().all(|w| w.auto.armed));
        let writes = plan(&req(false), &view_with(true), &BTreeMap::new()).unwrap();
        assert!(
            writes.iter().all(|w| w.auto.keys.is_empty()),
            "hand-kept throttles are not auto"
        );
    }
}
