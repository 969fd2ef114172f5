//! ACLs in the metastore, in ZooKeeper's layout (`proto::acl::zk`): CreateAcls, DescribeAcls
//! and DeleteAcls, checked as Kafka's controller checks them. Each ACL key holds every entry
//! of one resource pattern; a change rewrites the keys it touches, guarded by their revisions.

use std::collections::{BTreeMap, BTreeSet};

use metastore::Client;
use proto::acl::{
    self, AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter, Operation, PatternType,
    Permission, ResourcePattern, ResourcePatternFilter, ResourceType,
};
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::{
    AclBindingMessage, AclFilterMessage, AclResult, CreateAclsRequest, CreateAclsResponse, DeleteAclsFilterResult,
    DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse,
};
use proto::keys;
use proto::metastore as pb;

use crate::limits::RequestLimits;
use crate::store::at_revision;
use crate::write_runner::{Plan, Runner};

fn code(c: i32) -> i8 {
    i8::try_from(c).unwrap_or(-1)
}

/// A binding from its message.
pub fn binding_of(m: &AclBindingMessage) -> AclBinding {
    AclBinding::new(
        ResourcePattern::new(
            ResourceType::from_code(code(m.resource_type)),
            m.resource_name.clone(),
            PatternType::from_code(code(m.pattern_type)),
        ),
        AccessControlEntry::new(
            m.principal.clone(),
            m.host.clone(),
            Operation::from_code(code(m.operation)),
            Permission::from_code(code(m.permission)),
        ),
    )
}

/// A binding's message.
pub fn message_of(b: &AclBinding) -> AclBindingMessage {
    AclBindingMessage {
        resource_type: b.pattern.resource_type.code().into(),
        resource_name: b.pattern.name.clone(),
        pattern_type: b.pattern.pattern_type.code().into(),
        principal: b.entry.principal.clone(),
        host: b.entry.host.clone(),
        operation: b.entry.operation.code().into(),
        permission: b.entry.permission.code().into(),
    }
}

/// A filter from its message, checked.
pub fn filter_of(m: &AclFilterMessage) -> Result<AclBindingFilter, Refusal> {
    let f = AclBindingFilter {
        pattern: ResourcePatternFilter {
            resource_type: ResourceType::from_code(code(m.resource_type)),
            name: m.resource_name.clone(),
            pattern_type: PatternType::from_code(code(m.pattern_type)),
        },
        entry: AccessControlEntryFilter {
            principal: m.principal.clone(),
            host: m.host.clone(),
            operation: Operation::from_code(code(m.operation)),
            permission: Permission::from_code(code(m.permission)),
        },
    };
    f.validate()?;
    Ok(f)
}

/// The stored ACL keys: each key's revision and entries (keys that do not decode are left
/// out and logged; a write never touches them).
type Stored = BTreeMap<String, (u64, BTreeSet<AccessControlEntry>)>;

async fn read_all(client: &Client) -> Result<Stored, metastore::ClientError> {
    let resp = client
        .range_req(pb::RangeRequest {
            prefix: keys::ACLS.into(),
            ..Default::default()
        })
        .await?;
    let mut out = Stored::new();
    for kv in resp.kvs {
        match acl::decode_acls(&kv.value) {
            Ok(entries) if acl::parse_key(&kv.key).is_some() => {
                out.insert(kv.key, (kv.mod_revision, entries.into_iter().collect()));
            }
            Ok(_) => tracing::warn!(key = %kv.key, "not an ACL key; left alone"),
            Err(e) => tracing::warn!(key = %kv.key, error = %e, "stored ACLs do not decode; left alone"),
        }
    }
    Ok(out)
}

/// The ops that make each changed key hold `now`, guarded by the revisions read.
fn writes(stored: &Stored, now: &BTreeMap<String, BTreeSet<AccessControlEntry>>) -> (Vec<pb::Guard>, Vec<pb::Op>) {
    let (mut guards, mut ops) = (Vec::new(), Vec::new());
    for (key, entries) in now {
        let (rev, was) = stored.get(key).map_or((0, None), |(r, e)| (*r, Some(e)));
        if was == Some(entries) || (was.is_none() && entries.is_empty()) {
            continue;
        }
        guards.push(at_revision(key.clone(), rev));
        let op = if entries.is_empty() {
            pb::op::Op::Delete(pb::DeleteOp { key: key.clone() })
        } else {
            let list: Vec<AccessControlEntry> = entries.iter().cloned().collect();
            pb::op::Op::Put(pb::PutOp {
                key: key.clone(),
                value: acl::encode_acls(&list).into(),
                ..Default::default()
            })
        };
        ops.push(pb::Op { op: Some(op) });
    }
    (guards, ops)
}

/// CreateAcls' plan: each valid creation added to its pattern's key (an ACL already there is
/// a success that writes nothing); one result per creation.
pub fn plan_create(checked: &[Result<AclBinding, Refusal>], stored: &Stored) -> Plan<Vec<Result<(), Refusal>>> {
    let mut now: BTreeMap<String, BTreeSet<AccessControlEntry>> = BTreeMap::new();
    let mut results = Vec::with_capacity(checked.len());
    for c in checked {
        match c {
            Ok(b) => {
                let key = acl::key_of(&b.pattern);
                let entries = now
                    .entry(key.clone())
                    .or_insert_with(|| stored.get(&key).map(|(_, e)| e.clone()).unwrap_or_default());
                if entries.len() >= acl::MAX_ENTRIES && !entries.contains(&b.entry) {
                    results.push(Err(Refusal::new(
                        ErrorCode::INVALID_REQUEST,
                        format!(
                            "{} already holds {} ACLs, the most one pattern may",
                            b.pattern,
                            acl::MAX_ENTRIES
                        ),
                    )));
                    continue;
                }
                entries.insert(b.entry.clone());
                results.push(Ok(()));
            }
            Err(r) => results.push(Err(r.clone())),
        }
    }
    let (guards, ops) = writes(stored, &now);
    if ops.is_empty() {
        return Plan::answer(results);
    }
    Plan::write(guards, ops, results)
}

/// DeleteAcls' plan: every stored ACL a valid filter matches is removed; per filter, the ACLs
/// it matched (one ACL matched by two filters is listed by both).
pub fn plan_delete(
    filters: &[Result<AclBindingFilter, Refusal>],
    stored: &Stored,
) -> Plan<Vec<Result<Vec<AclBinding>, Refusal>>> {
    let all: Vec<AclBinding> = stored
        .iter()
        .filter_map(|(k, (_, e))| Some((acl::parse_key(k)?, e)))
        .flat_map(|(p, entries)| entries.iter().map(move |e| AclBinding::new(p.clone(), e.clone())))
        .collect();
    let mut now: BTreeMap<String, BTreeSet<AccessControlEntry>> = BTreeMap::new();
    let mut results = Vec::with_capacity(filters.len());
    for f in filters {
        let f = match f {
            Ok(f) => f,
            Err(r) => {
                results.push(Err(r.clone()));
                continue;
            }
        };
        let matched: Vec<AclBinding> = all.iter().filter(|b| f.matches(b)).cloned().collect();
        for b in &matched {
            let key = acl::key_of(&b.pattern);
            now.entry(key.clone())
                .or_insert_with(|| stored.get(&key).map(|(_, e)| e.clone()).unwrap_or_default())
                .remove(&b.entry);
        }
        results.push(Ok(matched));
    }
    let (guards, ops) = writes(stored, &now);
    if ops.is_empty() {
        return Plan::answer(results);
    }
    Plan::write(guards, ops, results)
}

fn result(r: Result<(), Refusal>) -> AclResult {
    match r {
        Ok(()) => AclResult::default(),
        Err(r) => AclResult {
            error_code: r.code.0,
            error_message: r.message,
        },
    }
}

/// CreateAcls.
pub async fn create(
    client: &Client,
    limits: &RequestLimits,
    req: CreateAclsRequest,
) -> Result<CreateAclsResponse, metastore::ClientError> {
    if let Err(r) = limits.items("creations", req.creations.len()) {
        let results = req.creations.iter().map(|_| result(Err(r.clone()))).collect();
        return Ok(CreateAclsResponse { results });
    }
    let checked: Vec<Result<AclBinding, Refusal>> = req
        .creations
        .iter()
        .map(|m| {
            let b = binding_of(m);
            b.validate()?;
            Ok(b)
        })
        .collect();
    let kept_changing = Refusal::new(ErrorCode::INVALID_UPDATE_VERSION, "the ACLs kept changing; retry");
    let outcome = Runner::new(client, "acls", kept_changing)
        .run(|| read_all(client), |stored| Ok(plan_create(&checked, &stored)))
        .await?;
    let results = match outcome {
        Ok(r) => r,
        Err(r) => vec![Err(r); checked.len()],
    };
    Ok(CreateAclsResponse {
        results: results.into_iter().map(result).collect(),
    })
}

/// DescribeAcls: the stored ACLs the filter matches, sorted.
pub async fn describe(
    client: &Client,
    req: DescribeAclsRequest,
) -> Result<DescribeAclsResponse, metastore::ClientError> {
    let filter = match filter_of(&req.filter.unwrap_or_default()) {
        Ok(f) => f,
        Err(r) => {
            return Ok(DescribeAclsResponse {
                error_code: r.code.0,
                error_message: r.message,
                acls: vec![],
            })
        }
    };
    let stored = read_all(client).await?;
    let mut acls: Vec<AclBinding> = stored
        .iter()
        .filter_map(|(k, (_, e))| Some((acl::parse_key(k)?, e)))
        .flat_map(|(p, entries)| entries.iter().map(move |e| AclBinding::new(p.clone(), e.clone())))
        .filter(|b| filter.matches(b))
        .collect();
    acls.sort();
    Ok(DescribeAclsResponse {
        acls: acls.iter().map(message_of).collect(),
        ..Default::default()
    })
}

/// DeleteAcls.
pub async fn delete(
    client: &Client,
    limits: &RequestLimits,
    req: DeleteAclsRequest,
) -> Result<DeleteAclsResponse, metastore::ClientError> {
    let refused = |r: Refusal| DeleteAclsFilterResult {
        error_code: r.code.0,
        error_message: r.message,
        deleted: vec![],
    };
    if let Err(r) = limits.items("filters", req.filters.len()) {
        let results = req.filters.iter().map(|_| refused(r.clone())).collect();
        return Ok(DeleteAclsResponse { results });
    }
    let filters: Vec<Result<AclBindingFilter, Refusal>> = req.filters.iter().map(filter_of).collect();
    let kept_changing = Refusal::new(ErrorCode::INVALID_UPDATE_VERSION, "the ACLs kept changing; retry");
    let outcome = Runner::new(client, "acls", kept_changing)
        .run(|| read_all(client), |stored| Ok(plan_delete(&filters, &stored)))
        .await?;
    let results = match outcome {
        Ok(r) => r,
        Err(r) => vec![Err(r); filters.len()],
    };
    Ok(DeleteAclsResponse {
        results: results
            .into_iter()
            .map(|r| match r {
                Ok(deleted) => DeleteAclsFilterResult {
                    deleted: deleted.iter().map(message_of).collect(),
                    ..Default::default()
                },
                Err(r) => refused(r),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_topic(principal: &str, topic: &str) -> AclBinding {
        AclBinding::new(
            ResourcePattern::literal(ResourceType::Topic, topic),
            AccessControlEntry::new(principal, "*", Operation::Read, Permission::Allow),
        )
    }

    fn stored_of(bindings: &[AclBinding]) -> Stored {
        let mut s = Stored::new();
        for b in bindings {
            s.entry(acl::key_of(&b.pattern))
                .or_insert((5, BTreeSet::new()))
                .1
                .insert(b.entry.clone());
        }
        s
    }

    #[test]
    fn creations_join_their_patterns_key_and_a_refused_one_writes_nothing() {
        let stored = stored_of(&[read_topic("User:alice", "t")]);
        let bad = Refusal::new(ErrorCode::INVALID_REQUEST, "principal: bad");
        let checked = vec![
            Ok(read_topic("User:bob", "t")),
            Err(bad.clone()),
            Ok(read_topic("User:alice", "t")),
        ];
        let plan = plan_create(&checked, &stored);
        assert_eq!(plan.answer, vec![Ok(()), Err(bad), Ok(())]);
        assert_eq!(plan.ops.len(), 1, "one key rewritten");
        assert_eq!(plan.guards, vec![at_revision("/kafka-acl/Topic/t".into(), 5)]);
        let Some(pb::op::Op::Put(put)) = &plan.ops[0].op else {
            panic!("a put")
        };
        assert_eq!(acl::decode_acls(&put.value).unwrap().len(), 2);
    }

    #[test]
    fn an_acl_already_stored_is_created_without_a_write() {
        let stored = stored_of(&[read_topic("User:alice", "t")]);
        let plan = plan_create(&[Ok(read_topic("User:alice", "t"))], &stored);
        assert_eq!(plan.answer, vec![Ok(())]);
        assert!(plan.ops.is_empty());
    }

    #[test]
    fn delete_lists_what_each_filter_matched_and_deletes_an_emptied_key() {
        let stored = stored_of(&[read_topic("User:alice", "t"), read_topic("User:bob", "u")]);
        let alice = AclBindingFilter {
            pattern: ResourcePatternFilter::ANY,
            entry: AccessControlEntryFilter {
                principal: Some("User:alice".into()),
                host: None,
                operation: Operation::Any,
                permission: Permission::Any,
            },
        };
        let plan = plan_delete(&[Ok(alice)], &stored);
        let deleted = plan.answer[0].as_ref().unwrap();
        assert_eq!(deleted, &vec![read_topic("User:alice", "t")]);
        assert_eq!(plan.ops.len(), 1);
        assert!(matches!(plan.ops[0].op, Some(pb::op::Op::Delete(_))));
    }

    #[test]
    fn messages_round_trip_and_a_bad_filter_is_refused_naming_the_field() {
        let b = read_topic("User:alice", "t");
        assert_eq!(binding_of(&message_of(&b)), b);
        let bad = AclFilterMessage {
            resource_type: 0,
            ..Default::default()
        };
        let r = filter_of(&bad).unwrap_err();
        assert_eq!(r.code, ErrorCode::INVALID_REQUEST);
    }
}
