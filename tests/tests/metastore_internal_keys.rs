//! The keys the cluster writes itself are refused to the generic KV API without the cluster
//! credential, and the credential itself cannot be read without it.

use metastore::ClientError;
use proto::metastore as pb;
use tests::{run_ferry, wait_for_file, Cluster};

fn permission_denied(e: &ClientError, what: &str) {
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
    assert!(e.to_string().contains(what), "{e} should name {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_prefixes_need_the_cluster_credential() {
    let c = Cluster::start(3).await;
    c.wait_leader().await;
    let trusted = c.trusted_client().await;
    let plain = c.client();

    for key in [
        "/brokers/ids/1",
        "/admin/reassign_cancel",
        "/config/brokers/1",
        "/controller",
        "/cluster/id",
    ] {
        let e = plain.put(key, "garbage").await.expect_err(key);
        permission_denied(&e, key.split('/').nth(1).unwrap());
        let e = plain.delete(key).await.expect_err(key);
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
    }
    let e = plain
        .delete_prefix("/")
        .await
        .expect_err("a prefix above the cluster's keys");
    permission_denied(&e, "/brokers");
    let txn = pb::TxnRequest {
        guards: vec![],
        ops: vec![
            pb::Op {
                op: Some(pb::op::Op::Put(pb::PutOp {
                    key: "/mine".into(),
                    value: "ok".into(),
                    lease: 0,
                })),
            },
            pb::Op {
                op: Some(pb::op::Op::Delete(pb::DeleteOp {
                    key: "/admin/reassignments/t/0".into(),
                })),
            },
        ],
        request_id: String::new(),
    };
    let e = plain.txn(txn.clone()).await.expect_err("an op on /admin");
    permission_denied(&e, "ops[1].delete.key");
    // Nothing of a refused transaction is written.
    assert!(plain.get("/mine").await.unwrap().is_none());

    // The credential is neither readable nor listed without itself.
    let e = plain
        .get(metastore::credential::CREDENTIAL_KEY)
        .await
        .expect_err("the credential");
    permission_denied(&e, "/cluster/credential");
    let listed = plain.range("/cluster/", 0).await.unwrap();
    assert!(listed
        .kvs
        .iter()
        .all(|kv| kv.key != metastore::credential::CREDENTIAL_KEY));
    // A watch from the first revision sees the cluster's later changes there, but not the
    // credential's creation.
    let mut watch = plain.watch("/cluster/", 1);
    trusted.put("/cluster/probe", "1").await.unwrap();
    loop {
        let msg = watch.recv().await.expect("the watch goes on").expect("no watch error");
        let keys: Vec<&str> = msg
            .events
            .iter()
            .filter_map(|e| e.kv.as_ref())
            .map(|kv| kv.key.as_str())
            .collect();
        assert!(!keys.contains(&metastore::credential::CREDENTIAL_KEY), "{keys:?}");
        if keys.contains(&"/cluster/probe") {
            break;
        }
    }

    // Other keys stay open, and a credentialed client may write the cluster's keys.
    plain.put("/hello", "world").await.unwrap();
    trusted.txn(txn).await.expect("a credentialed transaction");
    trusted.put("/brokers/ids/9", "repaired").await.unwrap();
    let cred = trusted
        .get(metastore::credential::CREDENTIAL_KEY)
        .await
        .unwrap()
        .unwrap();
    assert!(cred.value.len() >= 32);

    // The CLI: refused without the credential file, accepted with it.
    let bs = c.addrs.join(",");
    let (code, _, err) = tokio::task::block_in_place(|| {
        run_ferry(&["kv", "put", "/brokers/ids/1", "garbage", "--bootstrap-server", &bs])
    });
    assert_ne!(code, 0);
    assert!(err.contains("/brokers is written by the cluster itself"), "{err}");
    let file = c.credential_file();
    let (code, out, err) = tokio::task::block_in_place(|| {
        wait_for_file(&file);
        run_ferry(&[
            "kv",
            "put",
            "/brokers/ids/9",
            "again",
            "--bootstrap-server",
            &bs,
            "--cluster-credential-file",
            &file,
        ])
    });
    assert_eq!(code, 0, "{out}{err}");
    c.shutdown().await;
}

/// A proposal that puts `/brokers/ids/1`, as a peer would forward it to the leader.
fn forged_proposal() -> proto::raft::RaftPayload {
    use metastore::types::{encode_segment, Command, CommandKind, Op, Proposal, Txn};
    let cmd = Command {
        request_id: None,
        kind: CommandKind::Txn(Txn {
            guards: vec![],
            ops: vec![Op::Put {
                key: "/brokers/ids/1".into(),
                value: "garbage".into(),
                lease: 0,
            }],
        }),
    };
    let proposal = Proposal {
        segments: vec![encode_segment(&[cmd])],
    };
    proto::raft::RaftPayload {
        data: metastore::codec::encode(&proposal).into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_raft_port_refuses_callers_without_the_cluster_credential() {
    use proto::raft::raft_client::RaftClient;
    let c = Cluster::start(3).await;
    let leader = c.wait_leader().await;
    let trusted = c.trusted_client().await;
    let token = c.nodes[leader].as_ref().unwrap().cluster_credential().await;
    // Every node learns the credential once it has applied it.
    let applied = trusted.put("/synced", "1").await.unwrap();
    c.wait_revision(applied).await;
    for addr in &c.addrs {
        let url = format!("http://{addr}");
        tests::wait_until(
            std::time::Duration::from_secs(10),
            "every node asks for the credential",
            || {
                let url = url.clone();
                async move {
                    let mut peer = RaftClient::connect(url).await.unwrap();
                    let r = peer.read_index(proto::raft::ReadIndexRequest {}).await;
                    r.is_err_and(|e| e.code() == tonic::Code::Unauthenticated)
                }
            },
        )
        .await;
    }

    let mut raft = RaftClient::connect(format!("http://{}", c.addrs[leader]))
        .await
        .unwrap();
    let e = raft.propose(forged_proposal()).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
    assert!(e.message().contains("cluster credential"), "{e}");
    let mut wrong = tonic::Request::new(forged_proposal());
    wrong
        .metadata_mut()
        .insert("x-ferry-credential", "0".repeat(64).parse().unwrap());
    let e = raft.propose(wrong).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
    for i in 0..c.addrs.len() {
        let mut peer = RaftClient::connect(format!("http://{}", c.addrs[i])).await.unwrap();
        let e = peer
            .vote(proto::raft::RaftPayload { data: vec![].into() })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "node {i}: {e}");
        let e = peer.read_index(proto::raft::ReadIndexRequest {}).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "node {i}: {e}");
    }
    assert!(
        trusted.get("/brokers/ids/1").await.unwrap().is_none(),
        "a refused proposal was written"
    );

    // The cluster's own nodes give it: the same proposal with the credential is served. A
    // young cluster may still change leader, and a node that just lost the lead answers
    // NotLeader inside the payload, so it goes to whichever node leads until it is written.
    tests::wait_until(
        std::time::Duration::from_secs(10),
        "the credentialed proposal written",
        || async {
            let at = &c.addrs[c.wait_leader().await];
            let mut raft = RaftClient::connect(format!("http://{at}")).await.unwrap();
            let mut given = tonic::Request::new(forged_proposal());
            given
                .metadata_mut()
                .insert("x-ferry-credential", token.parse().unwrap());
            let served = raft.propose(given).await;
            assert!(
                !served.as_ref().is_err_and(|e| e.code() == tonic::Code::Unauthenticated),
                "a peer's credential was refused: {served:?}"
            );
            trusted.get("/brokers/ids/1").await.is_ok_and(|v| v.is_some())
        },
    )
    .await;
    c.shutdown().await;
}

/// A founding node that starts after its peers formed the cluster has not learned the
/// credential, so they refuse its votes. It used to campaign again and again, and the peers,
/// seeing its ever higher term in its answers, lost their leader for many seconds. Now it
/// stays out of elections until the leader's appends give it the credential.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_founder_without_the_credential_does_not_keep_the_cluster_leaderless() {
    use std::collections::BTreeMap;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let peers: BTreeMap<u64, String> = (1..=3)
        .map(|id| (id, format!("127.0.0.1:{}", tests::free_port())))
        .collect();
    let config = |id: u64| {
        let mut cfg = metastore::NodeConfig::new(
            id,
            dir.path().join(format!("n{id}")),
            tests::sock(&peers[&id]),
            peers.clone(),
        );
        cfg.raft = tests::test_tuning();
        cfg
    };
    let n1 = metastore::start(config(1)).await.unwrap();
    let n2 = metastore::start(config(2)).await.unwrap();
    let token = tokio::time::timeout(Duration::from_secs(30), n1.cluster_credential())
        .await
        .expect("nodes 1 and 2 form the cluster and create its credential");
    let term_before = n1.raft.metrics().borrow().current_term;

    let n3 = metastore::start(config(3)).await.unwrap();
    let learned = tokio::time::timeout(Duration::from_secs(30), n3.cluster_credential())
        .await
        .expect("the late node learns the credential from the leader");
    assert_eq!(learned, token);
    // Writes go through the late node and every node agrees on one leader.
    let client = metastore::Client::new(&[peers[&3].clone()]).unwrap();
    client.put("/after", "late").await.unwrap();
    let leaders: Vec<_> = [&n1, &n2, &n3]
        .iter()
        .map(|n| n.raft.metrics().borrow().current_leader)
        .collect();
    assert!(
        leaders[0].is_some() && leaders.iter().all(|l| *l == leaders[0]),
        "{leaders:?}"
    );
    // The late node's one try at the start may cost an election or two, not one a second.
    let term_after = n1.raft.metrics().borrow().current_term;
    assert!(
        term_after <= term_before + 3,
        "the term went from {term_before} to {term_after} while node 3 joined"
    );
    for n in [n1, n2, n3] {
        n.shutdown().await;
    }
}
