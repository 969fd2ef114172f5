//! ACLs and SCRAM credentials move with `ferry migrate-zk`. Kafka 3.9's own tools, in ZooKeeper
//! mode, make the users (`kafka-configs --zookeeper`) and the ACLs (`kafka-acls
//! --authorizer-properties zookeeper.connect=...`); topics are Kafka's znodes written here.
//! `--dry-run` lists every binding and every user's mechanisms without a salt or key, the
//! import writes them, and `--verify` finds no difference. On Ferry brokers with SASL and the
//! authorizer on, alice then logs in with her Kafka password (SCRAM-SHA-512 and SCRAM-SHA-256),
//! reads t1 in group g1, and cannot see t2. Changes made in Ferry afterwards are what
//! `--verify` reports, a credential by user and mechanism only. A malformed ACL znode, a
//! malformed credential and a user znode that ZooKeeper's own ACL hides are named with their
//! reasons, and `--skip-invalid` imports the rest.

use std::time::Duration;

use tests::kafka::tool;
use tests::kafka_zk::run_tool;
use tests::reassign::snapshot;
use tests::zk::{dump, write_tree, ZkServer};

const CHROOT: &str = "/kafka";

/// The cluster's own znodes, in Kafka's JSON: its id, and topics t1 (on brokers 1 and 2) and
/// t2 (on brokers 3 and 4) with their partition states.
fn cluster_znodes(id: &str) -> Vec<(String, Vec<u8>)> {
    let topic = |t: &str, replicas: &str, leader: i32| {
        [
            (
                format!("/brokers/topics/{t}"),
                format!(
                    r#"{{"partitions":{{"0":[{replicas}]}},"adding_replicas":{{}},"removing_replicas":{{}},"version":2}}"#
                ),
            ),
            (
                format!("/brokers/topics/{t}/partitions/0/state"),
                format!(
                    r#"{{"controller_epoch":1,"leader":{leader},"version":1,"leader_epoch":0,"isr":[{replicas}]}}"#
                ),
            ),
        ]
    };
    let mut nodes = vec![
        ("/cluster/id".to_string(), format!(r#"{{"version":"1","id":"{id}"}}"#)),
        ("/controller_epoch".to_string(), "1".to_string()),
    ];
    nodes.extend(topic("t1", "1,2", 1));
    nodes.extend(topic("t2", "3,4", 3));
    nodes.into_iter().map(|(p, d)| (p, d.into_bytes())).collect()
}

/// Runs `ferry migrate-zk` as an operator does: ZooKeeper with its chroot, the metastore, and
/// the cluster credential (the import writes keys the cluster keeps for itself).
fn migrate(zk: &str, quorum: &str, credential: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "migrate-zk",
        "--zookeeper",
        zk,
        "--bootstrap-server",
        quorum,
        "--cluster-credential-file",
        credential,
    ];
    args.extend_from_slice(extra);
    tokio::task::block_in_place(|| {
        tests::wait_for_file(credential);
        tests::run_ferry(&args)
    })
}

/// Runs a Kafka 3.9 tool against ZooKeeper and checks that it succeeded.
fn kafka39(name: &str, args: &[&str]) -> String {
    let (ok, out) = tokio::task::block_in_place(|| run_tool(name, args, ""));
    assert!(ok, "{name} {args:?}: {out}");
    out
}

/// The base64 values of every SCRAM credential of a `/config/users/<u>` znode: the text that
/// must never be printed.
fn secrets_of(znode: &[u8]) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(znode).unwrap();
    let mut out = Vec::new();
    for (k, text) in v["config"].as_object().unwrap() {
        if k.starts_with("SCRAM-") {
            for part in text.as_str().unwrap().split(',') {
                let (name, value) = part.split_once('=').unwrap();
                if name != "iterations" {
                    out.push(value.to_string());
                }
            }
        }
    }
    assert_eq!(out.len() % 3, 0);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_and_scram_users_move_from_zookeeper_and_alice_logs_in_to_ferry() {
    let zk = ZkServer::start().await;
    let zkc = zk.client().await;
    write_tree(&zkc, CHROOT, &cluster_znodes("kafka-sec-1")).await;
    let zk_kafka = format!("{}{CHROOT}", zk.addr);

    // Kafka 3.9's tools write the users and ACLs into ZooKeeper themselves.
    kafka39(
        "kafka-configs",
        &[
            "--zookeeper",
            &zk_kafka,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "admin",
            "--add-config",
            "SCRAM-SHA-512=[password=admin-secret]",
        ],
    );
    kafka39(
        "kafka-configs",
        &[
            "--zookeeper",
            &zk_kafka,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--add-config",
            "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]",
        ],
    );
    let authorizer = format!("zookeeper.connect={zk_kafka}");
    let acls: &[&[&str]] = &[
        &[
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--topic",
            "t1",
            "--group",
            "g1",
        ],
        &[
            "--allow-principal",
            "User:alice",
            "--operation",
            "Write",
            "--topic",
            "logs-",
            "--resource-pattern-type",
            "prefixed",
        ],
        &[
            "--deny-principal",
            "User:alice",
            "--deny-host",
            "10.0.0.1",
            "--operation",
            "Read",
            "--topic",
            "t1",
        ],
    ];
    for acl in acls {
        let mut args = vec!["--authorizer-properties", authorizer.as_str(), "--add"];
        args.extend_from_slice(acl);
        kafka39("kafka-acls", &args);
    }
    let (alice_znode, _) = zkc.get_data(&format!("{CHROOT}/config/users/alice")).await.unwrap();
    let (admin_znode, _) = zkc.get_data(&format!("{CHROOT}/config/users/admin")).await.unwrap();
    let secrets: Vec<String> = secrets_of(&alice_znode)
        .into_iter()
        .chain(secrets_of(&admin_znode))
        .collect();
    assert_eq!(secrets.len(), 9, "two credentials of alice, one of admin");
    // Kafka also wrote its change notifications beside the ACLs; they are not ACLs.
    assert!(!zkc
        .list_children(&format!("{CHROOT}/kafka-acl-changes"))
        .await
        .unwrap()
        .is_empty());

    // Another Kafka's ZooKeeper with a malformed ACL znode and credential beside good ones.
    let mut broken = cluster_znodes("kafka-broken");
    let (t1_acls, _) = zkc.get_data(&format!("{CHROOT}/kafka-acl/Topic/t1")).await.unwrap();
    let bad_text = String::from_utf8(alice_znode.clone())
        .unwrap()
        .replace("iterations=4096", "iterations=100");
    broken.extend([
        ("/kafka-acl/Topic/t1".to_string(), t1_acls),
        (
            "/kafka-acl/Topic/t2".to_string(),
            br#"{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","host":"*","operation":"Read"}]}"#
                .to_vec(),
        ),
        ("/config/users/mallory".to_string(), bad_text.into_bytes()),
        ("/config/users/admin".to_string(), admin_znode.clone()),
    ]);
    write_tree(&zkc, "/broken", &broken).await;
    // And a user znode only its creator may read, as Kafka leaves `/config/users` with
    // zookeeper.set.acl=true.
    let owner = zookeeper_client::Client::connector()
        .with_auth("digest", b"kafka:kafka-secret")
        .connect(&zk.addr)
        .await
        .unwrap();
    let creator_only = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::creator_all());
    owner
        .create("/broken/config/users/carol", &alice_znode, &creator_only)
        .await
        .unwrap();
    let zk_before = dump(&zkc, CHROOT).await;

    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start_with_acls(dir.path()).await;
    let b = k.bootstrap();
    let quorum = (1..=3)
        .map(|id| four.nodes[&id].addr.clone())
        .collect::<Vec<_>>()
        .join(",");
    let credential = tests::credential_file(&dir.path().join("n1"));
    let before = snapshot(&four.meta).await;

    // The broken ZooKeeper: each bad znode named with why, nothing written; --skip-invalid
    // leaves them out and keeps the rest.
    let broken_zk = format!("{}/broken", zk.addr);
    let (code, out, err) = migrate(&broken_zk, &quorum, &credential, &["--dry-run"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("error: /config/users/mallory: SCRAM-SHA-512: SCRAM iterations 100 out of range 4096..=16384\n")
            && err.contains("error: /kafka-acl/Topic/t2: acls[0].principal: \"alice\" is not of the form Type:name\n")
            && err.contains("error: /config/users/carol: ZooKeeper refused to read it (NoAuth")
            && err.contains("Nothing was imported: 3 znode(s) are malformed"),
        "{err}"
    );
    let (code, out, err) = migrate(&broken_zk, &quorum, &credential, &["--dry-run", "--skip-invalid"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Skipped: /config/users/mallory: "), "{out}");
    assert!(out.contains("Skipped: /kafka-acl/Topic/t2: "), "{out}");
    assert!(out.contains("Skipped: /config/users/carol: "), "{out}");
    assert!(out.contains("/kafka-acl/Topic/t1 ResourcePattern("), "{out}");
    assert!(
        out.contains("user-principal 'admin'") && !out.contains("'mallory'"),
        "{out}"
    );
    for s in &secrets {
        assert!(
            !out.contains(s.as_str()) && !err.contains(s.as_str()),
            "a secret is printed:\n{out}{err}"
        );
    }

    // --dry-run lists each binding and each user's mechanisms, and writes nothing.
    let (code, out, err) = migrate(&zk_kafka, &quorum, &credential, &["--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    for want in [
        "/kafka-acl/Topic/t1 ResourcePattern(resourceType=TOPIC, name=t1, patternType=LITERAL) (principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n",
        "/kafka-acl/Topic/t1 ResourcePattern(resourceType=TOPIC, name=t1, patternType=LITERAL) (principal=User:alice, host=10.0.0.1, operation=READ, permissionType=DENY)\n",
        "/kafka-acl/Group/g1 ResourcePattern(resourceType=GROUP, name=g1, patternType=LITERAL) (principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n",
        "/kafka-acl-extended/prefixed/Topic/logs- ResourcePattern(resourceType=TOPIC, name=logs-, patternType=PREFIXED) (principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n",
        "SCRAM credential configs for user-principal 'admin' are SCRAM-SHA-512=iterations=4096\n",
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n",
        "Would import cluster kafka-sec-1: 2 topics (0 being deleted), 2 partitions, 0 reassignments in flight (0 with a throttle that goes with them), 0 broker configs, 4 ACL bindings, 2 SCRAM users.\n",
    ] {
        assert!(out.contains(want), "wanted {want:?} in:\n{out}");
    }
    assert!(!out.contains("acl_changes"), "{out}");
    println!("--dry-run:\n{out}");
    for s in &secrets {
        assert!(
            !out.contains(s.as_str()) && !err.contains(s.as_str()),
            "a secret is printed:\n{out}{err}"
        );
    }
    assert_eq!(snapshot(&four.meta).await, before, "a dry run writes nothing");

    // The import, then --verify; a re-run finds everything in place.
    let (code, out, err) = migrate(&zk_kafka, &quorum, &credential, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("Imported cluster kafka-sec-1: 2 topics") && out.contains(", 4 ACL bindings, 2 SCRAM users:"),
        "{out}"
    );
    let (code, out, err) = migrate(&zk_kafka, &quorum, &credential, &["--verify"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("No differences"), "{out}");
    let (code, out, err) = migrate(&zk_kafka, &quorum, &credential, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("Nothing changed"), "{out}");

    // Ferry's brokers serve the imported topics to the imported users.
    for t in ["t1", "t2"] {
        let isr: &[i32] = if t == "t1" { &[1, 2] } else { &[3, 4] };
        tests::wait_until(Duration::from_secs(60), "the imported partition in sync", || {
            tests::data::isr_is(&four.client, t, 0, isr)
        })
        .await;
    }
    let admin = tests::kafka::scram_properties(dir.path(), "admin", "admin-secret", "SCRAM-SHA-512");
    let alice = tests::kafka::scram_properties(dir.path(), "alice", "alice-secret", "SCRAM-SHA-512");
    let alice256 = tests::kafka::scram_properties(dir.path(), "alice", "alice-secret", "SCRAM-SHA-256");
    let run = |props: &str, name: &str, args: &[&str], input: &str| {
        let mut all = vec!["--bootstrap-server", b.as_str(), "--command-config", props];
        all.extend_from_slice(args);
        tokio::task::block_in_place(|| tool(name, &all, input))
    };
    let (ok, out) = run(&admin, "kafka-console-producer", &["--topic", "t1"], "a\nb\nc\n");
    assert!(ok, "{out}");
    let (ok, out) = run(
        &alice,
        "kafka-console-consumer",
        &[
            "--topic",
            "t1",
            "--group",
            "g1",
            "--from-beginning",
            "--max-messages",
            "3",
            "--timeout-ms",
            "30000",
        ],
        "",
    );
    assert!(ok, "{out}");
    assert_eq!(out.lines().filter(|l| ["a", "b", "c"].contains(l)).count(), 3, "{out}");
    for props in [&alice, &alice256] {
        let (ok, out) = run(props, "kafka-topics", &["--list"], "");
        assert!(ok, "{out}");
        assert_eq!(
            out.lines().filter(|l| l.starts_with('t')).collect::<Vec<_>>(),
            ["t1"],
            "alice sees t1 only: {out}"
        );
    }
    let (ok, out) = run(&alice, "kafka-topics", &["--describe", "--topic", "t2"], "");
    assert!(!ok, "alice may not describe t2: {out}");
    let wrong = tests::kafka::scram_properties(dir.path(), "alice", "not-her-password", "SCRAM-SHA-256");
    let (ok, out) = run(&wrong, "kafka-topics", &["--list"], "");
    assert!(!ok && out.contains("Authentication failed"), "{out}");

    // Changed in Ferry afterwards: --verify names the ACL entry, and the credential by user and
    // mechanism only.
    let (ok, out) = run(
        &admin,
        "kafka-acls",
        &[
            "--remove",
            "--force",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--group",
            "g1",
        ],
        "",
    );
    assert!(ok, "{out}");
    let (ok, out) = run(
        &admin,
        "kafka-configs",
        &[
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--add-config",
            "SCRAM-SHA-512=[password=alice-new-secret]",
        ],
        "",
    );
    assert!(ok, "{out}");
    let (code, out, err) = migrate(&zk_kafka, &quorum, &credential, &["--verify"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("/kafka-acl/Group/g1: (principal=User:alice, host=*, operation=READ, permissionType=ALLOW) in ZooKeeper, missing in Ferry\n"),
        "{out}"
    );
    assert!(
        out.contains("/config/scram/alice: user alice SCRAM-SHA-512: differs in salt, stored_key, server_key\n"),
        "{out}"
    );
    assert!(
        !out.contains("SCRAM-SHA-256:"),
        "alice's SCRAM-SHA-256 is unchanged: {out}"
    );
    for s in &secrets {
        assert!(
            !out.contains(s.as_str()) && !err.contains(s.as_str()),
            "a secret is printed:\n{out}{err}"
        );
    }
    println!("--verify after the changes in Ferry:\n{out}");

    assert_eq!(dump(&zkc, CHROOT).await, zk_before, "ZooKeeper is only read");
}
