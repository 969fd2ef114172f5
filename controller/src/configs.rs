//! DescribeConfigs and AlterConfigs for topics (stored in the topic record) and brokers
//! (`/config/brokers/<id>`). Configs set here are the operator's: Ferry never removes them on its
//! own (setting one here also takes it out of AlterThrottles' auto-remove set). Throttles a
//! reassignment owns live in the partition state instead and go with it.

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

fn broker_id(name: &str) -> Result<i32, Refusal> {
    name.parse::<i32>().ok().filter(|id| *id >= 0).ok_or_else(|| {
        Refusal::new(
            ErrorCode::INVALID_REQUEST,
            format!("broker {name:?} is not a broker id"),
        )
    })
}

/// The stored record behind a resource's configs.
enum Record {
    Topic(TopicRecord),
    /// A broker's record (of the broker with this id) holds only configs and which of them are
    /// auto-remove.
    Broker(i32, AutoRemove),
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
            let kv = client.get(&keys::broker_config(id)).await?;
            let rev = kv.as_ref().map_or(0, |kv| kv.mod_revision);
            let rec = match kv {
                Some(kv) => match BrokerConfigRecord::decode(kv.value.as_ref()) {
                    Ok(rec) => rec,
                    Err(e) => return Ok(Err(damaged(&keys::broker_config(id), &e))),
                },
                None => BrokerConfigRecord::default(),
            };
            Ok(Ok((
                rec.config,
                rev,
                Record::Broker(id, rec.auto_remove.unwrap_or_default()),
            )))
        }
        Err(_) => Ok(Err(Refusal::new(
            ErrorCode::INVALID_REQUEST,
            format!("unknown resource type {}", r.r#type),
        ))),
    }
}

/// DescribeConfigs.
pub async fn describe(
    client: &Client,
    req: DescribeConfigsRequest,
) -> Result<DescribeConfigsResponse, metastore::ClientError> {
    let mut results = Vec::new();
    for r in req.resources {
        let entry = match read(client, &r).await? {
            Ok((config, _, _)) => ConfigEntries {
                resource: Some(r),
                config,
                ..Default::default()
            },
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
    let checked = match record {
        Record::Topic(_) => topic_config::validate(&set),
        Record::Broker(..) => topic_config::validate_broker(&set),
    };
    checked.map_err(|e| Refusal::new(ErrorCode::INVALID_CONFIG, e))?;
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
        Record::Broker(id, auto) => {
            let key = keys::broker_config(id);
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
}
