//! The import's ACLs and SCRAM credentials: their keys, `--dry-run`'s listing and `--verify`'s
//! differences, one line per ACL entry and per credential. A salt or a key is never printed: a
//! credential shows its user, mechanism and iterations, and a difference names its fields.

use std::collections::BTreeSet;

use prost::Message;
use proto::acl::{self, AccessControlEntry, AclBinding};
use proto::ferry::{ScramCredential, ScramUserRecord};
use proto::keys;

use super::model::{Plan, Value};
use crate::migrate_zk::parse::ZkSecurity;
use crate::migrate_zk::security::mechanism_name;

/// Adds each ACL key and each user's credentials to the plan.
pub(super) fn plan_security(s: &ZkSecurity, out: &mut Plan) {
    for (key, entries) in &s.acls {
        out.writes.insert(key.clone(), Value::Acl(entries.clone()));
    }
    for (user, record) in &s.users {
        out.writes.insert(keys::scram_user(user), Value::Scram(record.clone()));
    }
}

/// Appends one line.
fn line(out: &mut String, s: String) {
    out.push_str(&s);
    out.push('\n');
}

impl Plan {
    /// The ACLs planned, with their keys, in key order.
    fn acl_bindings(&self) -> impl Iterator<Item = (&str, AclBinding)> {
        self.writes.iter().flat_map(|(k, v)| {
            let entries = match (acl::parse_key(k), v) {
                (Some(p), Value::Acl(entries)) => {
                    entries.iter().map(|e| AclBinding::new(p.clone(), e.clone())).collect()
                }
                _ => Vec::new(),
            };
            entries.into_iter().map(move |b| (k.as_str(), b))
        })
    }

    /// The users planned with their credentials, in key order.
    fn scram_users(&self) -> impl Iterator<Item = (String, &ScramUserRecord)> {
        self.writes
            .iter()
            .filter_map(|(k, v)| match (keys::parse_scram_user(k), v) {
                (Some(u), Value::Scram(r)) => Some((u, r)),
                _ => None,
            })
    }

    /// The summary's part for ACLs and users.
    pub(super) fn security_summary(&self) -> String {
        format!(
            "{} ACL bindings, {} SCRAM users",
            self.acl_bindings().count(),
            self.scram_users().count()
        )
    }

    /// `--dry-run`'s ACLs, as `kafka-acls --list` names them, and users, as `kafka-configs
    /// --describe --entity-type users` does.
    pub(super) fn render_security(&self, out: &mut String) {
        line(out, "ACLs".into());
        for (key, b) in self.acl_bindings() {
            line(out, format!("{key} {b}"));
        }
        line(
            out,
            "SCRAM credentials (mechanisms and iterations; salts and keys are not shown)".into(),
        );
        for (user, r) in self.scram_users() {
            let creds: Vec<String> = r
                .credentials
                .iter()
                .map(|c| format!("{}=iterations={}", mechanism_name(c.mechanism), c.iterations))
                .collect();
            line(
                out,
                format!(
                    "SCRAM credential configs for user-principal '{user}' are {}",
                    creds.join(", ")
                ),
            );
        }
    }
}

/// The differences at an ACL or SCRAM key between ZooKeeper's value (`None`: ZooKeeper has
/// none) and the bytes Ferry stores (`None`: absent), one line each; `None` when the key is of
/// neither kind.
pub fn security_differences(key: &str, planned: Option<&Value>, stored: Option<&[u8]>) -> Option<Vec<String>> {
    match planned {
        Some(Value::Acl(zk)) => Some(acl_differences(key, zk, stored)),
        Some(Value::Scram(zk)) => Some(scram_differences(key, zk, stored)),
        Some(_) => None,
        None if acl::parse_key(key).is_some() => Some(acl_differences(key, &BTreeSet::new(), stored)),
        None if keys::parse_scram_user(key).is_some() => {
            Some(scram_differences(key, &ScramUserRecord::default(), stored))
        }
        None => None,
    }
}

/// One line per entry that only one side has.
fn acl_differences(key: &str, zk: &BTreeSet<AccessControlEntry>, stored: Option<&[u8]>) -> Vec<String> {
    let ours: BTreeSet<AccessControlEntry> = match stored.map(acl::decode_acls) {
        None => BTreeSet::new(),
        Some(Ok(entries)) => entries.into_iter().collect(),
        Some(Err(e)) => return vec![format!("{key}: undecodable in Ferry ({e})")],
    };
    let missing = zk
        .difference(&ours)
        .map(|e| format!("{key}: {e} in ZooKeeper, missing in Ferry"));
    let extra = ours
        .difference(zk)
        .map(|e| format!("{key}: {e} missing in ZooKeeper, present in Ferry"));
    missing.chain(extra).collect()
}

/// One line per mechanism whose credential differs in any field, or that only one side has.
fn scram_differences(key: &str, zk: &ScramUserRecord, stored: Option<&[u8]>) -> Vec<String> {
    let user = keys::parse_scram_user(key).unwrap_or_else(|| key.to_string());
    let ours = match stored.map(ScramUserRecord::decode) {
        None => ScramUserRecord::default(),
        Some(Ok(r)) => r,
        // A decode error could quote bytes of a key: name the user only.
        Some(Err(_)) => return vec![format!("{key}: user {user}: undecodable in Ferry")],
    };
    let find = |r: &ScramUserRecord, m: i32| r.credentials.iter().find(|c| c.mechanism == m).cloned();
    let mechanisms: BTreeSet<i32> = zk
        .credentials
        .iter()
        .chain(&ours.credentials)
        .map(|c| c.mechanism)
        .collect();
    let mut out = Vec::new();
    for m in mechanisms {
        let at = format!("{key}: user {user} {}", mechanism_name(m));
        match (find(zk, m), find(&ours, m)) {
            (Some(_), None) => out.push(format!("{at}: in ZooKeeper, missing in Ferry")),
            (None, Some(_)) => out.push(format!("{at}: missing in ZooKeeper, present in Ferry")),
            (Some(a), Some(b)) => {
                let fields = differing_fields(&a, &b);
                if !fields.is_empty() {
                    out.push(format!("{at}: differs in {}", fields.join(", ")));
                }
            }
            (None, None) => {}
        }
    }
    out
}

/// The names of the fields in which two credentials differ, never their values.
fn differing_fields(a: &ScramCredential, b: &ScramCredential) -> Vec<&'static str> {
    [
        ("salt", a.salt != b.salt),
        ("stored_key", a.stored_key != b.stored_key),
        ("server_key", a.server_key != b.server_key),
        ("iterations", a.iterations != b.iterations),
    ]
    .into_iter()
    .filter_map(|(name, differs)| differs.then_some(name))
    .collect()
}

#[cfg(test)]
mod tests {
    use broker::sasl::Mechanism;
    use prost::Message;
    use proto::acl::{Operation, Permission};

    use super::*;
    use crate::migrate_zk::parse::{parse, tests::snapshot};
    use crate::migrate_zk::plan::plan;
    use crate::migrate_zk::security::tests::kafka_text;

    fn planned() -> Plan {
        let sha512 = kafka_text(Mechanism::ScramSha512, "alice-secret", 4096);
        let sha256 = kafka_text(Mechanism::ScramSha256, "alice-secret", 8192);
        let alice = format!(r#"{{"version":1,"config":{{"SCRAM-SHA-512":"{sha512}","SCRAM-SHA-256":"{sha256}"}}}}"#);
        let raw = snapshot(&[
            ("/cluster/id", r#"{"version":"1","id":"kc"}"#),
            (
                "/kafka-acl/Topic/t1",
                r#"{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*","operation":"Read"}],"version":1}"#,
            ),
            (
                "/kafka-acl-extended/prefixed/Group/g",
                r#"{"acls":[{"principal":"User:alice","permissionType":"Deny","host":"10.0.0.1","operation":"Read"}],"version":1}"#,
            ),
            ("/config/users/alice", &alice),
        ]);
        let mut c = parse(&raw).unwrap();
        crate::migrate_zk::security::parse_into(&raw, &mut c);
        plan(&c)
    }

    fn entry(principal: &str, op: Operation) -> AccessControlEntry {
        AccessControlEntry::new(principal, "*", op, Permission::Allow)
    }

    #[test]
    fn plans_the_keys_ferry_reads() {
        let p = planned();
        assert!(p.skipped.is_empty(), "{:?}", p.skipped);
        let keys: Vec<&str> = p.writes.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "/cluster/id",
                "/config/scram/alice",
                "/kafka-acl-extended/prefixed/Group/g",
                "/kafka-acl/Topic/t1"
            ]
        );
        // Stored as Ferry's own writes store them: Kafka's JSON, canonical.
        assert_eq!(
            p.writes["/kafka-acl/Topic/t1"].encode(),
            br#"{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}"#
        );
        let Value::Scram(r) = &p.writes["/config/scram/alice"] else {
            panic!()
        };
        assert_eq!(r.credentials.iter().map(|c| c.mechanism).collect::<Vec<_>>(), [1, 2]);
        assert!(
            p.summary().ends_with(", 2 ACL bindings, 1 SCRAM users"),
            "{}",
            p.summary()
        );
    }

    #[test]
    fn dry_run_lists_bindings_and_users_but_no_secret() {
        let p = planned();
        let out = p.render();
        assert!(out.contains("/kafka-acl/Topic/t1 ResourcePattern(resourceType=TOPIC, name=t1, patternType=LITERAL) (principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"), "{out}");
        assert!(out.contains("/kafka-acl-extended/prefixed/Group/g ResourcePattern(resourceType=GROUP, name=g, patternType=PREFIXED) (principal=User:alice, host=10.0.0.1, operation=READ, permissionType=DENY)\n"), "{out}");
        assert!(
            out.contains("SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"),
            "{out}"
        );
        let text = kafka_text(Mechanism::ScramSha512, "alice-secret", 4096);
        for part in text.split(',') {
            let value = part.split_once('=').unwrap().1;
            if !part.starts_with("iterations") {
                assert!(!out.contains(value), "{part} is printed:\n{out}");
            }
        }
        assert!(!p.writes["/config/scram/alice"].describe().contains("salt"));
    }

    #[test]
    fn verify_names_each_entry_and_credential_that_differs() {
        let p = planned();
        let Value::Scram(zk) = &p.writes["/config/scram/alice"] else {
            panic!()
        };
        let same = zk.encode_to_vec();
        assert_eq!(
            security_differences("/config/scram/alice", p.writes.get("/config/scram/alice"), Some(&same)),
            Some(vec![])
        );

        // Another password for SHA-512, no SHA-256, and a user ZooKeeper does not have.
        let mut changed = zk.clone();
        changed.credentials.retain(|c| c.mechanism == 2);
        changed.credentials[0].stored_key = vec![1; 64].into();
        changed.credentials[0].server_key = vec![2; 64].into();
        let d = security_differences(
            "/config/scram/alice",
            p.writes.get("/config/scram/alice"),
            Some(&changed.encode_to_vec()),
        )
        .unwrap();
        assert_eq!(
            d,
            [
                "/config/scram/alice: user alice SCRAM-SHA-256: in ZooKeeper, missing in Ferry",
                "/config/scram/alice: user alice SCRAM-SHA-512: differs in stored_key, server_key",
            ]
        );
        let d = security_differences("/config/scram/bob", None, Some(&same)).unwrap();
        assert_eq!(
            d,
            [
                "/config/scram/bob: user bob SCRAM-SHA-256: missing in ZooKeeper, present in Ferry",
                "/config/scram/bob: user bob SCRAM-SHA-512: missing in ZooKeeper, present in Ferry",
            ]
        );

        // ACLs compare as sets of entries: order and spelling do not matter.
        let key = "/kafka-acl/Topic/t1";
        let reordered = acl::encode_acls(&[
            entry("User:bob", Operation::Write),
            entry("User:alice", Operation::Read),
        ]);
        let d = security_differences(key, p.writes.get(key), Some(&reordered)).unwrap();
        assert_eq!(d, ["/kafka-acl/Topic/t1: (principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW) missing in ZooKeeper, present in Ferry"]);
        let d = security_differences(key, p.writes.get(key), None).unwrap();
        assert_eq!(d, ["/kafka-acl/Topic/t1: (principal=User:alice, host=*, operation=READ, permissionType=ALLOW) in ZooKeeper, missing in Ferry"]);
        assert!(security_differences(key, p.writes.get(key), Some(b"{")).unwrap()[0].contains("undecodable in Ferry"));
        assert_eq!(security_differences("/kafka-acl-changes/x", None, Some(b"")), None);
        assert_eq!(security_differences("/brokers/topics/x", None, Some(b"")), None);
    }

    #[test]
    fn verify_covers_acls_and_users_on_either_side() {
        let p = planned();
        let kv = |k: &str, value: Vec<u8>| proto::metastore::KeyValue {
            key: k.to_string(),
            value: value.into(),
            ..Default::default()
        };
        let mut stored: std::collections::BTreeMap<String, proto::metastore::KeyValue> =
            p.writes.iter().map(|(k, v)| (k.clone(), kv(k, v.encode()))).collect();
        assert_eq!(crate::migrate_zk::differences(&p, &stored), Vec::<String>::new());
        stored.remove("/kafka-acl/Topic/t1");
        let bob = p.writes["/config/scram/alice"].encode();
        stored.insert("/config/scram/bob".into(), kv("/config/scram/bob", bob));
        let g = acl::encode_acls(&[entry("User:carol", Operation::Read)]);
        stored.insert("/kafka-acl/Group/g".into(), kv("/kafka-acl/Group/g", g));
        assert_eq!(
            crate::migrate_zk::differences(&p, &stored),
            [
                "/kafka-acl/Topic/t1: (principal=User:alice, host=*, operation=READ, permissionType=ALLOW) in ZooKeeper, missing in Ferry",
                "/config/scram/bob: user bob SCRAM-SHA-256: missing in ZooKeeper, present in Ferry",
                "/config/scram/bob: user bob SCRAM-SHA-512: missing in ZooKeeper, present in Ferry",
                "/kafka-acl/Group/g: (principal=User:carol, host=*, operation=READ, permissionType=ALLOW) missing in ZooKeeper, present in Ferry",
            ]
        );
    }

    #[test]
    fn an_import_finds_its_own_writes_unchanged() {
        let p = planned();
        for (k, v) in &p.writes {
            assert!(v.same_as(&v.encode()), "{k}");
        }
        // Ferry's own ACL writes order entries as a set does; a shuffled value is the same.
        let key = "/kafka-acl/Topic/t1";
        let v = &p.writes[key];
        let Value::Acl(entries) = v else { panic!() };
        let mut list: Vec<AccessControlEntry> = entries.iter().cloned().collect();
        list.push(list[0].clone());
        assert!(v.same_as(&acl::encode_acls(&list)));
    }
}
