//! CreateAcls, DescribeAcls and DeleteAcls, what `kafka-acls` sends: mapped to the Security
//! service of the controller, which checks and stores them (`controller::acl_admin`), and back
//! with Kafka's codes. Version 0 of each has no pattern type: it means a literal pattern.

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use proto::ferry as pb;

use super::admin::{call_security, text};
use crate::controller_channels::ControllerChannels;

/// Kafka's LITERAL pattern type, what version 0 means.
const LITERAL: i32 = 3;

fn s(b: &StrBytes) -> String {
    b.to_string()
}

fn opt(b: &Option<StrBytes>) -> Option<String> {
    b.as_ref().map(s)
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A filter as the Security service takes it, from a request's filter fields.
#[allow(clippy::too_many_arguments)]
fn filter(
    version: i16,
    resource_type: i8,
    name: &Option<StrBytes>,
    pattern_type: i8,
    principal: &Option<StrBytes>,
    host: &Option<StrBytes>,
    operation: i8,
    permission: i8,
) -> pb::AclFilterMessage {
    pb::AclFilterMessage {
        resource_type: resource_type.into(),
        resource_name: opt(name),
        pattern_type: if version == 0 { LITERAL } else { pattern_type.into() },
        principal: opt(principal),
        host: opt(host),
        operation: operation.into(),
        permission: permission.into(),
    }
}

/// CreateAcls: one result per creation, in order.
pub async fn create(ch: &ControllerChannels, req: CreateAclsRequest, version: i16) -> CreateAclsResponse {
    let n = req.creations.len();
    let grpc = pb::CreateAclsRequest {
        creations: req
            .creations
            .iter()
            .map(|c| pb::AclBindingMessage {
                resource_type: c.resource_type.into(),
                resource_name: s(&c.resource_name),
                pattern_type: if version == 0 {
                    LITERAL
                } else {
                    c.resource_pattern_type.into()
                },
                principal: s(&c.principal),
                host: s(&c.host),
                operation: c.operation.into(),
                permission: c.permission_type.into(),
            })
            .collect(),
    };
    let results: Vec<(i16, String)> = match call_security(ch, |mut a| async move { a.create_acls(grpc).await }).await {
        Ok(r) => r
            .results
            .into_iter()
            .map(|r| (r.error_code as i16, r.error_message))
            .collect(),
        Err(e) => vec![e; n],
    };
    let mut resp = CreateAclsResponse::default();
    resp.results = results
        .into_iter()
        .map(|(code, message)| {
            let mut r = AclCreationResult::default();
            r.error_code = code;
            r.error_message = text(&message);
            r
        })
        .collect();
    resp
}

/// DescribeAcls: the ACLs the filter matches, grouped by resource pattern.
pub async fn describe(ch: &ControllerChannels, req: DescribeAclsRequest, version: i16) -> DescribeAclsResponse {
    let grpc = pb::DescribeAclsRequest {
        filter: Some(filter(
            version,
            req.resource_type_filter,
            &req.resource_name_filter,
            req.pattern_type_filter,
            &req.principal_filter,
            &req.host_filter,
            req.operation,
            req.permission_type,
        )),
    };
    let mut resp = DescribeAclsResponse::default();
    match call_security(ch, |mut a| async move { a.describe_acls(grpc).await }).await {
        Ok(r) if r.error_code != 0 => {
            resp.error_code = r.error_code as i16;
            resp.error_message = text(&r.error_message);
        }
        Ok(r) => {
            let mut resources: Vec<DescribeAclsResource> = Vec::new();
            for b in r.acls {
                let mut d = AclDescription::default();
                d.principal = str_bytes(&b.principal);
                d.host = str_bytes(&b.host);
                d.operation = b.operation as i8;
                d.permission_type = b.permission as i8;
                let same = |x: &DescribeAclsResource| {
                    x.resource_type == b.resource_type as i8
                        && x.resource_name.as_str() == b.resource_name
                        && x.pattern_type == b.pattern_type as i8
                };
                match resources.iter_mut().find(|x| same(x)) {
                    Some(x) => x.acls.push(d),
                    None => {
                        let mut x = DescribeAclsResource::default();
                        x.resource_type = b.resource_type as i8;
                        x.resource_name = str_bytes(&b.resource_name);
                        x.pattern_type = b.pattern_type as i8;
                        x.acls.push(d);
                        resources.push(x);
                    }
                }
            }
            resp.resources = resources;
        }
        Err((code, message)) => {
            resp.error_code = code;
            resp.error_message = text(&message);
        }
    }
    resp
}

/// DeleteAcls: per filter, the ACLs it matched and deleted.
pub async fn delete(ch: &ControllerChannels, req: DeleteAclsRequest, version: i16) -> DeleteAclsResponse {
    let n = req.filters.len();
    let grpc = pb::DeleteAclsRequest {
        filters: req
            .filters
            .iter()
            .map(|f| {
                filter(
                    version,
                    f.resource_type_filter,
                    &f.resource_name_filter,
                    f.pattern_type_filter,
                    &f.principal_filter,
                    &f.host_filter,
                    f.operation,
                    f.permission_type,
                )
            })
            .collect(),
    };
    let results = match call_security(ch, |mut a| async move { a.delete_acls(grpc).await }).await {
        Ok(r) => r.results,
        Err((code, message)) => vec![
            pb::DeleteAclsFilterResult {
                error_code: code.into(),
                error_message: message,
                deleted: vec![],
            };
            n
        ],
    };
    let mut resp = DeleteAclsResponse::default();
    resp.filter_results = results
        .into_iter()
        .map(|r| {
            let mut f = DeleteAclsFilterResult::default();
            f.error_code = r.error_code as i16;
            f.error_message = text(&r.error_message);
            f.matching_acls = r
                .deleted
                .into_iter()
                .map(|b| {
                    let mut m = DeleteAclsMatchingAcl::default();
                    m.resource_type = b.resource_type as i8;
                    m.resource_name = str_bytes(&b.resource_name);
                    m.pattern_type = b.pattern_type as i8;
                    m.principal = str_bytes(&b.principal);
                    m.host = str_bytes(&b.host);
                    m.operation = b.operation as i8;
                    m.permission_type = b.permission as i8;
                    m
                })
                .collect();
            f
        })
        .collect();
    resp
}
