//! DescribeConfigs and IncrementalAlterConfigs for topics and brokers, forwarded to the
//! controller. Throttles set this way (`leader.replication.throttled.rate`,
//! `*.replication.throttled.replicas` and the rest) are the operator's, as in Kafka: they act
//! until removed, which `kafka-reassign-partitions --verify` does with DELETE.

use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use proto::errors::ErrorCode;
use proto::ferry::{self as pb, config_resource::Type};

use super::admin::{call, text};
use super::apis::wire;
use crate::controller_channels::ControllerChannels;

/// Kafka's resource types.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;

/// Kafka's config sources, as DescribeConfigs names them.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DYNAMIC_BROKER_CONFIG: i8 = 2;

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

/// DescribeConfigs: the configs set on each topic or broker, the keys asked for or all.
pub async fn describe_configs(ch: &ControllerChannels, req: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let mut resp = DescribeConfigsResponse::default();
    for r in req.resources {
        let mut out = DescribeConfigsResult::default();
        out.resource_type = r.resource_type;
        out.resource_name = r.resource_name.clone();
        let answer = match resource(r.resource_type, &r.resource_name) {
            Err(e) => Err((wire(ErrorCode::INVALID_REQUEST), e)),
            Ok(res) => {
                let grpc = pb::DescribeConfigsRequest { resources: vec![res] };
                call(ch, |mut c| async move { c.describe_configs(grpc).await }).await
            }
        };
        let entries = answer.and_then(|a| {
            if a.error_code != 0 {
                return Err((wire(ErrorCode(a.error_code)), a.error_message));
            }
            let e = a
                .results
                .into_iter()
                .next()
                .ok_or((wire(ErrorCode::INVALID_REQUEST), String::new()))?;
            if e.error_code != 0 {
                return Err((wire(ErrorCode(e.error_code)), e.error_message));
            }
            Ok(e.config)
        });
        match entries {
            Err((code, message)) => {
                out.error_code = code;
                out.error_message = text(&message);
            }
            Ok(config) => {
                let source = if r.resource_type == TOPIC {
                    DYNAMIC_TOPIC_CONFIG
                } else {
                    DYNAMIC_BROKER_CONFIG
                };
                let mut keys: Vec<_> = config.into_iter().collect();
                keys.sort();
                out.configs = keys
                    .into_iter()
                    .filter(|(k, _)| {
                        r.configuration_keys
                            .as_ref()
                            .is_none_or(|want| want.iter().any(|w| w.as_str() == k))
                    })
                    .map(|(k, v)| {
                        let mut c = DescribeConfigsResourceResult::default();
                        c.name = StrBytes::from_string(k);
                        c.value = Some(StrBytes::from_string(v));
                        c.config_source = source;
                        c
                    })
                    .collect();
            }
        }
        resp.results.push(out);
    }
    resp
}

/// Kafka's config operations.
const SET: i8 = 0;
const DELETE: i8 = 1;

/// IncrementalAlterConfigs: SET and DELETE on each resource, each resource in one write.
/// APPEND and SUBTRACT (on list configs) are refused for now, naming the config.
pub async fn incremental_alter_configs(
    ch: &ControllerChannels,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut resp = IncrementalAlterConfigsResponse::default();
    for r in req.resources {
        let mut out = AlterConfigsResourceResponse::default();
        out.resource_type = r.resource_type;
        out.resource_name = r.resource_name.clone();
        let mut set = std::collections::HashMap::new();
        let mut delete = Vec::new();
        let mut refused = None;
        for c in &r.configs {
            match (c.config_operation, &c.value) {
                (SET, Some(v)) => {
                    set.insert(c.name.to_string(), v.to_string());
                }
                (SET, None) => refused = Some(format!("{}: SET needs a value", c.name)),
                (DELETE, _) => delete.push(c.name.to_string()),
                (op, _) => {
                    refused = Some(format!(
                        "{}: operation {op} is not served (SET 0 and DELETE 1 are)",
                        c.name
                    ))
                }
            }
        }
        let answer = match (refused, resource(r.resource_type, &r.resource_name)) {
            (Some(why), _) | (None, Err(why)) => Err((wire(ErrorCode::INVALID_REQUEST), why)),
            (None, Ok(res)) => {
                let grpc = pb::AlterConfigsRequest {
                    resource: Some(res),
                    set,
                    delete,
                    validate_only: req.validate_only,
                };
                call(ch, |mut c| async move { c.alter_configs(grpc).await })
                    .await
                    .map(|a| (wire(ErrorCode(a.error_code)), a.error_message))
            }
        };
        let (code, message) = answer.unwrap_or_else(|e| e);
        out.error_code = code;
        out.error_message = text(&message);
        resp.responses.push(out);
    }
    resp
}
