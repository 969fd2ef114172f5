//! Plans in the metastore (`/admin/plans/<id>`, [`Plan::encode`]) and the cordons drains set:
//! reading them, and the pure change a drain or an undrain makes to a broker's
//! `cordoned.log.dirs` (through Kafka's config operations, as IncrementalAlterConfigs makes it).

use metastore::Client;
use prost::Message;
use proto::config_ops::{plan_incremental, APPEND, DELETE, SET};
use proto::ferry::{BrokerConfigRecord, BrokerRegistration};
use proto::metastore as pb;
use proto::{cordon, keys, topic_config};

use crate::plan::{Plan, PlanError};

/// A plan as stored, with the revision it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPlan {
    /// The plan.
    pub plan: Plan,
    /// Its key's revision.
    pub revision: u64,
}

/// Decodes stored plan keys; a value that does not decode is reported with its id, not used.
pub fn decode_all(kvs: &[pb::KeyValue]) -> (Vec<StoredPlan>, Vec<(u64, PlanError)>) {
    let mut plans = Vec::new();
    let mut bad = Vec::new();
    for kv in kvs {
        let Some(id) = keys::parse_plan_key(&kv.key) else {
            continue;
        };
        match Plan::decode(&kv.value) {
            Ok(plan) => plans.push(StoredPlan {
                plan,
                revision: kv.mod_revision,
            }),
            Err(e) => bad.push((id, e)),
        }
    }
    (plans, bad)
}

/// The stored plans that decode, and the id a new plan takes.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The plans, by id.
    pub plans: Vec<StoredPlan>,
    /// One above the highest id stored, decoded or not (its key is guarded absent).
    pub next_id: u64,
}

/// Reads every stored plan (those that do not decode are logged and left out).
pub async fn load_plans(client: &Client) -> Result<Loaded, metastore::ClientError> {
    let resp = client
        .range_req(pb::RangeRequest {
            prefix: keys::PLANS.into(),
            ..Default::default()
        })
        .await?;
    let (plans, bad) = crate::off_runtime(move || decode_all(&resp.kvs)).await;
    let top = plans
        .iter()
        .map(|p| p.plan.id)
        .chain(bad.iter().map(|(id, _)| *id))
        .max();
    for (id, e) in bad {
        tracing::warn!(plan = id, error = %e, "a stored plan does not decode; left out");
    }
    Ok(Loaded {
        plans,
        next_id: next_id(top),
    })
}

/// Reads one plan: `None` when absent, an error when it does not decode.
pub async fn load_plan(
    client: &Client,
    id: u64,
) -> Result<Option<Result<StoredPlan, PlanError>>, metastore::ClientError> {
    let Some(kv) = client.get(&keys::plan(id)).await? else {
        return Ok(None);
    };
    let revision = kv.mod_revision;
    let plan = crate::off_runtime(move || Plan::decode(&kv.value)).await;
    Ok(Some(plan.map(|plan| StoredPlan { plan, revision })))
}

/// The id of the next plan: one above the highest stored, 1 for the first.
pub fn next_id(highest: Option<u64>) -> u64 {
    highest.map_or(1, |m| m.saturating_add(1))
}

/// A put of a broker's config record.
pub fn config_put(broker: i32, rec: &BrokerConfigRecord) -> pb::Op {
    crate::store::put_op(keys::broker_config(broker), rec)
}

/// The record with `cordoned.log.dirs` changed for a drain (`on`) or an undrain of a whole
/// broker (`dir` absent) or one dir (absolute, as registered); `None` when it already says so.
/// A dir cordoned through `*` is uncordoned by listing the broker's other dirs.
pub fn cordon_change(
    rec: &BrokerConfigRecord,
    reg: Option<&BrokerRegistration>,
    dir: Option<&str>,
    on: bool,
) -> Option<BrokerConfigRecord> {
    const KEY: &str = topic_config::CORDONED_LOG_DIRS;
    let now = rec.config.get(KEY).map(String::as_str).unwrap_or("").trim();
    let (dirs, work_dir) = reg.map_or((&[][..], "/"), |r| (r.log_dirs.as_slice(), r.work_dir.as_str()));
    let set = cordon::cordoned(cordon::BrokerDirs { dirs, work_dir }, now);
    let whole = now == cordon::ALL;
    let op: (i32, Option<String>) = match (dir, on) {
        (None, true) if whole => return None,
        (None, true) => (SET, Some(cordon::ALL.into())),
        (None, false) if now.is_empty() => return None,
        (None, false) => (DELETE, None),
        (Some(d), true) if whole || set.contains(d) => return None,
        (Some(d), true) => (APPEND, Some(d.to_string())),
        (Some(d), false) if whole => {
            let rest: Vec<&str> = dirs
                .iter()
                .map(String::as_str)
                .filter(|x| cordon::absolute("/", x) != cordon::absolute("/", d))
                .collect();
            match rest.is_empty() {
                true => (DELETE, None),
                false => (SET, Some(rest.join(","))),
            }
        }
        (Some(d), false) => {
            // Every entry that names the dir goes, relative or absolute.
            let keep: Vec<&str> = now
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty() && cordon::absolute(work_dir, e) != cordon::absolute("/", d))
                .collect();
            if keep.len() == now.split(',').filter(|e| !e.trim().is_empty()).count() {
                return None;
            }
            match keep.is_empty() {
                true => (DELETE, None),
                false => (SET, Some(keep.join(","))),
            }
        }
    };
    let change = plan_incremental(&[(KEY.to_string(), op.0, op.1)], &rec.config).ok()?;
    let mut next = rec.clone();
    for k in change.delete {
        next.config.remove(&k);
    }
    next.config.extend(change.set);
    // A key set here is the operator's (as AlterConfigs makes it): never auto-removed.
    if let Some(auto) = next.auto_remove.as_mut() {
        auto.keys.retain(|k| k != KEY);
    }
    Some(next)
}

/// Decodes a broker config record (a default one when absent or damaged).
pub fn config_record(kv: Option<&pb::KeyValue>) -> (BrokerConfigRecord, u64) {
    match kv {
        Some(kv) => (
            BrokerConfigRecord::decode(kv.value.as_ref()).unwrap_or_default(),
            kv.mod_revision,
        ),
        None => (BrokerConfigRecord::default(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg() -> BrokerRegistration {
        BrokerRegistration {
            id: 1,
            log_dirs: vec!["/srv/d1".into(), "/srv/d2".into()],
            work_dir: "/srv".into(),
            ..Default::default()
        }
    }

    fn value(r: &BrokerConfigRecord) -> Option<&str> {
        r.config.get(topic_config::CORDONED_LOG_DIRS).map(String::as_str)
    }

    #[test]
    fn a_drain_cordons_and_an_undrain_uncordons_what_it_names() {
        let empty = BrokerConfigRecord::default();
        let whole = cordon_change(&empty, Some(&reg()), None, true).expect("changes");
        assert_eq!(value(&whole), Some("*"));
        assert!(
            cordon_change(&whole, Some(&reg()), None, true).is_none(),
            "already cordoned"
        );
        assert_eq!(value(&cordon_change(&whole, Some(&reg()), None, false).unwrap()), None);
        let one = cordon_change(&empty, Some(&reg()), Some("/srv/d1"), true).unwrap();
        assert_eq!(value(&one), Some("/srv/d1"));
        let two = cordon_change(&one, Some(&reg()), Some("/srv/d2"), true).unwrap();
        assert_eq!(value(&two), Some("/srv/d1,/srv/d2"));
        // A relative entry names the same dir.
        let mut rel = empty.clone();
        rel.config
            .insert(topic_config::CORDONED_LOG_DIRS.into(), "d1,/srv/d2".into());
        assert!(cordon_change(&rel, Some(&reg()), Some("/srv/d1"), true).is_none());
        assert_eq!(
            value(&cordon_change(&rel, Some(&reg()), Some("/srv/d1"), false).unwrap()),
            Some("/srv/d2")
        );
        // One dir out of `*`: the other dirs stay cordoned.
        assert_eq!(
            value(&cordon_change(&whole, Some(&reg()), Some("/srv/d1"), false).unwrap()),
            Some("/srv/d2")
        );
        assert!(cordon_change(&empty, Some(&reg()), Some("/srv/d1"), false).is_none());
    }

    #[test]
    fn ids_follow_the_highest_and_bad_values_are_left_out() {
        assert_eq!((next_id(None), next_id(Some(4))), (1, 5));
        let kvs = vec![pb::KeyValue {
            key: keys::plan(4),
            value: vec![9, 9].into(),
            mod_revision: 3,
            ..Default::default()
        }];
        let (plans, bad) = decode_all(&kvs);
        assert!(plans.is_empty());
        assert_eq!(bad[0].0, 4);
        assert_eq!(keys::parse_plan_key(&keys::plan(12)), Some(12));
    }
}
