//! DescribeClientQuotas and AlterClientQuotas: Kafka's client quotas, one `ClientQuotaRecord` per
//! entity under `/config/clients/` and `/config/users/` (`proto::client_quota`). Brokers follow
//! those keys and enforce the byte rates. Each alteration is checked first and answered on its own,
//! as Kafka's controller does; the valid ones are written together in one guarded transaction.

use std::collections::{BTreeMap, HashMap};

use metastore::Client;
use prost::Message;
use proto::client_quota::{self as cq, Entity};
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::*;
use proto::metastore as pb;

use crate::limits::RequestLimits;
use crate::store::{at_revision, put_op};
use crate::write_runner::{Plan, Runner};

/// Kafka's match types of a DescribeClientQuotas filter component.
const MATCH_EXACT: i32 = 0;
const MATCH_DEFAULT: i32 = 1;
const MATCH_SPECIFIED: i32 = 2;

/// A checked DescribeClientQuotas filter: entity type to the name it must have (`None`: the
/// default entity), the types that must be present with any name, and whether no other type
/// may be.
#[derive(Debug, Default, PartialEq)]
pub struct Filter {
    exact: BTreeMap<String, Option<String>>,
    present: Vec<String>,
    strict: bool,
}

/// Checks a filter as Kafka's broker does.
pub fn filter_of(req: &DescribeClientQuotasRequest) -> Result<Filter, Refusal> {
    let invalid = |m: String| Refusal::new(ErrorCode::INVALID_REQUEST, m);
    let mut f = Filter {
        strict: req.strict,
        ..Default::default()
    };
    for c in &req.components {
        let t = c.entity_type.as_str();
        if t.is_empty() {
            return Err(invalid("Invalid empty entity type.".into()));
        }
        if f.exact.contains_key(t) || f.present.iter().any(|p| p == t) {
            return Err(invalid(format!(
                "Entity type {t} cannot appear more than once in the filter."
            )));
        }
        if ![cq::IP, cq::USER, cq::CLIENT_ID].contains(&t) {
            return Err(Refusal::new(
                ErrorCode::UNSUPPORTED_VERSION,
                format!("Unsupported entity type {t}"),
            ));
        }
        match (c.match_type, &c.name) {
            (MATCH_EXACT, None) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                ))
            }
            (MATCH_EXACT, Some(n)) => {
                f.exact.insert(t.to_string(), Some(n.clone()));
            }
            (MATCH_DEFAULT | MATCH_SPECIFIED, Some(_)) => {
                return Err(invalid(format!(
                    "Request specified match type {}, but also specified a match string.",
                    c.match_type
                )))
            }
            (MATCH_DEFAULT, None) => {
                f.exact.insert(t.to_string(), None);
            }
            (MATCH_SPECIFIED, None) => f.present.push(t.to_string()),
            (m, _) => {
                return Err(Refusal::new(
                    ErrorCode::UNSUPPORTED_VERSION,
                    format!("Unknown match type {m}"),
                ))
            }
        }
    }
    let has = |t: &str| f.exact.contains_key(t) || f.present.iter().any(|p| p == t);
    if has(cq::IP) && (has(cq::USER) || has(cq::CLIENT_ID)) {
        return Err(invalid(
            "Invalid entity filter component combination. IP filter component should not be used \
             with user or clientId filter component."
                .into(),
        ));
    }
    Ok(f)
}

/// Whether `entity` passes `f`, as Kafka's `ClientQuotasImage.matches`.
pub fn matches(entity: &Entity, f: &Filter) -> bool {
    let parts = entity.parts();
    let get = |t: &str| parts.iter().find(|(k, _)| *k == t).map(|(_, n)| *n);
    if f.strict && parts.len() != f.exact.len() + f.present.len() {
        return false;
    }
    f.exact
        .iter()
        .all(|(t, want)| get(t).is_some_and(|n| n == want.as_deref()))
        && f.present.iter().all(|t| get(t).is_some())
}

/// The entity's parts as the answer lists them.
fn parts_of(e: &Entity) -> Vec<QuotaEntityPart> {
    e.parts()
        .into_iter()
        .map(|(t, n)| QuotaEntityPart {
            entity_type: t.to_string(),
            name: n.map(str::to_string),
        })
        .collect()
}

/// DescribeClientQuotas: every stored entity the filter matches, with its quotas.
pub async fn describe(
    client: &Client,
    limits: &RequestLimits,
    req: DescribeClientQuotasRequest,
) -> Result<DescribeClientQuotasResponse, metastore::ClientError> {
    let refused = |r: Refusal| DescribeClientQuotasResponse {
        error_code: r.code.0,
        error_message: r.message,
        entries: vec![],
    };
    let filter = match limits
        .items("components", req.components.len())
        .and_then(|()| filter_of(&req))
    {
        Ok(f) => f,
        Err(r) => return Ok(refused(r)),
    };
    let (clients, users) = tokio::try_join!(client.range(cq_prefix(false), 0), client.range(cq_prefix(true), 0))?;
    let mut entries = Vec::new();
    for kv in clients.kvs.iter().chain(&users.kvs) {
        let Some(entity) = cq::parse_key(&kv.key) else {
            continue;
        };
        if !matches(&entity, &filter) {
            continue;
        }
        let rec = match ClientQuotaRecord::decode(kv.value.as_ref()) {
            Ok(r) => r,
            Err(e) => return Ok(refused(damaged(&kv.key, &e))),
        };
        entries.push(ClientQuotaEntry {
            entity: parts_of(&entity),
            quotas: rec.quotas,
        });
    }
    Ok(DescribeClientQuotasResponse {
        entries,
        ..Default::default()
    })
}

fn cq_prefix(users: bool) -> &'static str {
    if users {
        proto::keys::USER_QUOTAS
    } else {
        proto::keys::CLIENT_QUOTAS
    }
}

fn damaged(key: &str, e: &prost::DecodeError) -> Refusal {
    Refusal::new(
        ErrorCode::KAFKA_STORAGE_ERROR,
        format!("{key} holds a quota record that cannot be read ({e}); nothing was changed"),
    )
}

/// One alteration, checked: its entity and its changes (a key to its new value, or `None` to
/// remove it).
pub type Checked = Result<(Entity, Vec<(String, Option<f64>)>), Refusal>;

/// Checks one alteration before anything is read or written: the entity and each op, the
/// refusal naming the key and why.
pub fn check(a: &ClientQuotaAlteration, limits: &RequestLimits) -> Checked {
    let invalid = |m: String| Refusal::new(ErrorCode::INVALID_REQUEST, m);
    limits.items("ops", a.ops.len())?;
    let parts: Vec<(&str, Option<&str>)> = a
        .entity
        .iter()
        .map(|p| (p.entity_type.as_str(), p.name.as_deref()))
        .collect();
    let entity = cq::entity_of(&parts).map_err(invalid)?;
    let mut ops: Vec<(String, Option<f64>)> = Vec::with_capacity(a.ops.len());
    for op in &a.ops {
        if ops.iter().any(|(k, _)| *k == op.key) {
            return Err(invalid(format!("Duplicate quota key {} in one alteration", op.key)));
        }
        if !op.remove {
            cq::check_value(&op.key, op.value).map_err(invalid)?;
        }
        ops.push((op.key.clone(), (!op.remove).then_some(op.value)));
    }
    Ok((entity, ops))
}

/// An entity's stored quotas: the revision read (0: absent) and the record, or the refusal of a
/// record that cannot be read.
type Stored = HashMap<String, (u64, Result<HashMap<String, f64>, Refusal>)>;

/// AlterClientQuotas' plan over the stored quotas: each checked alteration applied in order
/// (a later one sees an earlier one's changes), one result each, and the changed entities
/// written guarded by the revisions read; an entity left with no quota is deleted.
pub fn plan_alter(checked: &[Checked], stored: &Stored, validate_only: bool) -> Plan<Vec<Result<(), Refusal>>> {
    let mut now: HashMap<String, HashMap<String, f64>> = HashMap::new();
    let mut results = Vec::with_capacity(checked.len());
    for c in checked {
        let (entity, ops) = match c {
            Ok(c) => c,
            Err(r) => {
                results.push(Err(r.clone()));
                continue;
            }
        };
        let key = entity.key();
        if !now.contains_key(&key) {
            match stored.get(&key) {
                Some((_, Err(r))) => {
                    results.push(Err(r.clone()));
                    continue;
                }
                Some((_, Ok(q))) => now.insert(key.clone(), q.clone()),
                None => now.insert(key.clone(), HashMap::new()),
            };
        }
        let quotas = now.entry(key).or_default();
        for (k, v) in ops {
            match v {
                Some(v) => quotas.insert(k.clone(), *v),
                None => quotas.remove(k),
            };
        }
        results.push(Ok(()));
    }
    if validate_only {
        return Plan::answer(results);
    }
    let mut changed: Vec<(&String, &HashMap<String, f64>)> = now
        .iter()
        .filter(|(k, q)| match stored.get(*k) {
            Some((_, Ok(was))) => was != *q,
            _ => !q.is_empty(),
        })
        .collect();
    changed.sort_by(|a, b| a.0.cmp(b.0));
    let mut guards = Vec::new();
    let mut ops = Vec::new();
    for (key, quotas) in changed {
        let rev = stored.get(key).map_or(0, |(rev, _)| *rev);
        guards.push(at_revision(key.clone(), rev));
        ops.push(if quotas.is_empty() {
            pb::Op {
                op: Some(pb::op::Op::Delete(pb::DeleteOp { key: key.clone() })),
            }
        } else {
            put_op(key.clone(), &ClientQuotaRecord { quotas: quotas.clone() })
        });
    }
    Plan::write(guards, ops, results)
}

/// Reads the stored quotas of the entities the valid alterations name.
async fn read(client: &Client, checked: &[Checked]) -> Result<Stored, metastore::ClientError> {
    let mut keys: Vec<String> = checked.iter().flatten().map(|(e, _)| e.key()).collect();
    keys.sort();
    keys.dedup();
    let got = futures::future::try_join_all(keys.iter().map(|k| client.get(k))).await?;
    Ok(keys
        .into_iter()
        .zip(got)
        .filter_map(|(k, kv)| {
            let kv = kv?;
            let rec = ClientQuotaRecord::decode(kv.value.as_ref())
                .map(|r| r.quotas)
                .map_err(|e| damaged(&k, &e));
            Some((k, (kv.mod_revision, rec)))
        })
        .collect())
}

/// AlterClientQuotas: each alteration checked, then the valid ones written in one guarded
/// transaction (planned again when a guard fails); one result per alteration, in order.
pub async fn alter(
    client: &Client,
    limits: &RequestLimits,
    req: AlterClientQuotasRequest,
) -> Result<AlterClientQuotasResponse, metastore::ClientError> {
    if let Err(r) = limits.items("entries", req.entries.len()) {
        return Ok(AlterClientQuotasResponse {
            results: vec![],
            error_code: r.code.0,
            error_message: r.message,
        });
    }
    let checked: Vec<Checked> = req.entries.iter().map(|a| check(a, limits)).collect();
    let kept_changing = Refusal::new(
        ErrorCode::INVALID_UPDATE_VERSION,
        "the client quotas kept changing; retry",
    );
    let outcome = Runner::new(client, "client quotas", kept_changing)
        .run(
            || read(client, &checked),
            |stored| Ok(plan_alter(&checked, &stored, req.validate_only)),
        )
        .await?;
    let results = match outcome {
        Ok(results) => results,
        Err(r) => vec![Err(r); checked.len()],
    };
    Ok(AlterClientQuotasResponse {
        results: results
            .into_iter()
            .map(|r| match r {
                Ok(()) => QuotaResult::default(),
                Err(Refusal { code, message }) => QuotaResult {
                    error_code: code.0,
                    error_message: message,
                },
            })
            .collect(),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::client_quota::Part;

    fn part(t: &str, n: Option<&str>) -> QuotaEntityPart {
        QuotaEntityPart {
            entity_type: t.into(),
            name: n.map(Into::into),
        }
    }

    fn set(key: &str, value: f64) -> QuotaOp {
        QuotaOp {
            key: key.into(),
            value,
            remove: false,
        }
    }

    fn alteration(entity: Vec<QuotaEntityPart>, ops: Vec<QuotaOp>) -> ClientQuotaAlteration {
        ClientQuotaAlteration { entity, ops }
    }

    fn component(t: &str, m: i32, n: Option<&str>) -> QuotaFilterComponent {
        QuotaFilterComponent {
            entity_type: t.into(),
            match_type: m,
            name: n.map(Into::into),
        }
    }

    #[test]
    fn a_bad_alteration_is_refused_alone_and_the_others_are_written() {
        let limits = RequestLimits::default();
        let c1 = vec![part(cq::CLIENT_ID, Some("c1"))];
        let checked: Vec<Checked> = [
            alteration(c1.clone(), vec![set(cq::PRODUCER_BYTE_RATE, 1024.0)]),
            alteration(c1.clone(), vec![set(cq::CONSUMER_BYTE_RATE, 0.5)]),
            alteration(vec![part(cq::USER, None)], vec![set(cq::CONSUMER_BYTE_RATE, 2048.0)]),
        ]
        .iter()
        .map(|a| check(a, &limits))
        .collect();
        let err = checked[1].as_ref().unwrap_err();
        assert_eq!(err.code, ErrorCode::INVALID_REQUEST);
        assert!(err.message.contains("consumer_byte_rate"), "{}", err.message);
        let plan = plan_alter(&checked, &Stored::new(), false);
        assert!(plan.answer[0].is_ok() && plan.answer[1].is_err() && plan.answer[2].is_ok());
        let keys: Vec<&str> = plan.guards.iter().map(|g| g.key.as_str()).collect();
        assert_eq!(keys, ["/config/clients/c1", "/config/users/<default>"]);
        let Some(pb::op::Op::Put(put)) = &plan.ops[0].op else {
            panic!("a put")
        };
        let rec = ClientQuotaRecord::decode(put.value.as_ref()).unwrap();
        assert_eq!(
            rec.quotas,
            HashMap::from([(cq::PRODUCER_BYTE_RATE.to_string(), 1024.0)])
        );
        // Validate-only checks the same and writes nothing.
        let dry = plan_alter(&checked, &Stored::new(), true);
        assert!(dry.ops.is_empty() && dry.answer[1].is_err() && dry.answer[0].is_ok());
    }

    #[test]
    fn removing_the_last_quota_deletes_the_entity_guarded_by_its_revision() {
        let key = "/config/clients/c1".to_string();
        let stored: Stored = HashMap::from([(
            key.clone(),
            (9, Ok(HashMap::from([(cq::PRODUCER_BYTE_RATE.to_string(), 10.0)]))),
        )]);
        let remove = QuotaOp {
            key: cq::PRODUCER_BYTE_RATE.into(),
            value: 0.0,
            remove: true,
        };
        let checked = vec![check(
            &alteration(vec![part(cq::CLIENT_ID, Some("c1"))], vec![remove]),
            &RequestLimits::default(),
        )];
        let plan = plan_alter(&checked, &stored, false);
        assert_eq!(plan.guards, vec![at_revision(key.clone(), 9)]);
        assert_eq!(plan.ops[0].op, Some(pb::op::Op::Delete(pb::DeleteOp { key })));
        // A damaged record refuses its alteration by its key.
        let damaged_store: Stored = HashMap::from([(
            "/config/clients/c1".to_string(),
            (
                9,
                Err(Refusal::new(ErrorCode::KAFKA_STORAGE_ERROR, "/config/clients/c1 holds")),
            ),
        )]);
        let plan = plan_alter(&checked, &damaged_store, false);
        assert!(plan.ops.is_empty());
        assert_eq!(
            plan.answer[0].as_ref().unwrap_err().code,
            ErrorCode::KAFKA_STORAGE_ERROR
        );
    }

    #[test]
    fn unsupported_keys_and_bad_entities_are_refused_by_name() {
        let limits = RequestLimits::default();
        let r = check(
            &alteration(
                vec![part(cq::CLIENT_ID, Some("c"))],
                vec![set(cq::REQUEST_PERCENTAGE, 50.0)],
            ),
            &limits,
        )
        .unwrap_err();
        assert!(
            r.message.contains("request_percentage is not supported"),
            "{}",
            r.message
        );
        let r = check(
            &alteration(
                vec![part(cq::CLIENT_ID, Some("c"))],
                vec![set(cq::PRODUCER_BYTE_RATE, 1.0), set(cq::PRODUCER_BYTE_RATE, 2.0)],
            ),
            &limits,
        )
        .unwrap_err();
        assert!(
            r.message.contains("Duplicate quota key producer_byte_rate"),
            "{}",
            r.message
        );
        let r = check(&alteration(vec![], vec![]), &limits).unwrap_err();
        assert!(r.message.contains("empty client quota entity"), "{}", r.message);
    }

    #[test]
    fn filters_match_as_kafkas_image_does() {
        let c1 = Entity {
            user: None,
            client_id: Some(Part::Named("c1".into())),
        };
        let default_client = Entity {
            user: None,
            client_id: Some(Part::Default),
        };
        let user_c1 = Entity {
            user: Some(Part::Named("u".into())),
            client_id: Some(Part::Named("c1".into())),
        };
        let f = |components: Vec<QuotaFilterComponent>, strict: bool| {
            filter_of(&DescribeClientQuotasRequest { components, strict }).unwrap()
        };
        let exact = f(vec![component(cq::CLIENT_ID, MATCH_EXACT, Some("c1"))], true);
        assert!(matches(&c1, &exact) && !matches(&user_c1, &exact) && !matches(&default_client, &exact));
        let loose = f(vec![component(cq::CLIENT_ID, MATCH_EXACT, Some("c1"))], false);
        assert!(matches(&user_c1, &loose));
        let default = f(vec![component(cq::CLIENT_ID, MATCH_DEFAULT, None)], true);
        assert!(matches(&default_client, &default) && !matches(&c1, &default));
        let any = f(vec![component(cq::CLIENT_ID, MATCH_SPECIFIED, None)], true);
        assert!(matches(&default_client, &any) && matches(&c1, &any) && !matches(&user_c1, &any));
        assert!(matches(&user_c1, &f(vec![], false)));

        let bad = |components: Vec<QuotaFilterComponent>| {
            filter_of(&DescribeClientQuotasRequest {
                components,
                strict: false,
            })
            .unwrap_err()
        };
        assert_eq!(
            bad(vec![component(cq::CLIENT_ID, MATCH_EXACT, None)]).code,
            ErrorCode::INVALID_REQUEST
        );
        assert_eq!(
            bad(vec![component("group", MATCH_SPECIFIED, None)]).code,
            ErrorCode::UNSUPPORTED_VERSION
        );
        let dup = bad(vec![
            component(cq::USER, MATCH_SPECIFIED, None),
            component(cq::USER, MATCH_DEFAULT, None),
        ]);
        assert!(dup.message.contains("more than once"), "{}", dup.message);
    }
}
