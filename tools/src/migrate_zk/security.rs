//! ACLs and SCRAM credentials as ZooKeeper-era Kafka keeps them, typed for the import. ACLs
//! live at `/kafka-acl/<Type>/<name>` and `/kafka-acl-extended/prefixed/<Type>/<name>`, the same
//! paths and JSON that Ferry's metastore keeps; SCRAM credentials are entries of
//! `/config/users/<sanitized user>`. Each malformed znode is a problem of its own and the
//! others are still read. Nothing here echoes a salt or a key, not even in an error.

use std::collections::{BTreeMap, BTreeSet};

use broker::sasl::{SaslError, ScramCredential as KafkaCredential};
use proto::acl::{self, AccessControlEntry, AclBinding, AclError};
use proto::ferry::{ScramCredential, ScramUserRecord};
use serde::Deserialize;

use super::parse::{children, invalid, Invalid, RawSnapshot, ZkCluster};

/// Parent of the resource types of literal ACLs.
pub const LITERAL_ACLS: &str = "/kafka-acl";
/// Parent of the resource types of prefixed ACLs.
pub const PREFIXED_ACLS: &str = "/kafka-acl-extended/prefixed";
/// Parent of users' configs: SCRAM credentials and quotas.
pub const USERS: &str = "/config/users";
/// Kafka's name of the default user entity, which holds quotas only.
const DEFAULT_ENTITY: &str = "<default>";
/// The fields of Kafka's credential text, the only names an error may show.
const CREDENTIAL_FIELDS: [&str; 4] = ["salt", "stored_key", "server_key", "iterations"];

/// The SCRAM mechanisms: Kafka's config name, its ScramMechanism code and its key length.
pub const MECHANISMS: [(&str, i32, usize); 2] = [("SCRAM-SHA-256", 1, 32), ("SCRAM-SHA-512", 2, 64)];

/// Kafka's name of a ScramMechanism code, or `mechanism <code>` for one Kafka does not have.
pub fn mechanism_name(code: i32) -> String {
    MECHANISMS
        .iter()
        .find(|(_, c, _)| *c == code)
        .map_or_else(|| format!("mechanism {code}"), |(n, _, _)| n.to_string())
}

/// Types the ACL and user znodes of the snapshot into `c.security`; malformed ones go to
/// `c.problems`, and what is read but not imported to `c.notes`.
pub fn parse_into(raw: &RawSnapshot, c: &mut ZkCluster) {
    for root in [LITERAL_ACLS, PREFIXED_ACLS] {
        let prefix = format!("{root}/");
        for (path, node) in raw.range(prefix.clone()..).take_while(|(k, _)| k.starts_with(&prefix)) {
            // A resource type's own znode holds no ACLs.
            if !path[prefix.len()..].contains('/') {
                continue;
            }
            match acl_znode(path, &node.data) {
                Ok(Some((key, entries))) => {
                    c.security.acls.insert(key, entries);
                }
                Ok(None) => {}
                Err(AclZnode::Unknown) => c.notes.push(format!(
                    "{path}: not a resource type Kafka's authorizer knows; not imported"
                )),
                Err(AclZnode::Invalid(e)) => c.problems.push(e),
            }
        }
    }
    for (name, node) in children(raw, USERS) {
        match user_znode(name, &node.data) {
            Ok(u) => {
                if !u.other.is_empty() {
                    c.notes.push(format!(
                        "{USERS}/{name}: {} not imported (only SCRAM credentials are)",
                        u.other.join(", ")
                    ));
                }
                if let Some((user, record)) = u.scram {
                    c.security.users.insert(user, record);
                }
            }
            Err(e) => c.problems.push(e),
        }
    }
}

/// Why an ACL znode gives no ACLs.
#[derive(Debug, Clone, PartialEq)]
pub enum AclZnode {
    /// Not a literal or prefixed ACL of a resource type Kafka knows (Kafka skips it too).
    Unknown,
    /// Its value does not decode, or an entry is not a valid ACL.
    Invalid(Invalid),
}

/// The key and entries of one ACL znode; `None` when it holds none (an empty znode, as Kafka
/// reads one). Entries come out as a set, in Ferry's canonical order.
pub fn acl_znode(path: &str, data: &[u8]) -> Result<Option<(String, BTreeSet<AccessControlEntry>)>, AclZnode> {
    let pattern = acl::parse_key(path).ok_or(AclZnode::Unknown)?;
    let entries = acl::decode_acls(data).map_err(|e| AclZnode::Invalid(invalid(path, e.to_string())))?;
    for (i, e) in entries.iter().enumerate() {
        AclBinding::new(pattern.clone(), e.clone())
            .validate()
            .map_err(|err| AclZnode::Invalid(invalid(path, entry_error(i, err))))?;
    }
    if entries.is_empty() {
        return Ok(None);
    }
    Ok(Some((acl::key_of(&pattern), entries.into_iter().collect())))
}

/// A binding's error, the fields of an entry named as the JSON does (`acls[2].operation`).
fn entry_error(i: usize, e: AclError) -> String {
    match e {
        AclError::Invalid { field, reason }
            if ["principal", "operation", "permissionType", "host"].contains(&field.as_str()) =>
        {
            format!("acls[{i}].{field}: {reason}")
        }
        other => other.to_string(),
    }
}

/// What one `/config/users/<name>` znode holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UserZnode {
    /// The user and their SCRAM credentials, if any.
    pub scram: Option<(String, ScramUserRecord)>,
    /// The other configs' names (quotas), which are not imported.
    pub other: Vec<String>,
}

#[derive(Deserialize)]
struct ConfigJson {
    config: BTreeMap<String, String>,
}

/// One user znode: its SCRAM credentials, strictly checked, and the names of its other configs.
pub fn user_znode(name: &str, data: &[u8]) -> Result<UserZnode, Invalid> {
    let path = format!("{USERS}/{name}");
    // serde's messages quote the values they refuse, and these values are secrets.
    let cfg: ConfigJson = serde_json::from_slice(data).map_err(|e| {
        invalid(
            &path,
            format!("malformed JSON at line {} column {}", e.line(), e.column()),
        )
    })?;
    let mut out = UserZnode::default();
    let mut credentials = Vec::new();
    for (k, v) in &cfg.config {
        if !k.starts_with("SCRAM-") {
            out.other.push(k.clone());
            continue;
        }
        let Some((mechanism, code, key_len)) = MECHANISMS.iter().find(|(n, _, _)| n == k) else {
            return Err(invalid(&path, format!("{k}: not a SCRAM mechanism Kafka has")));
        };
        let c = KafkaCredential::from_kafka_text(v).map_err(|e| invalid(&path, credential_error(mechanism, e)))?;
        if c.stored_key.len() != *key_len {
            return Err(invalid(
                &path,
                format!(
                    "{mechanism}: stored_key: {} bytes, {mechanism} needs {key_len}",
                    c.stored_key.len()
                ),
            ));
        }
        credentials.push(ScramCredential {
            mechanism: *code,
            salt: c.salt.into(),
            stored_key: c.stored_key.into(),
            server_key: c.server_key.into(),
            // At most 16384: from_kafka_text checks Kafka's bounds.
            iterations: i32::try_from(c.iterations).unwrap_or(i32::MAX),
        });
    }
    if credentials.is_empty() {
        return Ok(out);
    }
    if name == DEFAULT_ENTITY {
        return Err(invalid(&path, "the default user entity cannot have SCRAM credentials"));
    }
    let user =
        kafka_desanitize(name).ok_or_else(|| invalid(&path, "the name is not a user name as Kafka encodes one"))?;
    credentials.sort_by_key(|c| c.mechanism);
    out.scram = Some((user, ScramUserRecord { credentials }));
    Ok(out)
}

/// A credential text's error without its values: only a known field's name is shown.
fn credential_error(mechanism: &str, e: SaslError) -> String {
    match e {
        SaslError::BadCredential { field, reason } if CREDENTIAL_FIELDS.contains(&field.as_str()) => {
            format!("{mechanism}: {field}: {reason}")
        }
        SaslError::BadCredential { reason, .. } if reason == "unknown field" => {
            format!("{mechanism}: a field other than {}", CREDENTIAL_FIELDS.join(", "))
        }
        SaslError::BadCredential { .. } => format!("{mechanism}: a part is not name=value"),
        other => format!("{mechanism}: {other}"),
    }
}

/// The user a znode name encodes, as Kafka's `Sanitizer.desanitize` (URL decoding) reads it:
/// `%XX` is a byte, `+` a space; `None` for a broken escape or bytes that are not UTF-8.
pub fn kafka_desanitize(name: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(name.len());
    let mut it = name.bytes();
    while let Some(b) = it.next() {
        match b {
            b'%' => {
                let hex = [it.next()?, it.next()?];
                bytes.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
            }
            b'+' => bytes.push(b' '),
            b => bytes.push(b),
        }
    }
    String::from_utf8(bytes).ok().filter(|u| !u.is_empty())
}

#[cfg(test)]
pub(crate) mod tests {
    use broker::sasl::Mechanism;
    use proto::acl::{Operation, Permission};

    use super::*;
    use crate::migrate_zk::parse::tests::snapshot;

    const ID: (&str, &str) = ("/cluster/id", r#"{"version":"1","id":"abc"}"#);

    /// Kafka's text of a credential derived from `password`.
    pub(crate) fn kafka_text(m: Mechanism, password: &str, iterations: u32) -> String {
        KafkaCredential::derive(m, password, b"salt-of-the-test", iterations)
            .unwrap()
            .to_kafka_text()
    }

    fn parsed(nodes: &[(&str, &str)]) -> ZkCluster {
        let mut all = vec![ID];
        all.extend_from_slice(nodes);
        {
            let raw = snapshot(&all);
            let mut c = crate::migrate_zk::parse::parse(&raw).unwrap();
            parse_into(&raw, &mut c);
            c
        }
    }

    #[test]
    fn reads_kafkas_acl_znodes_and_skips_the_rest() {
        let c = parsed(&[
            // As Kafka 3.9's AclAuthorizer writes them, field order included.
            (
                "/kafka-acl/Topic/t1",
                r#"{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*","operation":"Read"},{"principal":"User:bob","permissionType":"Deny","host":"10.0.0.1","operation":"READ"}],"version":1}"#,
            ),
            (
                "/kafka-acl-extended/prefixed/Topic/logs-",
                r#"{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*","operation":"Write"}],"version":1}"#,
            ),
            ("/kafka-acl/Topic", ""),
            ("/kafka-acl/Group/g1", r#"{"version":1,"acls":[]}"#),
            ("/kafka-acl/Cluster/kafka-cluster", ""),
            ("/kafka-acl/Widget/w", r#"{"version":1,"acls":[]}"#),
            ("/kafka-acl-changes/acl_changes_0000000000", "TOPIC:t1"),
            (
                "/kafka-acl-extended-changes/acl_changes_0000000000",
                r#"{"version":1,"resourceType":"TOPIC","name":"logs-","patternType":"PREFIXED"}"#,
            ),
        ]);
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        let keys: Vec<&str> = c.security.acls.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["/kafka-acl-extended/prefixed/Topic/logs-", "/kafka-acl/Topic/t1"]
        );
        let t1: Vec<_> = c.security.acls["/kafka-acl/Topic/t1"].iter().cloned().collect();
        assert_eq!(
            t1,
            [
                AccessControlEntry::new("User:alice", "*", Operation::Read, Permission::Allow),
                AccessControlEntry::new("User:bob", "10.0.0.1", Operation::Read, Permission::Deny),
            ]
        );
        assert_eq!(
            c.notes,
            ["/kafka-acl/Widget/w: not a resource type Kafka's authorizer knows; not imported"]
        );
    }

    #[test]
    fn a_bad_acl_znode_is_named_and_the_others_are_read() {
        let c = parsed(&[
            ("/kafka-acl/Topic/a", "{"),
            (
                "/kafka-acl/Topic/b",
                r#"{"version":1,"acls":[{"principal":"User:x","permissionType":"Allow","host":"*","operation":"Read"},{"principal":"alice","permissionType":"Allow","host":"*","operation":"Read"}]}"#,
            ),
            (
                "/kafka-acl/Topic/c",
                r#"{"version":1,"acls":[{"principal":"User:x","permissionType":"Allow","host":"*","operation":"CreateTokens"}]}"#,
            ),
            (
                "/kafka-acl/Cluster/other",
                r#"{"version":1,"acls":[{"principal":"User:x","permissionType":"Allow","host":"*","operation":"Alter"}]}"#,
            ),
            (
                "/kafka-acl/Topic/d",
                r#"{"version":1,"acls":[{"principal":"User:x","permissionType":"Allow","host":"*","operation":"Read"}]}"#,
            ),
        ]);
        let msgs: Vec<String> = c.problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(msgs.len(), 4, "{msgs:?}");
        assert!(
            msgs[0].starts_with("/kafka-acl/Cluster/other: resourceName: "),
            "{msgs:?}"
        );
        assert!(msgs[1].starts_with("/kafka-acl/Topic/a: value: not JSON"), "{msgs:?}");
        assert_eq!(
            msgs[2],
            "/kafka-acl/Topic/b: acls[1].principal: \"alice\" is not of the form Type:name"
        );
        assert_eq!(
            msgs[3],
            "/kafka-acl/Topic/c: acls[0].operation: CREATE_TOKENS is not an operation on TOPIC"
        );
        assert_eq!(c.security.acls.keys().collect::<Vec<_>>(), ["/kafka-acl/Topic/d"]);
    }

    #[test]
    fn reads_scram_credentials_and_notes_quotas() {
        let sha512 = kafka_text(Mechanism::ScramSha512, "alice-secret", 4096);
        let sha256 = kafka_text(Mechanism::ScramSha256, "alice-secret", 8192);
        let alice = format!(
            r#"{{"version":1,"config":{{"SCRAM-SHA-512":"{sha512}","SCRAM-SHA-256":"{sha256}","producer_byte_rate":"1024"}}}}"#
        );
        let c = parsed(&[
            ("/config/users/alice", &alice),
            (
                "/config/users/<default>",
                r#"{"version":1,"config":{"consumer_byte_rate":"2048"}}"#,
            ),
            (
                "/config/users/CN%3Dbob%2COU%3Dx",
                &format!(r#"{{"version":1,"config":{{"SCRAM-SHA-512":"{sha512}"}}}}"#),
            ),
        ]);
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        let users: Vec<&str> = c.security.users.keys().map(String::as_str).collect();
        assert_eq!(users, ["CN=bob,OU=x", "alice"]);
        let a = &c.security.users["alice"].credentials;
        assert_eq!(
            a.iter().map(|c| (c.mechanism, c.iterations)).collect::<Vec<_>>(),
            [(1, 8192), (2, 4096)]
        );
        let want = KafkaCredential::from_kafka_text(&sha512).unwrap();
        assert_eq!(
            (a[1].salt.to_vec(), a[1].stored_key.to_vec(), a[1].server_key.to_vec()),
            (want.salt, want.stored_key, want.server_key)
        );
        assert_eq!(
            c.notes,
            [
                "/config/users/<default>: consumer_byte_rate not imported (only SCRAM credentials are)",
                "/config/users/alice: producer_byte_rate not imported (only SCRAM credentials are)",
            ]
        );
    }

    #[test]
    fn a_bad_credential_is_named_without_its_secrets() {
        let good = kafka_text(Mechanism::ScramSha512, "pw", 4096);
        let salt = good.split(',').next().unwrap().to_string();
        let cases: Vec<(String, &str)> = vec![
            (
                good.replace("iterations=4096", "iterations=100"),
                "SCRAM-SHA-512: SCRAM iterations 100 out of range 4096..=16384",
            ),
            (
                good.replace("stored_key=", "stored_key=!"),
                "SCRAM-SHA-512: stored_key: not base64",
            ),
            (
                format!("{good},extra=1"),
                "SCRAM-SHA-512: a field other than salt, stored_key, server_key, iterations",
            ),
            (
                good.replacen(',', ",junk,", 1),
                "SCRAM-SHA-512: a part is not name=value",
            ),
        ];
        for (text, want) in &cases {
            let data = format!(r#"{{"version":1,"config":{{"SCRAM-SHA-512":"{text}"}}}}"#);
            let e = user_znode("carol", data.as_bytes()).unwrap_err();
            assert_eq!(e.to_string(), format!("/config/users/carol: {want}"));
        }
        // A SHA-512 credential filed as SHA-256, and text where JSON wants a map.
        let data = format!(r#"{{"version":1,"config":{{"SCRAM-SHA-256":"{good}"}}}}"#);
        assert_eq!(
            user_znode("carol", data.as_bytes()).unwrap_err().reason,
            "SCRAM-SHA-256: stored_key: 64 bytes, SCRAM-SHA-256 needs 32"
        );
        let data = format!(r#"{{"version":1,"config":"{good}"}}"#);
        let e = user_znode("carol", data.as_bytes()).unwrap_err();
        assert!(e.reason.starts_with("malformed JSON at line 1"), "{e}");
        assert!(!e.reason.contains(&salt[5..]), "{e}");
        let e = user_znode("carol", br#"{"version":1,"config":{"SCRAM-SHA-1":"x"}}"#).unwrap_err();
        assert_eq!(e.reason, "SCRAM-SHA-1: not a SCRAM mechanism Kafka has");
    }

    #[test]
    fn one_bad_user_leaves_the_others() {
        let good = kafka_text(Mechanism::ScramSha512, "pw", 4096);
        let c = parsed(&[
            (
                "/config/users/a",
                r#"{"version":1,"config":{"SCRAM-SHA-512":"salt=x"}}"#,
            ),
            (
                "/config/users/b",
                &format!(r#"{{"version":1,"config":{{"SCRAM-SHA-512":"{good}"}}}}"#),
            ),
            (
                "/config/users/bad%2",
                &format!(r#"{{"version":1,"config":{{"SCRAM-SHA-512":"{good}"}}}}"#),
            ),
        ]);
        let paths: Vec<&str> = c.problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["/config/users/a", "/config/users/bad%2"]);
        assert_eq!(c.security.users.keys().collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn desanitizes_as_kafka_does() {
        assert_eq!(kafka_desanitize("alice").as_deref(), Some("alice"));
        assert_eq!(kafka_desanitize("a%2Ab+c~d").as_deref(), Some("a*b c~d"));
        assert_eq!(kafka_desanitize("%E2%82%AC").as_deref(), Some("€"));
        assert_eq!(kafka_desanitize("%zz"), None);
        assert_eq!(kafka_desanitize("%C3"), None);
    }
}
