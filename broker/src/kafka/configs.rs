//! DescribeConfigs, IncrementalAlterConfigs and AlterConfigs for topics and brokers, forwarded
//! to the controller. A broker's configs are described by that broker, as in Kafka: its own
//! dynamic configs, the cluster-wide default (resource name "") and its static configs, resolved
//! by `proto::broker_config`, each with its source and, when asked, its synonyms. Throttles set this way (`leader.replication.throttled.rate`,
//! `*.replication.throttled.replicas` and the rest) are the operator's, as in Kafka: they act
//! until removed, which `kafka-reassign-partitions --verify` does with DELETE.

use std::collections::HashMap;

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse as ReplaceResult;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use proto::broker_config::{Layers, Resolved};
use proto::config_ops::ConfigChange;
use proto::errors::ErrorCode;
use proto::ferry::{self as pb, config_resource::Type};
use proto::topic_config;

use super::admin::{call, text};
use super::apis::wire;
use crate::controller_channels::ControllerChannels;
use crate::replica_manager::BrokerCore;

/// Kafka's resource types.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;

/// Kafka's config sources, as DescribeConfigs names them (brokers': `proto::broker_config`).
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DEFAULT_CONFIG: i8 = 5;

/// One config as DescribeConfigs lists it.
#[derive(Debug, PartialEq, Eq)]
pub struct Described {
    /// Its name.
    pub name: String,
    /// Its value: the one set, else Kafka's default.
    pub value: String,
    /// Where the value comes from (Kafka's codes: dynamic, or default).
    pub source: i8,
    /// Kafka's type code, 0 when unknown.
    pub kafka_type: i8,
    /// Its value at each level that sets it, highest first, by source code.
    pub synonyms: Vec<(i8, String)>,
}

impl From<Resolved> for Described {
    fn from(r: Resolved) -> Self {
        Described {
            name: r.name,
            value: r.value,
            source: r.source.code(),
            kafka_type: r.kafka_type,
            synonyms: r.synonyms.into_iter().map(|(s, v)| (s.code(), v)).collect(),
        }
    }
}

/// Every config of a resource, as Kafka lists them: each one Ferry knows, set or at its
/// default, then any other set (imported, say), in name order.
pub fn described(mut set: HashMap<String, String>, known: &[topic_config::Known], topic: bool) -> Vec<Described> {
    let dynamic = if topic {
        DYNAMIC_TOPIC_CONFIG
    } else {
        DYNAMIC_BROKER_CONFIG
    };
    let mut out: Vec<Described> = known
        .iter()
        .map(|k| match set.remove(k.name) {
            Some(value) => Described {
                name: k.name.to_string(),
                value,
                source: dynamic,
                kafka_type: k.kafka_type,
                synonyms: Vec::new(),
            },
            None => Described {
                name: k.name.to_string(),
                value: k.default.to_string(),
                source: DEFAULT_CONFIG,
                kafka_type: k.kafka_type,
                synonyms: Vec::new(),
            },
        })
        .collect();
    out.extend(set.into_iter().map(|(name, value)| Described {
        name,
        value,
        source: dynamic,
        kafka_type: 0,
        synonyms: Vec::new(),
    }));
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// A failure as Kafka answers it: the wire code and the message.
type Failure = (i16, String);

fn resource(kind: i8, name: &StrBytes) -> Result<pb::ConfigResource, String> {
    let r#type = match kind {
        TOPIC => Type::Topic,
        BROKER => Type::Broker,
        k => return Err(format!("resource type {k} is not served (topics 2 and brokers 4 are)")),
    };
    Ok(pb::ConfigResource {
        r#type: r#type as i32,
        name: name.to_string(),
    })
}

/// The configs set on one resource now.
async fn current(ch: &ControllerChannels, res: pb::ConfigResource) -> Result<HashMap<String, String>, Failure> {
    let mut all = current_all(ch, vec![res]).await?;
    all.pop().ok_or((wire(ErrorCode::INVALID_REQUEST), String::new()))
}

/// The configs set on each of `resources` now, in their order, read in one call.
async fn current_all(
    ch: &ControllerChannels,
    resources: Vec<pb::ConfigResource>,
) -> Result<Vec<HashMap<String, String>>, Failure> {
    let n = resources.len();
    let grpc = pb::DescribeConfigsRequest { resources };
    let a = call(ch, |mut c| async move { c.describe_configs(grpc).await }).await?;
    if a.error_code != 0 {
        return Err((wire(ErrorCode(a.error_code)), a.error_message));
    }
    if a.results.len() != n {
        return Err((
            wire(ErrorCode::INVALID_REQUEST),
            format!("{} answers to {n} resources", a.results.len()),
        ));
    }
    a.results
        .into_iter()
        .map(|e| match e.error_code {
            0 => Ok(e.config),
            code => Err((wire(ErrorCode(code)), e.error_message)),
        })
        .collect()
}

/// A broker resource's configs as this broker describes them: the cluster-wide default (name
/// ""), or this broker's own, every level resolved. Another broker's are refused, as Kafka
/// refuses them: clients send a broker's DescribeConfigs to that broker, which alone knows its
/// static configs.
async fn broker_described(ch: &ControllerChannels, core: &BrokerCore, name: &str) -> Result<Vec<Described>, Failure> {
    let res = |name: &str| pb::ConfigResource {
        r#type: Type::Broker as i32,
        name: name.to_string(),
    };
    let static_ = &core.config.static_configs;
    if name.is_empty() {
        let default = current(ch, res("")).await?;
        let d = proto::broker_config::describe_default(&default, static_);
        return Ok(d.into_iter().map(Described::from).collect());
    }
    if name.parse::<i32>() != Ok(core.id) {
        return Err((
            wire(ErrorCode::INVALID_REQUEST),
            format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                core.id
            ),
        ));
    }
    let mut both = current_all(ch, vec![res(name), res("")]).await?;
    let default = both.pop().unwrap_or_default();
    let own = both.pop().unwrap_or_default();
    let layers = Layers {
        broker: Some(&own),
        default: &default,
        static_,
    };
    Ok(proto::broker_config::describe_broker(layers)
        .into_iter()
        .map(Described::from)
        .collect())
}

/// DescribeConfigs: the configs of each topic or broker, the keys asked for or all.
pub async fn describe_configs(
    ch: &ControllerChannels,
    core: &BrokerCore,
    req: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let mut resp = DescribeConfigsResponse::default();
    for r in req.resources {
        let mut out = DescribeConfigsResult::default();
        out.resource_type = r.resource_type;
        out.resource_name = r.resource_name.clone();
        let entries = match resource(r.resource_type, &r.resource_name) {
            Err(e) => Err((wire(ErrorCode::INVALID_REQUEST), e)),
            Ok(_) if r.resource_type == BROKER => broker_described(ch, core, &r.resource_name).await,
            Ok(res) => current(ch, res)
                .await
                .map(|config| described(config, topic_config::TOPIC_CONFIGS, true)),
        };
        match entries {
            Err((code, message)) => {
                out.error_code = code;
                out.error_message = text(&message);
            }
            Ok(entries) => {
                out.configs = entries
                    .into_iter()
                    .filter(|d| {
                        r.configuration_keys
                            .as_ref()
                            .is_none_or(|want| want.iter().any(|w| w.as_str() == d.name))
                    })
                    .map(|d| {
                        let mut c = DescribeConfigsResourceResult::default();
                        c.name = StrBytes::from_string(d.name);
                        c.value = Some(StrBytes::from_string(d.value));
                        c.config_source = d.source;
                        // Synonyms are asked for from v1 on.
                        if req.include_synonyms {
                            c.synonyms = d
                                .synonyms
                                .into_iter()
                                .map(|(source, value)| {
                                    let mut s = DescribeConfigsSynonym::default();
                                    s.name = c.name.clone();
                                    s.value = Some(StrBytes::from_string(value));
                                    s.source = source;
                                    s
                                })
                                .collect();
                        }
                        // The type is in the answer from v3 on.
                        if version >= 3 {
                            c.config_type = d.kafka_type;
                        }
                        c
                    })
                    .collect();
            }
        }
        resp.results.push(out);
    }
    resp
}

/// The change the legacy AlterConfigs asks for: the given configs become the resource's whole
/// set, so configs set now and not given are removed (a null value removes one too).
pub fn plan_replace(given: &[(String, Option<String>)], current: &HashMap<String, String>) -> ConfigChange {
    let mut change = ConfigChange::default();
    for name in current.keys() {
        if !given.iter().any(|(g, _)| g == name) {
            change.put(name, None);
        }
    }
    for (name, value) in given {
        change.put(name, value.clone());
    }
    change.delete.sort();
    change
}

/// Writes `change` and Kafka's operations `ops` to `res` in one request; the controller applies
/// the operations to the configs it holds, inside its guarded write.
async fn write(
    ch: &ControllerChannels,
    res: pb::ConfigResource,
    change: ConfigChange,
    ops: Vec<pb::ConfigOp>,
    validate_only: bool,
) -> Result<(), Failure> {
    let grpc = pb::AlterConfigsRequest {
        resource: Some(res),
        set: change.set,
        delete: change.delete,
        validate_only,
        ops,
    };
    let a = call(ch, |mut c| async move { c.alter_configs(grpc).await }).await?;
    match a.error_code {
        0 => Ok(()),
        code => Err((wire(ErrorCode(code)), a.error_message)),
    }
}

/// IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on each resource, each resource
/// in one guarded write of the controller's, which plans the operations over what it holds
/// (`proto::config_ops`).
pub async fn incremental_alter_configs(
    ch: &ControllerChannels,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut resp = IncrementalAlterConfigsResponse::default();
    for r in req.resources {
        let mut out = AlterConfigsResourceResponse::default();
        out.resource_type = r.resource_type;
        out.resource_name = r.resource_name.clone();
        let ops: Vec<pb::ConfigOp> = r
            .configs
            .iter()
            .map(|c| pb::ConfigOp {
                name: c.name.to_string(),
                op: i32::from(c.config_operation),
                value: c.value.as_ref().map(|v| v.to_string()),
            })
            .collect();
        let outcome = async {
            let res = resource(r.resource_type, &r.resource_name).map_err(invalid)?;
            write(ch, res, ConfigChange::default(), ops, req.validate_only).await
        };
        let (code, message) = outcome.await.err().unwrap_or((0, String::new()));
        out.error_code = code;
        out.error_message = text(&message);
        resp.responses.push(out);
    }
    resp
}

/// AlterConfigs (the legacy API that `kafka-configs` used before 2.3): each resource's configs
/// become exactly those given.
pub async fn alter_configs(ch: &ControllerChannels, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut resp = AlterConfigsResponse::default();
    for r in req.resources {
        let mut out = ReplaceResult::default();
        out.resource_type = r.resource_type;
        out.resource_name = r.resource_name.clone();
        let given: Vec<(String, Option<String>)> = r
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
            .collect();
        let outcome = async {
            let res = resource(r.resource_type, &r.resource_name).map_err(invalid)?;
            let now = current(ch, res.clone()).await?;
            write(ch, res, plan_replace(&given, &now), Vec::new(), req.validate_only).await
        };
        let (code, message) = outcome.await.err().unwrap_or((0, String::new()));
        out.error_code = code;
        out.error_message = text(&message);
        resp.responses.push(out);
    }
    resp
}

fn invalid(why: String) -> Failure {
    (wire(ErrorCode::INVALID_REQUEST), why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_lists_every_known_config_set_or_default() {
        let set = HashMap::from([
            ("retention.ms".to_string(), "1000".to_string()),
            ("compression.type".to_string(), "producer".to_string()),
        ]);
        let d = described(set, topic_config::TOPIC_CONFIGS, true);
        assert_eq!(d.len(), topic_config::TOPIC_CONFIGS.len() + 1);
        let get = |n: &str| d.iter().find(|c| c.name == n).unwrap();
        assert_eq!(
            (get("retention.ms").value.as_str(), get("retention.ms").source),
            ("1000", DYNAMIC_TOPIC_CONFIG)
        );
        assert_eq!(
            (
                get("min.insync.replicas").value.as_str(),
                get("min.insync.replicas").source
            ),
            ("1", DEFAULT_CONFIG)
        );
        assert_eq!(get("compression.type").source, DYNAMIC_TOPIC_CONFIG);
        assert!(d.windows(2).all(|w| w[0].name < w[1].name));
    }

    #[test]
    fn replace_removes_what_it_does_not_name() {
        let now = HashMap::from([
            ("retention.ms".to_string(), "1000".to_string()),
            ("min.insync.replicas".to_string(), "2".to_string()),
            ("segment.bytes".to_string(), "1048576".to_string()),
        ]);
        let given = [
            ("retention.ms".to_string(), Some("5000".to_string())),
            ("segment.bytes".to_string(), None),
        ];
        let c = plan_replace(&given, &now);
        assert_eq!(c.set, HashMap::from([("retention.ms".to_string(), "5000".to_string())]));
        assert_eq!(
            c.delete,
            vec!["min.insync.replicas".to_string(), "segment.bytes".to_string()]
        );
    }
}
