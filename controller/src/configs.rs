//! DescribeConfigs and AlterConfigs for topics (stored in the topic record) and brokers
//! (`/config/brokers/<id>`, and the cluster-wide default `/config/brokers/<default>` for the
//! resource name "", as Kafka names it). Configs set here are the operator's: Ferry never removes
//! them on its own (setting one here also takes it out of AlterThrottles' auto-remove set).
//! Throttles a reassignment owns live in the partition state instead and go with it. A broker's
//! effective configs (which level wins) are `proto::broker_config`'s.

use std::collections::HashMap;

use metastore::Client;
use prost::Message;
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::config_resource::Type;
use proto::ferry::*;
use proto::{keys, topic_config};

use crate::store::{at_revision, put_op};
use crate::write_runner::{Plan, Runner};

fn refused(code: ErrorCode, message: String) -> AlterConfigsResponse {
    AlterConfigsResponse {
        error_code: code.0,
        error_message: message,
    }
}

/// The broker a resource names: `Some(id)`, or `None` for "" (the cluster-wide default).
fn broker_id(name: &str) -> Result<Option<i32>, Refusal> {
    if name.is_empty() {
        return Ok(None);
    }
    name.parse::<i32>().ok().filter(|id| *id >= 0).map(Some).ok_or_else(|| {
        Refusal::new(
            ErrorCode::INVALID_REQUEST,
            format!("broker {name:?} is neither a broker id nor \"\" (the default of every broker)"),
        )
    })
}

/// The key of a broker's configs, or of the cluster-wide default.
fn broker_key(id: Option<i32>) -> String {
    id.map_or_else(|| keys::BROKER_DEFAULT_CONFIG.to_string(), keys::broker_config)
}

/// The stored record behind a resource's configs.
enum Record {
    Topic(TopicRecord),
    /// A broker's record (of the broker with this id, or the default) holds only configs and
    /// which of them are auto-remove; with the registrations its cordoned dirs are checked
    /// against (the broker's own, or every broker's for the default).
    Broker(Option<i32>, AutoRemove, Vec<BrokerRegistration>),
}

/// A resource's configs, the revision they were read at (0: nothing stored yet) and its record.
type Stored = (HashMap<String, String>, u64, Record);

/// The refusal of a stored record that cannot be decoded: it names the key.
fn damaged(key: &str, e: &prost::DecodeError) -> Refusal {
    Refusal::new(
        ErrorCode::KAFKA_STORAGE_ERROR,
        format!("{key} holds a record that cannot be read ({e}); nothing was changed"),
    )
}

/// A topic's stored record, or the refusal naming its key.
fn decoded_topic(key: &str, value: &[u8]) -> Result<TopicRecord, Refusal> {
    TopicRecord::decode(value).map_err(|e| damaged(key, &e))
}

/// Reads a resource's configs, or refuses a resource that is not there or not named right.
async fn read(client: &Client, r: &ConfigResource) -> Result<Result<Stored, Refusal>, metastore::ClientError> {
    match Type::try_from(r.r#type) {
        Ok(Type::Topic) => {
            let Some(kv) = client.get(&keys::topic(&r.name)).await? else {
                return Ok(Err(Refusal::new(
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("Topic '{}' does not exist.", r.name),
                )));
            };
            // A record that cannot be read is refused, never taken as a default: written back,
            // the default would lose the topic's id and partition count.
            let rec = match decoded_topic(&keys::topic(&r.name), &kv.value) {
                Ok(rec) => rec,
                Err(e) => return Ok(Err(e)),
            };
            Ok(Ok((rec.config.clone(), kv.mod_revision, Record::Topic(rec))))
        }
        Ok(Type::Broker) => {
            let id = match broker_id(&r.name) {
                Ok(id) => id,
                Err(e) => return Ok(Err(e)),
            };
            let kv = client.get(&broker_key(id)).await?;
            let rev = kv.as_ref().map_or(0, |kv| kv.mod_revision);
            let rec = match kv {
                Some(kv) => match BrokerConfigRecord::decode(kv.value.as_ref()) {
                    Ok(rec) => rec,
                    Err(e) => return Ok(Err(damaged(&broker_key(id), &e))),
                },
                None => BrokerConfigRecord::default(),
            };
            let regs = registrations(client, id).await?;
            Ok(Ok((
                rec.config,
                rev,
                Record::Broker(id, rec.auto_remove.unwrap_or_default(), regs),
            )))
        }
        Err(_) => Ok(Err(Refusal::new(
            ErrorCode::INVALID_REQUEST,
            format!("unknown resource type {}", r.r#type),
        ))),
    }
}

/// The registrations a broker resource's cordoned dirs are checked against: the broker's own
/// (none while it is not registered), or every broker's for the default. Undecodable ones are
/// skipped: a check against them could only refuse.
async fn registrations(client: &Client, id: Option<i32>) -> Result<Vec<BrokerRegistration>, metastore::ClientError> {
    let kvs = match id {
        Some(id) => client.get(&keys::broker(id)).await?.into_iter().collect(),
        None => client.range(keys::BROKER_IDS, 0).await?.kvs,
    };
    Ok(kvs
        .iter()
        .filter_map(|kv| BrokerRegistration::decode(kv.value.as_ref()).ok())
        .collect())
}

/// Checks that every dir a `cordoned.log.dirs` value names is a dir of the broker it is set on
/// (or, on the default, of some broker), relative names resolved as that broker resolves them.
fn check_cordon(value: &str, id: Option<i32>, regs: &[BrokerRegistration]) -> Result<(), Refusal> {
    let dirs: Vec<proto::cordon::BrokerDirs> = regs
        .iter()
        .map(|r| proto::cordon::BrokerDirs {
            dirs: &r.log_dirs,
            work_dir: &r.work_dir,
        })
        .collect();
    let Some(dir) = proto::cordon::unknown_dir(&dirs, value) else {
        return Ok(());
    };
    let whose = match id {
        Some(id) if regs.is_empty() => format!("broker {id}, which is not registered (its log dirs are unknown)"),
        Some(id) => format!("broker {id}"),
        None => "any registered broker".to_string(),
    };
    Err(Refusal::new(
        ErrorCode::INVALID_CONFIG,
        format!(
            "{}: {dir:?} is not a log dir of {whose}",
            topic_config::CORDONED_LOG_DIRS
        ),
    ))
}

/// DescribeConfigs.
pub async fn describe(
    client: &Client,
    req: DescribeConfigsRequest,
) -> Result<DescribeConfigsResponse, metastore::ClientError> {
    let mut results = Vec::new();
    for r in req.resources {
        let entry = match read(client, &r).await? {
            Ok((config, _, record)) => {
                let auto = match record {
                    Record::Topic(rec) => rec.auto_remove.unwrap_or_default(),
                    Record::Broker(_, auto, _) => auto,
                };
                ConfigEntries {
                    resource: Some(r),
                    config,
                    auto_remove: auto.keys,
                    auto_remove_armed: auto.armed,
                    ..Default::default()
                }
            }
            Err(Refusal { code, message }) => ConfigEntries {
                resource: Some(r),
                error_code: code.0,
                error_message: message,
                ..Default::default()
            },
        };
        results.push(entry);
    }
    Ok(DescribeConfigsResponse {
        results,
        ..Default::default()
    })
}

/// AlterConfigs' write of one resource: its configs with the request's sets and removals, in a
/// write guarded by the revision they were read at.
fn alter_writes(req: &AlterConfigsRequest, name: &str, (mut config, rev, record): Stored) -> Result<Plan<()>, Refusal> {
    let mut set = req.set.clone();
    let mut delete = req.delete.clone();
    if !req.ops.is_empty() {
        // Kafka's operations, over the configs as stored now: APPEND and SUBTRACT are decided
        // here, in the guarded write, so a concurrent change to another key is never lost.
        let mut now = config.clone();
        for k in &delete {
            now.remove(k);
        }
        now.extend(set.clone());
        let ops: Vec<(String, i32, Option<String>)> = req
            .ops
            .iter()
            .map(|o| (o.name.clone(), o.op, o.value.clone()))
            .collect();
        let change = proto::config_ops::plan_incremental(&ops, &now)?;
        for k in change.delete {
            set.remove(&k);
            if !delete.contains(&k) {
                delete.push(k);
            }
        }
        for (k, v) in change.set {
            delete.retain(|d| *d != k);
            set.insert(k, v);
        }
    }
    let checked = match &record {
        Record::Topic(_) => topic_config::validate(&set),
        Record::Broker(..) => topic_config::validate_broker(&set),
    };
    checked.map_err(|e| Refusal::new(ErrorCode::INVALID_CONFIG, e))?;
    if let (Record::Broker(id, _, regs), Some(v)) = (&record, set.get(topic_config::CORDONED_LOG_DIRS)) {
        check_cordon(v, *id, regs)?;
    }
    for k in &delete {
        config.remove(k);
    }
    config.extend(set.clone());
    if req.validate_only {
        return Ok(Plan::answer(()));
    }
    // A key set or removed here is the operator's from now on: never removed by Ferry.
    let by_hand = |auto: Option<AutoRemove>| {
        auto.map(|mut a| {
            a.keys.retain(|k| !set.contains_key(k) && !delete.contains(k));
            a
        })
        .filter(|a| !a.keys.is_empty())
    };
    let (key, op) = match record {
        Record::Topic(mut rec) => {
            rec.config = config;
            rec.auto_remove = by_hand(rec.auto_remove);
            let key = keys::topic(name);
            (key.clone(), put_op(key, &rec))
        }
        Record::Broker(id, auto, _) => {
            let key = broker_key(id);
            let rec = BrokerConfigRecord {
                config,
                auto_remove: by_hand(Some(auto)),
            };
            (key.clone(), put_op(key, &rec))
        }
    };
    Ok(Plan::write(vec![at_revision(key, rev)], vec![op], ()))
}

/// AlterConfigs: sets and removes configs of one resource, checked first, in one guarded write.
pub async fn alter(client: &Client, req: AlterConfigsRequest) -> Result<AlterConfigsResponse, metastore::ClientError> {
    let Some(r) = req.resource.clone() else {
        return Ok(refused(ErrorCode::INVALID_REQUEST, "resource: missing".into()));
    };
    let kept_changing = Refusal::new(ErrorCode::INVALID_UPDATE_VERSION, "the configs kept changing; retry");
    let outcome = Runner::new(client, "configs", kept_changing)
        .run(|| read(client, &r), |stored| alter_writes(&req, &r.name, stored?))
        .await?;
    Ok(match outcome {
        Ok(()) => AlterConfigsResponse::default(),
        Err(Refusal { code, message }) => refused(code, message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// APPEND is planned over the configs as stored when the write is decided (and decided again
    /// when its guard fails), so two appends to one list, or a change to another key beside it,
    /// keep both: the broker no longer plans it over a read of its own.
    #[test]
    fn an_append_is_planned_over_the_stored_configs_in_the_guarded_write() {
        use proto::config_ops::APPEND;
        use proto::ferry::ConfigOp;
        const LEADERS: &str = "leader.replication.throttled.replicas";
        let stored = TopicRecord {
            topic_id: "id".into(),
            partitions: 2,
            config: [
                (LEADERS.to_string(), "0:1".to_string()),
                ("retention.ms".to_string(), "1000".to_string()),
            ]
            .into(),
            ..Default::default()
        };
        let req = AlterConfigsRequest {
            ops: vec![ConfigOp {
                name: LEADERS.into(),
                op: APPEND,
                value: Some("1:2".into()),
            }],
            ..Default::default()
        };
        let plan = alter_writes(&req, "t", (stored.config.clone(), 7, Record::Topic(stored))).unwrap();
        assert_eq!(plan.guards, vec![at_revision(keys::topic("t"), 7)]);
        let Some(proto::metastore::op::Op::Put(put)) = &plan.ops[0].op else {
            panic!("a put")
        };
        let rec = TopicRecord::decode(put.value.as_ref()).unwrap();
        assert_eq!(rec.config[LEADERS], "0:1,1:2");
        assert_eq!(rec.config["retention.ms"], "1000", "the other key stays");
        assert_eq!((rec.topic_id.as_str(), rec.partitions), ("id", 2));
    }

    #[test]
    fn an_unreadable_topic_record_is_refused_by_its_key_not_taken_as_a_default() {
        let good = TopicRecord {
            topic_id: "x".into(),
            partitions: 3,
            ..Default::default()
        };
        assert_eq!(
            decoded_topic("/brokers/topics/t", &good.encode_to_vec())
                .unwrap()
                .partitions,
            3
        );
        let err = decoded_topic("/brokers/topics/t", &[0xff, 0xff, 0xff]).unwrap_err();
        assert_eq!(err.code, ErrorCode::KAFKA_STORAGE_ERROR);
        assert!(
            err.message
                .starts_with("/brokers/topics/t holds a record that cannot be read"),
            "{}",
            err.message
        );
    }

    /// The default entity (name "") is stored under its own key; a cordon's dirs are checked
    /// against the registrations, relative names resolved against each broker's working dir.
    #[test]
    fn a_cordon_names_only_registered_dirs_and_the_default_has_its_own_key() {
        use proto::config_ops::SET;
        use proto::ferry::ConfigOp;
        const CORDON: &str = topic_config::CORDONED_LOG_DIRS;
        let reg = BrokerRegistration {
            id: 1,
            log_dirs: vec!["/srv/data/d1".into(), "/srv/data/d2".into()],
            work_dir: "/srv".into(),
            ..Default::default()
        };
        let set = |v: &str| AlterConfigsRequest {
            ops: vec![ConfigOp {
                name: CORDON.into(),
                op: SET,
                value: Some(v.into()),
            }],
            ..Default::default()
        };
        let stored = |id: Option<i32>, regs: Vec<BrokerRegistration>| {
            (HashMap::new(), 0, Record::Broker(id, AutoRemove::default(), regs))
        };
        assert_eq!(broker_id("").unwrap(), None);
        assert_eq!(broker_id("2").unwrap(), Some(2));
        assert!(broker_id("x").is_err());
        let plan = alter_writes(&set("data/d1"), "", stored(None, vec![reg.clone()])).unwrap();
        assert_eq!(plan.guards, vec![at_revision(keys::BROKER_DEFAULT_CONFIG.into(), 0)]);
        let plan = alter_writes(&set("/srv/data/d2"), "1", stored(Some(1), vec![reg.clone()])).unwrap();
        assert_eq!(plan.guards, vec![at_revision(keys::broker_config(1), 0)]);
        let e = alter_writes(&set("data/d9"), "1", stored(Some(1), vec![reg.clone()]))
            .err()
            .unwrap();
        assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
        assert!(
            e.message.contains("\"data/d9\" is not a log dir of broker 1"),
            "{}",
            e.message
        );
        let e = alter_writes(&set("d1"), "3", stored(Some(3), vec![])).err().unwrap();
        assert!(e.message.contains("not registered"), "{}", e.message);
        assert!(alter_writes(&set("*"), "3", stored(Some(3), vec![])).is_ok());
        let e = alter_writes(&set("*,d1"), "1", stored(Some(1), vec![reg]))
            .err()
            .unwrap();
        assert!(e.message.contains(CORDON), "{}", e.message);
    }
}
