//! Bad input: each bad request gets a clear error naming the field, and changes nothing.

use proto::metastore as pb;
use proto::raft::raft_client::RaftClient;
use tests::Cluster;
use tonic::Code;

fn put_op(key: &str, value: &str) -> pb::Op {
    pb::Op {
        op: Some(pb::op::Op::Put(pb::PutOp {
            key: key.into(),
            value: value.to_string().into(),
            lease: 0,
        })),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_with_the_field_named_and_change_nothing() {
    let c = Cluster::start_with(3, |cfg| {
        cfg.limits.max_value_bytes = 1024;
        cfg.limits.max_txn_ops = 10;
        cfg.limits.max_txn_bytes = 4096;
    })
    .await;
    let client = c.client();
    client.put("/keep", "1").await.unwrap();
    let before = client.range("/", 0).await.unwrap();
    let rev_before = before.header.unwrap().revision;

    let cases: Vec<(&str, pb::TxnRequest, &str)> = vec![
        (
            "empty key",
            pb::TxnRequest {
                ops: vec![put_op("", "x")],
                ..Default::default()
            },
            "ops[0].put.key",
        ),
        (
            "not a path",
            pb::TxnRequest {
                ops: vec![put_op("a/b", "x")],
                ..Default::default()
            },
            "ops[0].put.key",
        ),
        (
            "empty segment",
            pb::TxnRequest {
                ops: vec![put_op("/a//b", "x")],
                ..Default::default()
            },
            "ops[0].put.key",
        ),
        (
            "trailing slash",
            pb::TxnRequest {
                ops: vec![put_op("/a/", "x")],
                ..Default::default()
            },
            "ops[0].put.key",
        ),
        (
            "value too big",
            pb::TxnRequest {
                ops: vec![put_op("/a", &"x".repeat(2000))],
                ..Default::default()
            },
            "ops[0].put.value",
        ),
        (
            "too many ops",
            pb::TxnRequest {
                ops: (0..11).map(|i| put_op(&format!("/o/{i}"), "x")).collect(),
                ..Default::default()
            },
            "ops",
        ),
        (
            "txn too big",
            pb::TxnRequest {
                ops: (0..8).map(|i| put_op(&format!("/o/{i}"), &"y".repeat(1000))).collect(),
                ..Default::default()
            },
            "ops",
        ),
        (
            "guard without check",
            pb::TxnRequest {
                guards: vec![pb::Guard {
                    key: "/keep".into(),
                    check: None,
                }],
                ops: vec![put_op("/a", "x")],
                ..Default::default()
            },
            "guards[0]",
        ),
        (
            "guard on a bad key",
            pb::TxnRequest {
                guards: vec![pb::Guard {
                    key: "keep".into(),
                    check: Some(pb::guard::Check::Exists(true)),
                }],
                ops: vec![],
                ..Default::default()
            },
            "guards[0].key",
        ),
        (
            "op without operation",
            pb::TxnRequest {
                ops: vec![put_op("/a", "x"), pb::Op { op: None }],
                ..Default::default()
            },
            "ops[1]",
        ),
    ];
    for (name, req, field) in cases {
        let err = client.txn(req).await.expect_err(name);
        assert_eq!(err.code(), Code::InvalidArgument, "{name}: {err}");
        assert!(err.to_string().starts_with(field), "{name}: {err} should name {field}");
    }

    let err = client.put("", "x").await.unwrap_err();
    assert!(err.to_string().starts_with("key: the key is empty"), "{err}");
    let err = client.put("/big", vec![0u8; 5000]).await.unwrap_err();
    assert!(err.to_string().contains("over the limit of 1024"), "{err}");
    let err = client.get("nope").await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = client.range("", 0).await.unwrap_err();
    assert!(err.to_string().starts_with("prefix:"), "{err}");
    let err = client.delete_prefix("x").await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = client.lease_grant(0).await.unwrap_err();
    assert!(err.to_string().starts_with("ttl_ms:"), "{err}");
    let mut rx = client.watch("no-slash", 0);
    let err = rx.recv().await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = client.member_promote(99).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    // Garbage on the internal Raft port is refused, even from a caller with the cluster
    // credential, and the node lives on.
    let token = c.nodes[0].as_ref().unwrap().cluster_credential().await;
    let mut raft = RaftClient::connect(format!("http://{}", c.addrs[0])).await.unwrap();
    for data in [vec![], vec![1u8, 0xff, 0xff, 0xff], vec![9u8; 64]] {
        let mut req = tonic::Request::new(proto::raft::RaftPayload { data: data.into() });
        req.metadata_mut().insert("x-ferry-credential", token.parse().unwrap());
        let err = raft.append_entries(req).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    }

    let after = client.range("/", 0).await.unwrap();
    assert_eq!(after.kvs, before.kvs, "a refused request changed the store");
    assert_eq!(
        after.header.unwrap().revision,
        rev_before,
        "a refused request reached the log"
    );
    c.shutdown().await;
}
