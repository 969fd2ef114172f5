//! ACLs as ZooKeeper-era Kafka stores them, which Ferry's metastore keeps too so that a
//! migration is a copy: one key per resource pattern, its entries as one JSON value.
//! Literal patterns live at `/kafka-acl/<Type>/<name>`, prefixed ones at
//! `/kafka-acl-extended/prefixed/<Type>/<name>`; the value reads
//! `{"version":1,"acls":[{"principal":..,"permissionType":..,"operation":..,"host":..}]}`.

use serde_json::{Map, Value};

use super::model::{
    check_principal, AccessControlEntry, AclBinding, Operation, PatternType, Permission, ResourcePattern, ResourceType,
};
use super::{shown, AclError};

/// Root of literal ACL keys.
pub const LITERAL_ROOT: &str = "/kafka-acl/";
/// Root of prefixed ACL keys.
pub const PREFIXED_ROOT: &str = "/kafka-acl-extended/prefixed/";
/// Root of the keys of other pattern types, which no valid ACL has.
const EXTENDED_ROOT: &str = "/kafka-acl-extended/";
/// The most entries one key may hold; a larger value is refused rather than loaded.
pub const MAX_ENTRIES: usize = 100_000;
/// The one version of the value's format.
const VERSION: u64 = 1;

/// The key of a pattern's ACLs. A pattern neither literal nor prefixed (never stored) gets a
/// key under `/kafka-acl-extended/<type>/` that `parse_key` refuses.
pub fn key_of(p: &ResourcePattern) -> String {
    let ty = p.resource_type.name();
    match p.pattern_type {
        PatternType::Literal => format!("{LITERAL_ROOT}{ty}/{}", p.name),
        PatternType::Prefixed => format!("{PREFIXED_ROOT}{ty}/{}", p.name),
        other => format!("{EXTENDED_ROOT}{}/{ty}/{}", other.name().to_ascii_lowercase(), p.name),
    }
}

/// The pattern a key stores, or `None` for any other key. The name is everything after the
/// type, `/` included (a group's name may hold one).
pub fn parse_key(key: &str) -> Option<ResourcePattern> {
    let (pattern_type, rest) = if let Some(rest) = key.strip_prefix(LITERAL_ROOT) {
        (PatternType::Literal, rest)
    } else {
        (PatternType::Prefixed, key.strip_prefix(PREFIXED_ROOT)?)
    };
    let (ty, name) = rest.split_once('/')?;
    // Only the stored spelling: two keys must never name one pattern.
    let resource_type = ResourceType::VALUES
        .iter()
        .copied()
        .find(|t| t.is_concrete() && t.name() == ty)?;
    if name.is_empty() {
        return None;
    }
    Some(ResourcePattern::new(resource_type, name, pattern_type))
}

/// The stored value of a pattern's entries, in the order given.
pub fn encode_acls(entries: &[AccessControlEntry]) -> Vec<u8> {
    // Written by hand so the bytes do not depend on serde_json's map order features.
    let quoted = |s: &str| Value::String(s.to_string()).to_string();
    let items: Vec<String> = entries
        .iter()
        .map(|e| {
            format!(
                "{{\"principal\":{},\"permissionType\":{},\"operation\":{},\"host\":{}}}",
                quoted(&e.principal),
                quoted(e.permission.name()),
                quoted(e.operation.name()),
                quoted(&e.host)
            )
        })
        .collect();
    format!("{{\"version\":{VERSION},\"acls\":[{}]}}", items.join(",")).into_bytes()
}

/// The entries of a stored value. Strict: every entry needs a `Type:name` principal, ALLOW or
/// DENY, a concrete operation and a host, and errors name the field (`acls[3].operation`).
/// Names read as Kafka reads them (`Read` or `READ`); unknown fields are ignored, as Kafka
/// does. An empty value holds no entries, as Kafka reads a node without data.
pub fn decode_acls(value: &[u8]) -> Result<Vec<AccessControlEntry>, AclError> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let json: Value = serde_json::from_slice(value).map_err(|e| AclError::Json(e.to_string()))?;
    let Value::Object(top) = json else {
        return Err(AclError::invalid("value", format!("{}, not an object", kind(&json))));
    };
    match top.get("version") {
        Some(Value::Number(n)) if n.as_u64() == Some(VERSION) => {}
        Some(Value::Number(n)) => return Err(AclError::invalid("version", format!("{n}, not {VERSION}"))),
        Some(v) => return Err(AclError::invalid("version", format!("{}, not a number", kind(v)))),
        None => return Err(AclError::invalid("version", "missing")),
    }
    let acls = match top.get("acls") {
        Some(Value::Array(a)) => a,
        Some(v) => return Err(AclError::invalid("acls", format!("{}, not an array", kind(v)))),
        None => return Err(AclError::invalid("acls", "missing")),
    };
    if acls.len() > MAX_ENTRIES {
        return Err(AclError::invalid(
            "acls",
            format!("{} entries, more than {MAX_ENTRIES}", acls.len()),
        ));
    }
    acls.iter().enumerate().map(|(i, item)| decode_entry(i, item)).collect()
}

/// One entry of `acls`, at index `i`.
fn decode_entry(i: usize, item: &Value) -> Result<AccessControlEntry, AclError> {
    let field = |name: &str| format!("acls[{i}].{name}");
    let Value::Object(obj) = item else {
        return Err(AclError::invalid(
            format!("acls[{i}]"),
            format!("{}, not an object", kind(item)),
        ));
    };
    let text = |name: &str| string_field(obj, name).map_err(|why| AclError::invalid(field(name), why));
    let principal = text("principal")?;
    check_principal(principal).map_err(|why| AclError::invalid(field("principal"), why))?;
    let permission = text("permissionType")?;
    let permission = match Permission::from_name(permission) {
        Some(p @ (Permission::Allow | Permission::Deny)) => p,
        _ => {
            return Err(AclError::invalid(
                field("permissionType"),
                format!("{} is not Allow or Deny", shown(permission)),
            ))
        }
    };
    let operation = text("operation")?;
    let operation = match Operation::from_name(operation) {
        Some(op) if op.is_concrete() => op,
        _ => {
            return Err(AclError::invalid(
                field("operation"),
                format!("{} is not an operation", shown(operation)),
            ))
        }
    };
    let host = text("host")?;
    Ok(AccessControlEntry::new(principal, host, operation, permission))
}

/// The string field `name` of `obj`.
fn string_field<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<&'a str, String> {
    match obj.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(format!("{}, not a string", kind(v))),
        None => Err("missing".to_string()),
    }
}

/// What kind of JSON value `v` is, for messages that must not echo a large value.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The bindings of stored `(key, value)` pairs, as a range read over [`LITERAL_ROOT`] and
/// [`PREFIXED_ROOT`] returns them, and the pairs refused with why (a key that is not an ACL
/// key, a value that does not decode). One bad key does not hide the others' ACLs.
pub fn bindings_from_kvs<K, V>(kvs: impl IntoIterator<Item = (K, V)>) -> (Vec<AclBinding>, Vec<(String, AclError)>)
where
    K: AsRef<str>,
    V: AsRef<[u8]>,
{
    let mut bindings = Vec::new();
    let mut errors = Vec::new();
    for (key, value) in kvs {
        let key = key.as_ref();
        let Some(pattern) = parse_key(key) else {
            errors.push((key.to_string(), AclError::Key(shown(key))));
            continue;
        };
        match decode_acls(value.as_ref()) {
            Ok(entries) => bindings.extend(entries.into_iter().map(|e| AclBinding::new(pattern.clone(), e))),
            Err(e) => errors.push((key.to_string(), e)),
        }
    }
    (bindings, errors)
}
