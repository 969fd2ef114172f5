//! Tests of the authorizer: Kafka's decision rules and `authorize_any`.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

use Operation::*;
use Permission::{Allow, Deny};
use ResourceType::{Cluster, Group, Topic};

const ALICE: &str = "User:alice";
const BOB: &str = "User:bob";
const IP: &str = "10.0.0.1";

fn acl(
    rt: ResourceType,
    name: &str,
    pt: PatternType,
    principal: &str,
    host: &str,
    op: Operation,
    perm: Permission,
) -> AclBinding {
    AclBinding::new(
        ResourcePattern::new(rt, name, pt),
        AccessControlEntry::new(principal, host, op, perm),
    )
}

fn lit(name: &str, principal: &str, op: Operation, perm: Permission) -> AclBinding {
    acl(Topic, name, PatternType::Literal, principal, "*", op, perm)
}

fn pre(name: &str, principal: &str, op: Operation, perm: Permission) -> AclBinding {
    acl(Topic, name, PatternType::Prefixed, principal, "*", op, perm)
}

fn authz(bindings: Vec<AclBinding>) -> Authorizer {
    Authorizer::new(bindings, BTreeSet::new(), false)
}

fn allowed(a: &Authorizer, principal: &str, op: Operation, topic: &str) -> bool {
    a.authorize(principal, IP, op, Topic, topic).allowed
}

#[test]
fn allow_matches_and_names_the_acl() {
    let b = lit("t", ALICE, Read, Allow);
    let a = authz(vec![b.clone()]);
    let d = a.authorize(ALICE, IP, Read, Topic, "t");
    assert_eq!(
        d,
        Decision {
            allowed: true,
            reason: Reason::Acl(b)
        }
    );
    assert!(d
        .to_string()
        .starts_with("ALLOWED by ACL ResourcePattern(resourceType=TOPIC"));
    assert!(!allowed(&a, ALICE, Write, "t"));
    assert!(!allowed(&a, BOB, Read, "t"));
    assert!(!allowed(&a, ALICE, Read, "u"));
    // Another resource type with the same name is another resource.
    assert!(!a.authorize(ALICE, IP, Read, Group, "t").allowed);
}

#[test]
fn deny_wins_over_allow() {
    let deny = lit("t", ALICE, Read, Deny);
    let a = authz(vec![
        lit("t", ALICE, Read, Allow),
        lit("*", "User:*", All, Allow),
        deny.clone(),
    ]);
    let d = a.authorize(ALICE, IP, Read, Topic, "t");
    assert_eq!(
        d,
        Decision {
            allowed: false,
            reason: Reason::Acl(deny)
        }
    );
    // A deny of All denies every operation; a deny of Read denies only Read (no implication).
    let a = authz(vec![lit("t", ALICE, All, Allow), pre("t", ALICE, All, Deny)]);
    assert!(!allowed(&a, ALICE, Write, "t"));
    let a = authz(vec![lit("t", ALICE, All, Allow), lit("t", ALICE, Read, Deny)]);
    assert!(!allowed(&a, ALICE, Read, "t"));
    assert!(allowed(&a, ALICE, Describe, "t"));
}

#[test]
fn wildcard_principal_and_host() {
    let a = authz(vec![lit("t", "User:*", Read, Allow)]);
    assert!(allowed(&a, ALICE, Read, "t"));
    assert!(allowed(&a, "Group:x", Read, "t"));
    // Only `User:*` is a wildcard.
    let a = authz(vec![lit("t", "Group:*", Read, Allow)]);
    assert!(!allowed(&a, "Group:x", Read, "t"));

    let a = authz(vec![acl(Topic, "t", PatternType::Literal, ALICE, IP, Read, Allow)]);
    assert!(a.authorize(ALICE, IP, Read, Topic, "t").allowed);
    assert!(!a.authorize(ALICE, "10.0.0.2", Read, Topic, "t").allowed);
    let a = authz(vec![
        lit("t", ALICE, Read, Allow),
        acl(Topic, "t", PatternType::Literal, "User:*", "10.0.0.2", All, Deny),
    ]);
    assert!(a.authorize(ALICE, IP, Read, Topic, "t").allowed);
    assert!(!a.authorize(ALICE, "10.0.0.2", Read, Topic, "t").allowed);
}

#[test]
fn literal_wildcard_and_prefixes() {
    let a = authz(vec![lit("*", ALICE, Read, Allow)]);
    assert!(allowed(&a, ALICE, Read, "anything"));
    assert!(allowed(&a, ALICE, Read, "*"));

    let a = authz(vec![pre("fo", ALICE, Read, Allow), pre("fop", ALICE, Write, Allow)]);
    assert!(allowed(&a, ALICE, Read, "fo"));
    assert!(allowed(&a, ALICE, Read, "foo"));
    assert!(allowed(&a, ALICE, Read, "fop-1"));
    assert!(allowed(&a, ALICE, Write, "fop-1"));
    assert!(!allowed(&a, ALICE, Write, "foo"));
    assert!(!allowed(&a, ALICE, Read, "f"));
    assert!(!allowed(&a, ALICE, Read, "xfoo"));
    // A prefixed `*` is a plain prefix, not a wildcard.
    let a = authz(vec![pre("*", ALICE, Read, Allow)]);
    assert!(!allowed(&a, ALICE, Read, "t"));
    assert!(allowed(&a, ALICE, Read, "*t"));
    // A literal pattern matches only its name.
    let a = authz(vec![lit("fo", ALICE, Read, Allow)]);
    assert!(!allowed(&a, ALICE, Read, "foo"));
}

#[test]
fn prefixes_among_many_neighbours() {
    // Keys that sort between the prefixes of the name must be skipped, not stop the walk.
    let mut bs = vec![pre("a", ALICE, Read, Allow), pre("ab", BOB, Read, Allow)];
    for n in [
        "aa",
        "ab0",
        "abb",
        "abc-",
        "abcc",
        "abcd-x",
        "ac",
        "a\u{e9}",
        "ab\u{10000}",
    ] {
        bs.push(pre(n, ALICE, Write, Allow));
    }
    bs.push(pre("abcd", ALICE, Read, Deny));
    let a = authz(bs);
    assert!(allowed(&a, ALICE, Read, "abc"));
    assert!(allowed(&a, BOB, Read, "abcdz"));
    assert!(!allowed(&a, ALICE, Read, "abcdz"));
    assert!(!allowed(&a, ALICE, Write, "abcdz"));
    assert!(allowed(&a, ALICE, Write, "a\u{e9}\u{e9}"));
    assert!(allowed(&a, ALICE, Write, "ab\u{10000}!"));
}

#[test]
fn implied_operations() {
    for op in [Read, Write, Delete, Alter] {
        let a = authz(vec![lit("t", ALICE, op, Allow)]);
        assert!(allowed(&a, ALICE, Describe, "t"), "{op} implies DESCRIBE");
    }
    let a = authz(vec![lit("t", ALICE, Describe, Allow)]);
    assert!(!allowed(&a, ALICE, Read, "t"));
    let a = authz(vec![lit("t", ALICE, Create, Allow)]);
    assert!(!allowed(&a, ALICE, Describe, "t"));
    let a = authz(vec![lit("t", ALICE, AlterConfigs, Allow)]);
    assert!(allowed(&a, ALICE, DescribeConfigs, "t"));
    assert!(!allowed(&a, ALICE, Describe, "t"));
    let a = authz(vec![lit("t", ALICE, All, Allow)]);
    assert!(allowed(&a, ALICE, IdempotentWrite, "t"));
}

#[test]
fn super_users_beat_denies() {
    let mut a = authz(vec![lit("t", "User:*", All, Deny)]);
    a.super_users.insert("User:admin".into());
    let d = a.authorize("User:admin", IP, Write, Topic, "t");
    assert_eq!(
        d,
        Decision {
            allowed: true,
            reason: Reason::SuperUser
        }
    );
    assert!(!allowed(&a, ALICE, Write, "t"));
}

#[test]
fn allow_everyone_only_when_no_acl_matches_the_resource() {
    let mut a = authz(vec![lit("t", BOB, Read, Allow), pre("p", BOB, Read, Allow)]);
    a.allow_everyone_if_no_acl_found = true;
    // No ACL on `u`: open.
    let d = a.authorize(ALICE, IP, Write, Topic, "u");
    assert_eq!(
        d,
        Decision {
            allowed: true,
            reason: Reason::NoAclFound
        }
    );
    // An ACL for another principal on the same topic (literal or by prefix) closes it.
    let d = a.authorize(ALICE, IP, Read, Topic, "t");
    assert_eq!(
        d,
        Decision {
            allowed: false,
            reason: Reason::NoAllowMatched
        }
    );
    assert!(!allowed(&a, ALICE, Read, "p1"));
    // And so does one for another operation, even for the principal it names.
    assert!(!allowed(&a, BOB, Write, "t"));
    a.allow_everyone_if_no_acl_found = false;
    let d = a.authorize(ALICE, IP, Write, Topic, "u");
    assert_eq!(
        d,
        Decision {
            allowed: false,
            reason: Reason::NoAclFound
        }
    );
}

#[test]
fn invalid_actions_are_denied() {
    let a = Authorizer::new(vec![], BTreeSet::from(["User:admin".to_string()]), true);
    for (op, rt) in [(Any, Topic), (Unknown, Topic), (Read, ResourceType::Any)] {
        let d = a.authorize("User:admin", IP, op, rt, "t");
        assert_eq!(d.reason, Reason::InvalidAction);
        assert!(!d.allowed);
        assert!(!a.authorize_any("User:admin", IP, op, rt));
    }
}

#[test]
fn add_remove_and_list() {
    let b1 = lit("t", ALICE, Read, Allow);
    let b2 = pre("t", ALICE, Read, Allow);
    let b3 = acl(Cluster, CLUSTER_NAME, PatternType::Literal, BOB, "*", Alter, Allow);
    let mut a = authz(vec![b1.clone(), b2.clone(), b1.clone()]);
    assert_eq!(a.len(), 2);
    assert!(a.add(b3.clone()));
    assert!(!a.add(b3.clone()));
    assert!(!a.add(acl(Topic, "t", PatternType::Match, ALICE, "*", Read, Allow)));
    assert_eq!(
        a.bindings().collect::<Vec<_>>(),
        vec![b1.clone(), b2.clone(), b3.clone()]
    );
    let only_prefixed = AclBindingFilter {
        pattern: ResourcePatternFilter {
            pattern_type: PatternType::Prefixed,
            ..ResourcePatternFilter::ANY
        },
        entry: AccessControlEntryFilter::ANY,
    };
    assert_eq!(a.matching(&only_prefixed), vec![b2.clone()]);
    assert!(a.remove(&b1));
    assert!(!a.remove(&b1));
    assert!(allowed(&a, ALICE, Read, "t2"));
    assert!(!allowed(&a, ALICE, Read, "s"));
    assert_eq!(a.len(), 2);
    assert!(!a.is_empty());
}

#[test]
fn authorize_any_follows_kafka() {
    let any = |a: &Authorizer, p: &str| a.authorize_any(p, IP, Write, Topic);
    // Nothing at all: allow-everyone decides.
    let mut a = authz(vec![]);
    assert!(!any(&a, ALICE));
    a.allow_everyone_if_no_acl_found = true;
    assert!(any(&a, ALICE));
    // Some resource has no ACL; a literal `*` ACL for anyone leaves none without one.
    let mut a = authz(vec![lit("t", BOB, Write, Allow)]);
    a.allow_everyone_if_no_acl_found = true;
    assert!(any(&a, ALICE));
    let mut a = authz(vec![lit("*", BOB, Write, Allow)]);
    a.allow_everyone_if_no_acl_found = true;
    assert!(!any(&a, ALICE));
    assert!(any(&a, BOB));
    // A wildcard deny denies every resource, allow-everyone or not.
    let mut a = authz(vec![lit("*", ALICE, All, Deny), lit("t", ALICE, Write, Allow)]);
    a.allow_everyone_if_no_acl_found = true;
    assert!(!any(&a, ALICE));
    a.super_users.insert(ALICE.into());
    assert!(any(&a, ALICE));

    let a = authz(vec![lit("t", ALICE, Write, Allow)]);
    assert!(any(&a, ALICE));
    assert!(!any(&a, BOB));
    assert!(!a.authorize_any(ALICE, IP, Read, Topic));
    assert!(!a.authorize_any(ALICE, IP, Write, Group));
    // Only the operation and All count; no implication.
    let a = authz(vec![lit("t", ALICE, Read, Allow)]);
    assert!(!a.authorize_any(ALICE, IP, Describe, Topic));
    let a = authz(vec![lit("t", "User:*", All, Allow)]);
    assert!(a.authorize_any(ALICE, IP, Describe, Topic));
    // Host must match.
    let a = authz(vec![acl(
        Topic,
        "t",
        PatternType::Literal,
        ALICE,
        "10.9.9.9",
        Write,
        Allow,
    )]);
    assert!(!any(&a, ALICE));
}

#[test]
fn authorize_any_weighs_denies() {
    let any = |bs: Vec<AclBinding>| authz(bs).authorize_any(ALICE, IP, Write, Topic);
    // A literal allow under the same literal deny, or under a deny prefix, is no resource.
    assert!(!any(vec![lit("t", ALICE, Write, Allow), lit("t", ALICE, Write, Deny)]));
    assert!(!any(vec![lit("tx", ALICE, Write, Allow), pre("t", ALICE, All, Deny)]));
    assert!(!any(vec![pre("tx", ALICE, Write, Allow), pre("t", ALICE, Write, Deny)]));
    assert!(!any(vec![
        pre("tx", ALICE, Write, Allow),
        pre("tx", ALICE, Write, Deny)
    ]));
    // A deny of a longer prefix or of one name leaves the rest of an allowed prefix.
    assert!(any(vec![pre("t", ALICE, Write, Allow), pre("tx", ALICE, Write, Deny)]));
    assert!(any(vec![pre("t", ALICE, Write, Allow), lit("t", ALICE, Write, Deny)]));
    assert!(any(vec![lit("*", ALICE, Write, Allow), pre("t", ALICE, Write, Deny)]));
    assert!(any(vec![lit("u", ALICE, Write, Allow), pre("t", ALICE, Write, Deny)]));
    // A deny for someone else or another operation does not count.
    assert!(any(vec![lit("t", ALICE, Write, Allow), lit("t", BOB, Write, Deny)]));
    assert!(any(vec![lit("t", ALICE, Write, Allow), lit("t", ALICE, Read, Deny)]));
}

fn arb_binding() -> impl Strategy<Value = AclBinding> {
    (
        prop::sample::select(vec![Topic, Group]),
        "[ab*\u{e8}\u{e9}]{1,4}",
        prop::sample::select(vec![PatternType::Literal, PatternType::Prefixed]),
        prop::sample::select(vec![ALICE, BOB, "User:*"]),
        prop::sample::select(vec![IP, "*", "10.0.0.2"]),
        prop::sample::select(vec![Read, Write, Describe, All]),
        prop::sample::select(vec![Allow, Deny]),
    )
        .prop_map(|(rt, n, pt, p, h, op, perm)| acl(rt, &n, pt, p, h, op, perm))
}

/// Kafka's rules over a full scan of the ACLs, as the oracle of the index.
fn by_scan(a: &Authorizer, bs: &[AclBinding], p: &str, op: Operation, name: &str) -> bool {
    let on: Vec<_> = bs.iter().filter(|b| b.pattern.covers(Topic, name)).collect();
    if on.is_empty() {
        return a.allow_everyone_if_no_acl_found;
    }
    let hits = |b: &&&AclBinding| b.entry.applies_to_principal(p) && b.entry.applies_to_host(IP);
    let deny = on
        .iter()
        .filter(hits)
        .any(|b| b.entry.permission == Deny && b.entry.operation.denies(op));
    !deny
        && on
            .iter()
            .filter(hits)
            .any(|b| b.entry.permission == Allow && b.entry.operation.allows(op))
}

proptest! {
    #[test]
    fn index_agrees_with_a_full_scan(
        bs in prop::collection::vec(arb_binding(), 0..24),
        name in "[ab*\u{e8}\u{e9}]{1,5}",
        p in prop::sample::select(vec![ALICE, BOB]),
        op in prop::sample::select(vec![Read, Write, Describe]),
        everyone in any::<bool>(),
    ) {
        let a = Authorizer::new(bs.clone(), BTreeSet::new(), everyone);
        let d = a.authorize(p, IP, op, Topic, &name);
        prop_assert_eq!(d.allowed, by_scan(&a, &bs, p, op, &name), "{}", d);
        if let Reason::Acl(b) = &d.reason {
            prop_assert!(bs.contains(b));
        }
    }
}
