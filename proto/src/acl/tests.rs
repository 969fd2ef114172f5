//! Tests of the model, its validation, filters and the stored format.

use proptest::prelude::*;

use super::*;

fn binding(rt: ResourceType, name: &str, pt: PatternType, principal: &str, op: Operation) -> AclBinding {
    AclBinding::new(
        ResourcePattern::new(rt, name, pt),
        AccessControlEntry::new(principal, "*", op, Permission::Allow),
    )
}

fn topic_read(name: &str, pt: PatternType) -> AclBinding {
    binding(ResourceType::Topic, name, pt, "User:alice", Operation::Read)
}

#[test]
fn codes_and_names() {
    assert_eq!(ResourceType::TransactionalId.code(), 5);
    assert_eq!(ResourceType::from_code(7), ResourceType::User);
    assert_eq!(ResourceType::from_code(99), ResourceType::Unknown);
    assert_eq!(PatternType::Prefixed.code(), 4);
    assert_eq!(Operation::DescribeTokens.code(), 14);
    assert_eq!(Operation::from_code(-1), Operation::Unknown);
    assert_eq!(Permission::Allow.code(), 3);
    for &v in Operation::VALUES {
        assert_eq!(Operation::from_code(v.code()), v);
        assert_eq!(Operation::from_name(v.name()), Some(v));
        assert_eq!(Operation::from_name(v.cli_name()), Some(v));
    }
    assert_eq!(Operation::VALUES.len(), 15);
    assert_eq!(ResourceType::VALUES.len(), 8);
    assert_eq!(PatternType::VALUES.len(), 5);
    assert_eq!(Permission::VALUES.len(), 4);
    assert_eq!(Operation::DescribeConfigs.name(), "DescribeConfigs");
    assert_eq!(Operation::DescribeConfigs.to_string(), "DESCRIBE_CONFIGS");
    assert_eq!(ResourceType::DelegationToken.cli_name(), "DELEGATION_TOKEN");
    assert_eq!(Permission::Deny.name(), "Deny");
    assert_eq!(PatternType::Prefixed.name(), "Prefixed");
    // As Kafka reads names: the stored one exactly, the printed one in any case.
    assert_eq!(
        Operation::from_name("describe_configs"),
        Some(Operation::DescribeConfigs)
    );
    assert_eq!(Operation::from_name("read"), Some(Operation::Read));
    assert_eq!(Operation::from_name("describeconfigs"), None);
    assert_eq!(ResourceType::from_name("Topics"), None);
}

#[test]
fn display_as_kafka_acls_prints() {
    let b = topic_read("t", PatternType::Literal);
    assert_eq!(
        b.to_string(),
        "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL) \
         (principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    );
}

#[test]
fn operations_per_resource_type() {
    use Operation::*;
    use ResourceType::*;
    assert!(Read.valid_for(Topic) && AlterConfigs.valid_for(Topic) && All.valid_for(Topic));
    assert!(!ClusterAction.valid_for(Topic) && !IdempotentWrite.valid_for(Topic));
    assert!(Read.valid_for(Group) && Delete.valid_for(Group) && !Write.valid_for(Group));
    assert!(IdempotentWrite.valid_for(Cluster) && ClusterAction.valid_for(Cluster));
    assert!(!Read.valid_for(Cluster));
    assert!(Write.valid_for(TransactionalId) && !Read.valid_for(TransactionalId));
    assert!(Describe.valid_for(DelegationToken) && !Delete.valid_for(DelegationToken));
    assert!(CreateTokens.valid_for(User) && !Describe.valid_for(User));
    assert!(!All.valid_for(ResourceType::Any) && !Operation::Any.valid_for(Topic));
}

fn refused_field(b: &AclBinding) -> String {
    match b.validate() {
        Err(AclError::Invalid { field, .. }) => field,
        other => panic!("{b}: {other:?}"),
    }
}

#[test]
fn validation_names_the_field() {
    use PatternType::*;
    use ResourceType as R;
    assert_eq!(topic_read("t", Literal).validate(), Ok(()));
    assert_eq!(topic_read("t", Prefixed).validate(), Ok(()));
    let c = binding(R::Cluster, CLUSTER_NAME, Literal, "User:a", Operation::IdempotentWrite);
    assert_eq!(c.validate(), Ok(()));
    for rt in [R::Unknown, R::Any] {
        assert_eq!(
            refused_field(&binding(rt, "t", Literal, "User:a", Operation::Read)),
            "resourceType"
        );
    }
    for pt in [Unknown, Any, Match] {
        assert_eq!(refused_field(&topic_read("t", pt)), "patternType");
    }
    assert_eq!(refused_field(&topic_read("", Literal)), "resourceName");
    let c = binding(R::Cluster, "other", Literal, "User:a", Operation::Alter);
    assert_eq!(refused_field(&c), "resourceName");
    assert!(c.validate().unwrap_err().to_string().contains("kafka-cluster"));
    for p in ["alice", "", ":alice", "User:"] {
        assert_eq!(
            refused_field(&binding(R::Topic, "t", Literal, p, Operation::Read)),
            "principal"
        );
    }
    for op in [Operation::Unknown, Operation::Any, Operation::ClusterAction] {
        assert_eq!(
            refused_field(&binding(R::Topic, "t", Literal, "User:a", op)),
            "operation"
        );
    }
    let mut b = topic_read("t", Literal);
    for perm in [Permission::Unknown, Permission::Any] {
        b.entry.permission = perm;
        assert_eq!(refused_field(&b), "permissionType");
    }
    let r: crate::errors::Refusal = b.validate().unwrap_err().into();
    assert_eq!(r.code, crate::errors::ErrorCode::INVALID_REQUEST);
    assert!(r.message.starts_with("permissionType: "), "{}", r.message);
}

fn pattern_filter(rt: ResourceType, name: Option<&str>, pt: PatternType) -> AclBindingFilter {
    AclBindingFilter {
        pattern: ResourcePatternFilter {
            resource_type: rt,
            name: name.map(String::from),
            pattern_type: pt,
        },
        entry: AccessControlEntryFilter::ANY,
    }
}

#[test]
fn pattern_filters_match_as_kafka() {
    use PatternType::*;
    let lit_t = topic_read("foo", Literal);
    let lit_star = topic_read("*", Literal);
    let pre_f = topic_read("fo", Prefixed);
    let pre_x = topic_read("x", Prefixed);
    let group = binding(ResourceType::Group, "foo", Literal, "User:a", Operation::Read);
    let all = [&lit_t, &lit_star, &pre_f, &pre_x, &group];
    let hits = |f: AclBindingFilter| -> Vec<AclBinding> {
        all.iter().filter(|b| f.matches(b)).map(|b| (*b).clone()).collect()
    };
    let t = ResourceType::Topic;
    assert_eq!(hits(AclBindingFilter::ANY).len(), 5);
    assert_eq!(hits(pattern_filter(t, None, Any)).len(), 4);
    // Any: every pattern type, but the name itself.
    assert_eq!(
        hits(pattern_filter(ResourceType::Any, Some("foo"), Any)),
        vec![lit_t.clone(), group.clone()]
    );
    // Match: the patterns that would match the resource `foo`.
    assert_eq!(
        hits(pattern_filter(t, Some("foo"), Match)),
        vec![lit_t.clone(), lit_star.clone(), pre_f.clone()]
    );
    assert_eq!(hits(pattern_filter(t, None, Match)).len(), 4);
    // Literal and Prefixed: that type and the name exactly.
    assert_eq!(hits(pattern_filter(t, Some("foo"), Literal)), vec![lit_t.clone()]);
    assert_eq!(hits(pattern_filter(t, Some("*"), Literal)), vec![lit_star.clone()]);
    assert_eq!(hits(pattern_filter(t, Some("foo"), Prefixed)), vec![]);
    assert_eq!(hits(pattern_filter(t, Some("fo"), Prefixed)), vec![pre_f.clone()]);
    assert_eq!(hits(pattern_filter(t, None, Prefixed)), vec![pre_f, pre_x]);
}

#[test]
fn entry_filters_match_as_kafka() {
    let b = AclBinding::new(
        ResourcePattern::literal(ResourceType::Topic, "t"),
        AccessControlEntry::new("User:alice", "10.0.0.1", Operation::Read, Permission::Deny),
    );
    let f = |principal: Option<&str>, host: Option<&str>, op, perm| AclBindingFilter {
        pattern: ResourcePatternFilter::ANY,
        entry: AccessControlEntryFilter {
            principal: principal.map(String::from),
            host: host.map(String::from),
            operation: op,
            permission: perm,
        },
    };
    use Operation as O;
    use Permission as P;
    assert!(f(Some("User:alice"), Some("10.0.0.1"), O::Read, P::Deny).matches(&b));
    assert!(f(None, None, O::Any, P::Any).matches(&b));
    // Wildcards in a filter match only wildcards: a filter is not a request.
    assert!(!f(Some("User:*"), None, O::Any, P::Any).matches(&b));
    assert!(!f(None, Some("*"), O::Any, P::Any).matches(&b));
    assert!(!f(None, None, O::All, P::Any).matches(&b));
    assert!(!f(None, None, O::Any, P::Allow).matches(&b));
    assert!(!f(Some("User:bob"), None, O::Any, P::Any).matches(&b));
}

#[test]
fn filter_validation_names_the_field() {
    let field = |f: AclBindingFilter| f.validate().unwrap_err().field().map(String::from);
    assert_eq!(AclBindingFilter::ANY.validate(), Ok(()));
    let mut f = AclBindingFilter::ANY;
    f.pattern.resource_type = ResourceType::Unknown;
    assert_eq!(field(f).as_deref(), Some("resourceType"));
    let mut f = AclBindingFilter::ANY;
    f.pattern.pattern_type = PatternType::from_code(42);
    assert_eq!(field(f).as_deref(), Some("patternType"));
    let mut f = AclBindingFilter::ANY;
    f.entry.operation = Operation::Unknown;
    assert_eq!(field(f).as_deref(), Some("operation"));
    let mut f = AclBindingFilter::ANY;
    f.entry.permission = Permission::Unknown;
    assert_eq!(field(f).as_deref(), Some("permissionType"));
}

#[test]
fn zk_keys_round_trip() {
    let lit = ResourcePattern::literal(ResourceType::Topic, "payments");
    assert_eq!(key_of(&lit), "/kafka-acl/Topic/payments");
    let pre = ResourcePattern::prefixed(ResourceType::TransactionalId, "tx-");
    assert_eq!(key_of(&pre), "/kafka-acl-extended/prefixed/TransactionalId/tx-");
    let group = ResourcePattern::literal(ResourceType::Group, "a/b/");
    let cluster = ResourcePattern::literal(ResourceType::Cluster, CLUSTER_NAME);
    assert_eq!(key_of(&cluster), "/kafka-acl/Cluster/kafka-cluster");
    for p in [lit, pre, group, cluster] {
        assert_eq!(parse_key(&key_of(&p)), Some(p));
    }
    let matching = ResourcePattern::new(ResourceType::Topic, "t", PatternType::Match);
    assert_eq!(key_of(&matching), "/kafka-acl-extended/match/Topic/t");
    assert_eq!(parse_key(&key_of(&matching)), None);
}

#[test]
fn zk_bad_keys() {
    for k in [
        "",
        "/kafka-acl/",
        "/kafka-acl/Topic",
        "/kafka-acl/Topic/",
        "/kafka-acl/TOPIC/t",
        "/kafka-acl/Topics/t",
        "/kafka-acl/Any/t",
        "/kafka-acl/Unknown/t",
        "/kafka-acl-changes/acl_changes_0000000001",
        "/kafka-acl-extended/literal/Topic/t",
        "/kafka-acl-extended/prefixed/Topic",
        "/brokers/topics/t",
    ] {
        assert_eq!(parse_key(k), None, "{k}");
    }
}

#[test]
fn zk_values_encode_as_kafka_writes_them() {
    let entries = vec![
        AccessControlEntry::new("User:alice", "*", Operation::Read, Permission::Allow),
        AccessControlEntry::new("User:\"q\"", "10.0.0.1", Operation::DescribeConfigs, Permission::Deny),
    ];
    let bytes = encode_acls(&entries);
    assert_eq!(
        String::from_utf8(bytes.clone()).unwrap(),
        r#"{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},{"principal":"User:\"q\"","permissionType":"Deny","operation":"DescribeConfigs","host":"10.0.0.1"}]}"#
    );
    assert_eq!(decode_acls(&bytes), Ok(entries));
    assert_eq!(encode_acls(&[]), br#"{"version":1,"acls":[]}"#);
    assert_eq!(decode_acls(b""), Ok(vec![]));
    // Kafka's own output may order fields differently, spell names in capitals, add fields.
    let kafka = br#"{"acls":[{"host":"*","operation":"IDEMPOTENT_WRITE","permissionType":"ALLOW","principal":"User:x","extra":1}],"version":1}"#;
    assert_eq!(
        decode_acls(kafka),
        Ok(vec![AccessControlEntry::new(
            "User:x",
            "*",
            Operation::IdempotentWrite,
            Permission::Allow
        )])
    );
}

fn decode_error_field(value: &str) -> Option<String> {
    decode_acls(value.as_bytes()).unwrap_err().field().map(String::from)
}

#[test]
fn zk_bad_values_name_the_field() {
    let entry = |principal: &str, perm: &str, op: &str, host: &str| {
        format!(
            r#"{{"version":1,"acls":[{{"principal":"User:a","permissionType":"Allow","operation":"Read","host":"*"}},{{"principal":{principal},"permissionType":{perm},"operation":{op},"host":{host}}}]}}"#
        )
    };
    let ok = entry(r#""User:b""#, r#""Deny""#, r#""Write""#, r#""*""#);
    assert_eq!(decode_acls(ok.as_bytes()).map(|v| v.len()), Ok(2));
    let cases = [
        ("not json", "value"),
        ("[]", "value"),
        (r#"{"acls":[]}"#, "version"),
        (r#"{"version":"1","acls":[]}"#, "version"),
        (r#"{"version":2,"acls":[]}"#, "version"),
        (r#"{"version":1}"#, "acls"),
        (r#"{"version":1,"acls":{}}"#, "acls"),
        (r#"{"version":1,"acls":[1]}"#, "acls[0]"),
        (
            &entry(r#""alice""#, r#""Deny""#, r#""Write""#, r#""*""#),
            "acls[1].principal",
        ),
        (&entry("7", r#""Deny""#, r#""Write""#, r#""*""#), "acls[1].principal"),
        (
            &entry(r#""User:b""#, r#""Any""#, r#""Write""#, r#""*""#),
            "acls[1].permissionType",
        ),
        (
            &entry(r#""User:b""#, r#""Maybe""#, r#""Write""#, r#""*""#),
            "acls[1].permissionType",
        ),
        (
            &entry(r#""User:b""#, r#""Deny""#, r#""Any""#, r#""*""#),
            "acls[1].operation",
        ),
        (
            &entry(r#""User:b""#, r#""Deny""#, r#""Reed""#, r#""*""#),
            "acls[1].operation",
        ),
        (&entry(r#""User:b""#, r#""Deny""#, r#""Write""#, "null"), "acls[1].host"),
    ];
    for (value, field) in cases {
        assert_eq!(decode_error_field(value).as_deref(), Some(field), "{value}");
    }
    let missing = r#"{"version":1,"acls":[{"principal":"User:a","operation":"Read","host":"*"}]}"#;
    let e = decode_acls(missing.as_bytes()).unwrap_err();
    assert_eq!(e.to_string(), "acls[0].permissionType: missing");
}

#[test]
fn zk_refuses_too_many_entries() {
    let one = r#"{"principal":"User:a","permissionType":"Allow","operation":"Read","host":"*"}"#;
    let value = |n: usize| format!(r#"{{"version":1,"acls":[{}]}}"#, vec![one; n].join(","));
    assert_eq!(
        decode_acls(value(MAX_ENTRIES).as_bytes()).map(|v| v.len()),
        Ok(MAX_ENTRIES)
    );
    let e = decode_acls(value(MAX_ENTRIES + 1).as_bytes()).unwrap_err();
    assert_eq!(e.field(), Some("acls"));
}

#[test]
fn bindings_from_a_range_read() {
    let alice = AccessControlEntry::new("User:alice", "*", Operation::Read, Permission::Allow);
    let bob = AccessControlEntry::new("User:bob", "*", Operation::All, Permission::Deny);
    let lit = ResourcePattern::literal(ResourceType::Topic, "t");
    let pre = ResourcePattern::prefixed(ResourceType::Group, "g-");
    let kvs = vec![
        (key_of(&lit), encode_acls(&[alice.clone(), bob.clone()])),
        ("/kafka-acl/Topic".to_string(), Vec::new()),
        (key_of(&pre), encode_acls(std::slice::from_ref(&alice))),
        ("/kafka-acl/Topic/bad".to_string(), b"{}".to_vec()),
    ];
    let (bindings, errors) = bindings_from_kvs(kvs);
    assert_eq!(
        bindings,
        vec![
            AclBinding::new(lit.clone(), alice.clone()),
            AclBinding::new(lit, bob),
            AclBinding::new(pre, alice),
        ]
    );
    assert_eq!(errors.len(), 2);
    assert_eq!(errors[0].0, "/kafka-acl/Topic");
    assert!(matches!(errors[0].1, AclError::Key(_)));
    assert_eq!(errors[1].0, "/kafka-acl/Topic/bad");
    assert_eq!(errors[1].1.field(), Some("version"));
    let a = Authorizer::new(bindings, Default::default(), false);
    assert!(
        a.authorize("User:alice", "1.2.3.4", Operation::Read, ResourceType::Group, "g-1")
            .allowed
    );
    assert!(
        !a.authorize("User:bob", "1.2.3.4", Operation::Read, ResourceType::Topic, "t")
            .allowed
    );
}

#[test]
fn error_messages_stay_short() {
    let long = format!("{}\u{e9}", "x".repeat(100));
    let b = binding(ResourceType::Topic, "t", PatternType::Literal, &long, Operation::Read);
    let msg = b.validate().unwrap_err().to_string();
    assert!(msg.len() < 150, "{msg}");
}

fn arb_entry() -> impl Strategy<Value = AccessControlEntry> {
    (
        "[A-Za-z]{1,5}:[^\u{0}]{1,8}",
        "\\PC{0,10}",
        prop::sample::select(Operation::VALUES[2..].to_vec()),
        prop::sample::select(vec![Permission::Allow, Permission::Deny]),
    )
        .prop_map(|(p, h, op, perm)| AccessControlEntry::new(p, h, op, perm))
}

proptest! {
    #[test]
    fn decode_and_parse_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256), key in "\\PC{0,40}") {
        let _ = decode_acls(&bytes);
        let _ = parse_key(&key);
        let _ = parse_key(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn decode_never_panics_on_near_values(
        mutations in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        entries in prop::collection::vec(arb_entry(), 0..4),
    ) {
        let mut bytes = encode_acls(&entries);
        for (i, b) in mutations {
            let at = i.index(bytes.len());
            bytes[at] = b;
        }
        let _ = decode_acls(&bytes);
    }

    #[test]
    fn values_round_trip(entries in prop::collection::vec(arb_entry(), 0..6)) {
        prop_assert_eq!(decode_acls(&encode_acls(&entries)), Ok(entries));
    }

    #[test]
    fn keys_round_trip(
        rt in prop::sample::select(ResourceType::VALUES[2..].to_vec()),
        name in "\\PC{1,20}",
        pt in prop::sample::select(vec![PatternType::Literal, PatternType::Prefixed]),
    ) {
        let p = ResourcePattern::new(rt, name, pt);
        prop_assert_eq!(parse_key(&key_of(&p)), Some(p));
    }
}
