//! Ferry's reassignment through Kafka's own admin APIs, driven by kafka-python's admin client
//! against any broker: a topic is created (and refused the second time), its configs changed
//! with APPEND, SUBTRACT and the legacy replace-all AlterConfigs, it grows by a partition (and
//! a shrink is refused), a partition's move is
//! submitted, listed while a throttle holds it, cancelled back to its original replicas (along
//! with a partition that is not moving, answered alone), and a second cancel finds nothing to
//! cancel. DescribeCluster lists the brokers.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use proto::ferry::{AlterThrottlesRequest, BrokerThrottle, TopicThrottle};
use tests::data::partition_state;

/// Runs one step of the kafka-python admin script; its JSON answer.
fn admin(bootstrap: &str, step: &str) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/kafka_admin.py");
    let out = Command::new("timeout")
        .arg("120")
        .arg("python3")
        .arg(&script)
        .args([bootstrap, step])
        .output()
        .expect("running kafka-python (tools/test.sh installs it)");
    assert!(
        out.status.success(),
        "kafka-python {step} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_creates_moves_lists_and_cancels_through_any_broker() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let kafka = |id: i32| k.addr(id);
    let c = four.client.clone();
    // Broker 3 takes the admin requests: it forwards them to the controller.
    let via = kafka(3);

    let created = admin(&via, "create");
    assert_eq!(created["again"], "TopicAlreadyExistsError", "{created}");
    // Configs: APPEND and SUBTRACT on a list, then the legacy AlterConfigs replaces them all.
    let configs = admin(&via, "configs");
    assert_eq!(
        configs["after_append_subtract"],
        serde_json::json!({"leader.replication.throttled.replicas": "0:2,1:1", "retention.ms": "86400000"}),
        "{configs}"
    );
    assert_eq!(
        configs["after_replace"],
        serde_json::json!({"leader.replication.throttled.replicas": "0:2,1:1", "retention.ms": "5000"}),
        "{configs}"
    );
    assert_eq!(
        configs["after_reset"],
        serde_json::json!({"retention.ms": "5000"}),
        "{configs}"
    );
    assert_eq!(configs["alters"], serde_json::json!(vec!["OK"; 5]), "{configs}");
    let refused = configs["append_to_non_list"].as_str().unwrap();
    assert!(
        refused.contains("InvalidConfigurationError") && refused.contains("retention.ms"),
        "{configs}"
    );
    // CreatePartitions: one more partition; a shrink is refused.
    let grown = admin(&via, "grow");
    assert_eq!(grown["shrink"], "InvalidPartitionsError", "{grown}");
    assert!(partition_state(&c, "adm", 1).await.is_some(), "adm-1 created");
    tests::wait_until(Duration::from_secs(30), "adm-0 led with both replicas in sync", || {
        tests::data::isr_is(&c, "adm", 0, &[1, 2])
    })
    .await;
    // The broker that answers names itself controller: it takes admin requests.
    let cluster = admin(&via, "cluster");
    assert_eq!(cluster["brokers"], serde_json::json!([1, 2, 3, 4]), "{cluster}");
    assert!((1..=4).contains(&cluster["controller"].as_i64().unwrap()), "{cluster}");

    // About 6 MB, and broker 4 may fetch 100 KB/s: the move to it lasts, so it can be listed
    // and cancelled.
    tests::reassign::produce_n(&c, "adm", 0, 60, 100, 1000).await;
    let throttle = AlterThrottlesRequest {
        brokers: vec![BrokerThrottle {
            broker: 4,
            leader_rate: None,
            follower_rate: Some(100_000),
            auto_remove: false,
        }],
        topics: vec![TopicThrottle {
            topic: "adm".into(),
            follower_replicas: Some("0:4".into()),
            ..Default::default()
        }],
        validate_only: false,
    };
    let r = c
        .admin_call(|mut a| {
            let req = throttle.clone();
            async move { a.alter_throttles(req).await }
        })
        .await
        .unwrap();
    assert_eq!(r.error_code, 0, "{r:?}");

    assert_eq!(admin(&via, "move"), serde_json::json!({"moved": [["adm", 0, null]]}));
    let listed = admin(&via, "list");
    let moving = &listed["moving"][0];
    assert_eq!(
        (&moving[0], &moving[1]),
        (&serde_json::json!("adm"), &serde_json::json!(0)),
        "{listed}"
    );
    assert_eq!(moving[2]["adding_replicas"], serde_json::json!([4]), "{listed}");
    assert_eq!(moving[2]["removing_replicas"], serde_json::json!([2]), "{listed}");

    let cancelled = admin(&via, "cancel");
    assert_eq!(
        cancelled["cancelled"],
        serde_json::json!([["adm", 0, null], ["adm", 1, "NoReassignmentInProgressError"]]),
        "{cancelled}"
    );
    assert_eq!(
        cancelled["again"],
        serde_json::json!([["adm", 0, "NoReassignmentInProgressError"]]),
        "{cancelled}"
    );
    tests::wait_until(Duration::from_secs(30), "adm-0 back on brokers 1 and 2", || {
        let c = c.clone();
        async move {
            partition_state(&c, "adm", 0)
                .await
                .is_some_and(|s| s.replicas == [1, 2] && s.adding.is_empty())
        }
    })
    .await;
    assert_eq!(admin(&via, "list"), serde_json::json!({"moving": []}));
    drop(four);
}
