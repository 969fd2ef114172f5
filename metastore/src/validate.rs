//! Checks on client requests, made before anything is proposed. Each error names the field.

use bytes::Bytes;
use proto::metastore as pb;

use crate::types::{Check, Guard, Op, Txn};

/// Size limits on requests.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Longest key, in bytes.
    pub max_key_bytes: usize,
    /// Largest value, in bytes.
    pub max_value_bytes: usize,
    /// Most operations in one transaction.
    pub max_txn_ops: usize,
    /// Most guards in one transaction.
    pub max_txn_guards: usize,
    /// Largest transaction, keys and values summed, in bytes.
    pub max_txn_bytes: usize,
    /// Longest request id.
    pub max_request_id_bytes: usize,
    /// Longest lease time to live, in milliseconds.
    pub max_lease_ttl_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_key_bytes: 4096,
            max_value_bytes: 16 << 20,
            // A cancel-all of 1,000,000 moving partitions writes two keys each, and the marker.
            max_txn_ops: 4_000_000,
            // As many as operations: a ZooKeeper import guards every key it creates.
            max_txn_guards: 4_000_000,
            max_txn_bytes: 512 << 20,
            max_request_id_bytes: 256,
            max_lease_ttl_ms: 24 * 3600 * 1000,
        }
    }
}

/// A request that breaks a rule; the message names the field.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
#[error("{field}: {reason}")]
pub struct InvalidRequest {
    /// The field, for example `ops[3].put.key`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> InvalidRequest {
    InvalidRequest {
        field: field.into(),
        reason: reason.into(),
    }
}

fn path_like(field: &str, s: &str, limits: &Limits, what: &str) -> Result<(), InvalidRequest> {
    if s.is_empty() {
        return Err(invalid(field, format!("the {what} is empty")));
    }
    if !s.starts_with('/') {
        return Err(invalid(field, format!("the {what} {s:?} does not start with '/'")));
    }
    if s.len() > limits.max_key_bytes {
        return Err(invalid(
            field,
            format!(
                "the {what} is {} bytes, over the limit of {}",
                s.len(),
                limits.max_key_bytes
            ),
        ));
    }
    if s.contains("//") {
        return Err(invalid(field, format!("the {what} {s:?} has an empty path segment")));
    }
    if s.chars().any(char::is_control) {
        return Err(invalid(field, format!("the {what} has a control character")));
    }
    Ok(())
}

/// A key: a `/`-path with no empty segment and no trailing `/` (except the root `/`).
pub fn key(field: &str, k: &str, limits: &Limits) -> Result<(), InvalidRequest> {
    path_like(field, k, limits, "key")?;
    if k.len() > 1 && k.ends_with('/') {
        return Err(invalid(field, format!("the key {k:?} ends with '/'")));
    }
    Ok(())
}

/// A prefix: like a key, but it may end with `/`.
pub fn prefix(field: &str, p: &str, limits: &Limits) -> Result<(), InvalidRequest> {
    path_like(field, p, limits, "prefix")
}

/// A value within the size limit.
pub fn value(field: &str, v: &[u8], limits: &Limits) -> Result<(), InvalidRequest> {
    if v.len() > limits.max_value_bytes {
        return Err(invalid(
            field,
            format!(
                "the value is {} bytes, over the limit of {}",
                v.len(),
                limits.max_value_bytes
            ),
        ));
    }
    Ok(())
}

/// A request id: empty (none) or short.
pub fn request_id(id: &str, limits: &Limits) -> Result<Option<String>, InvalidRequest> {
    if id.len() > limits.max_request_id_bytes {
        return Err(invalid(
            "request_id",
            format!("{} bytes, over the limit of {}", id.len(), limits.max_request_id_bytes),
        ));
    }
    Ok((!id.is_empty()).then(|| id.to_string()))
}

/// A lease time to live.
pub fn lease_ttl(ttl_ms: u64, limits: &Limits) -> Result<(), InvalidRequest> {
    if ttl_ms == 0 {
        return Err(invalid("ttl_ms", "must be greater than 0"));
    }
    if ttl_ms > limits.max_lease_ttl_ms {
        return Err(invalid(
            "ttl_ms",
            format!("{ttl_ms} is over the limit of {}", limits.max_lease_ttl_ms),
        ));
    }
    Ok(())
}

/// A put as a one-op transaction.
pub fn put(key_: &str, value_: &Bytes, lease: u64, limits: &Limits) -> Result<Txn, InvalidRequest> {
    key("key", key_, limits)?;
    value("value", value_, limits)?;
    Ok(Txn {
        guards: vec![],
        ops: vec![Op::Put {
            key: key_.to_string(),
            value: value_.clone(),
            lease,
        }],
    })
}

/// Converts and checks a transaction request.
pub fn txn(req: pb::TxnRequest, limits: &Limits) -> Result<Txn, InvalidRequest> {
    if req.ops.len() > limits.max_txn_ops {
        return Err(invalid(
            "ops",
            format!("{} operations, over the limit of {}", req.ops.len(), limits.max_txn_ops),
        ));
    }
    if req.guards.len() > limits.max_txn_guards {
        return Err(invalid(
            "guards",
            format!(
                "{} guards, over the limit of {}",
                req.guards.len(),
                limits.max_txn_guards
            ),
        ));
    }
    let mut total = 0usize;
    let mut guards = Vec::with_capacity(req.guards.len());
    for (i, g) in req.guards.into_iter().enumerate() {
        let (g, bytes) = guard(i, g, limits)?;
        total += bytes;
        guards.push(g);
    }
    let mut ops = Vec::with_capacity(req.ops.len());
    for (i, o) in req.ops.into_iter().enumerate() {
        let (o, bytes) = op(i, o, limits)?;
        total += bytes;
        ops.push(o);
    }
    if total > limits.max_txn_bytes {
        return Err(invalid(
            "ops",
            format!(
                "the transaction is {total} bytes, over the limit of {}",
                limits.max_txn_bytes
            ),
        ));
    }
    Ok(Txn { guards, ops })
}

/// Names the field of an error. Field names are made only for an error: a large request has
/// hundreds of thousands of items.
fn named(field: String) -> impl FnOnce(InvalidRequest) -> InvalidRequest {
    move |mut e: InvalidRequest| {
        e.field = field;
        e
    }
}

/// Checks guard `i` of a transaction; returns it with the bytes it counts.
fn guard(i: usize, g: pb::Guard, limits: &Limits) -> Result<(Guard, usize), InvalidRequest> {
    use pb::guard::Check as C;
    if !matches!(g.check, Some(C::RaftTerm(_))) {
        key("", &g.key, limits).map_err(|e| named(format!("guards[{i}].key"))(e))?;
    }
    let mut bytes = g.key.len();
    let check = match g.check {
        None => {
            return Err(invalid(
                format!("guards[{i}]"),
                "no check given (exists, absent, version, mod_revision or value)",
            ))
        }
        Some(C::Exists(true)) => Check::Exists,
        Some(C::Absent(true)) => Check::Absent,
        Some(C::Exists(false)) | Some(C::Absent(false)) => {
            return Err(invalid(format!("guards[{i}]"), "exists/absent must be true when given"))
        }
        Some(C::Version(v)) => Check::Version(v),
        Some(C::ModRevision(r)) => Check::ModRevision(r),
        Some(C::RaftTerm(t)) => Check::RaftTerm(t),
        Some(C::Value(v)) => {
            value("", &v, limits).map_err(|e| named(format!("guards[{i}].value"))(e))?;
            bytes += v.len();
            Check::Value(v)
        }
    };
    Ok((Guard { key: g.key, check }, bytes))
}

/// Checks operation `i` of a transaction; returns it with the bytes it counts.
fn op(i: usize, op: pb::Op, limits: &Limits) -> Result<(Op, usize), InvalidRequest> {
    use pb::op::Op as O;
    Ok(match op.op {
        None => {
            return Err(invalid(
                format!("ops[{i}]"),
                "no operation given (put, delete or delete_prefix)",
            ))
        }
        Some(O::Put(p)) => {
            key("", &p.key, limits).map_err(|e| named(format!("ops[{i}].put.key"))(e))?;
            value("", &p.value, limits).map_err(|e| named(format!("ops[{i}].put.value"))(e))?;
            let bytes = p.key.len() + p.value.len();
            (
                Op::Put {
                    key: p.key,
                    value: p.value,
                    lease: p.lease,
                },
                bytes,
            )
        }
        Some(O::Delete(d)) => {
            key("", &d.key, limits).map_err(|e| named(format!("ops[{i}].delete.key"))(e))?;
            let bytes = d.key.len();
            (Op::Delete { key: d.key }, bytes)
        }
        Some(O::DeletePrefix(d)) => {
            prefix("", &d.prefix, limits).map_err(|e| named(format!("ops[{i}].delete_prefix.prefix"))(e))?;
            let bytes = d.prefix.len();
            (Op::DeletePrefix { prefix: d.prefix }, bytes)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_must_be_paths() {
        let l = Limits::default();
        assert!(key("key", "/a/b", &l).is_ok());
        for bad in ["", "a", "/a//b", "/a/", "/a\n"] {
            let e = key("key", bad, &l).unwrap_err();
            assert_eq!(e.field, "key", "{bad:?}");
        }
        assert!(prefix("prefix", "/a/", &l).is_ok());
    }

    #[test]
    fn malformed_guard_is_named() {
        let l = Limits::default();
        let req = pb::TxnRequest {
            guards: vec![pb::Guard {
                key: "/a".into(),
                check: None,
            }],
            ops: vec![],
            request_id: String::new(),
        };
        assert_eq!(txn(req, &l).unwrap_err().field, "guards[0]");
        let bad_key = pb::TxnRequest {
            ops: vec![pb::Op {
                op: Some(pb::op::Op::Delete(pb::DeleteOp { key: "a".into() })),
            }],
            ..Default::default()
        };
        assert_eq!(txn(bad_key, &l).unwrap_err().field, "ops[0].delete.key");
    }

    #[test]
    fn oversized_value_is_refused() {
        let l = Limits {
            max_value_bytes: 4,
            ..Limits::default()
        };
        let e = put("/a", &Bytes::from_static(b"12345"), 0, &l).unwrap_err();
        assert_eq!(e.field, "value");
    }
}
