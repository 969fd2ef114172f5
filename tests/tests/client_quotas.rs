//! Client quotas with Kafka 4.x's own tools: `kafka-configs --entity-type clients|users` sets,
//! describes and removes quotas (AlterClientQuotas and DescribeClientQuotas), refuses bad values
//! by their key, and a producer whose client id has a `producer_byte_rate` is throttled by the
//! brokers: its produce answers carry a throttle time, which Kafka's producer reports in its
//! `produce-throttle-time-max` metric. A producer with another client id is not throttled. A
//! consumer over a `consumer_byte_rate` (set on the default user and its client id) is
//! throttled too, and reports it in `fetch-throttle-time-max`.

use tests::kafka::tool;

/// Runs `kafka-configs` against `b` with `args`; whether it succeeded and what it printed.
fn configs(b: &str, args: &[&str]) -> (bool, String) {
    let mut all = vec!["--bootstrap-server", b];
    all.extend_from_slice(args);
    tool("kafka-configs", &all, "")
}

/// Produces 14 records of 1,000 bytes to `topic` as `client_id`, one record per request, and
/// returns the producer's largest reported produce throttle time, in ms.
fn produce_throttle_max(b: &str, topic: &str, client_id: &str) -> f64 {
    let bootstrap = format!("bootstrap.servers={b}");
    let client = format!("client.id={client_id}");
    let (ok, out) = tool(
        "kafka-producer-perf-test",
        &[
            "--topic",
            topic,
            "--num-records",
            "14",
            "--record-size",
            "1000",
            "--throughput",
            "-1",
            "--print-metrics",
            "--producer-props",
            &bootstrap,
            &client,
            "acks=1",
            // One record per request, so the broker sees the rate grow request by request.
            "batch.size=1024",
        ],
        "",
    );
    assert!(ok && out.contains("14 records sent"), "{out}");
    let metric = "producer-metrics:produce-throttle-time-max:";
    let line = out
        .lines()
        .find(|l| l.starts_with(metric) && l.contains(&format!("client-id={client_id}")))
        .unwrap_or_else(|| panic!("no {metric} line:\n{out}"));
    // The producer's own summary, for a failure's log.
    eprintln!(
        "{client_id}: {}",
        out.lines().find(|l| l.contains("records sent")).unwrap_or("")
    );
    eprintln!("{client_id}: {line}");
    line.rsplit(':')
        .next()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("unreadable metric line {line:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_configs_sets_client_quotas_and_the_brokers_throttle_that_client_only() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let c = four.client.clone();
    let b = k.bootstrap();
    let b = b.as_str();
    tests::kafka::create_on_1_and_2(&c, b, None, "quota", &[]).await;

    // Set, then describe, a client-id quota.
    let (ok, out) = configs(
        b,
        &[
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            "c1",
            "--add-config",
            "producer_byte_rate=1024",
        ],
    );
    assert!(ok && out.contains("Completed updating config for client c1."), "{out}");
    let (ok, out) = configs(b, &["--describe", "--entity-type", "clients", "--entity-name", "c1"]);
    assert!(
        ok && out.contains("Quota configs for client-id 'c1' are producer_byte_rate=1024.0"),
        "{out}"
    );

    // Bad values are refused naming the key, and change nothing.
    for (bad, why) in [
        ("producer_byte_rate=-5", "producer_byte_rate must be greater than 0"),
        (
            "consumer_byte_rate=1.5",
            "consumer_byte_rate cannot be a fractional value",
        ),
        ("request_percentage=50", "request_percentage is not supported"),
    ] {
        let (ok, out) = configs(
            b,
            &[
                "--alter",
                "--entity-type",
                "clients",
                "--entity-name",
                "c1",
                "--add-config",
                bad,
            ],
        );
        assert!(!ok && out.contains(why), "{bad}: {out}");
    }

    // A default user quota (every connection's principal is ANONYMOUS), described alone.
    let (ok, out) = configs(
        b,
        &[
            "--alter",
            "--entity-type",
            "users",
            "--entity-default",
            "--add-config",
            "consumer_byte_rate=1048576",
        ],
    );
    assert!(
        ok && out.contains("Completed updating default config for users"),
        "{out}"
    );
    let (ok, out) = configs(b, &["--describe", "--entity-type", "users", "--entity-default"]);
    assert!(
        ok && out.contains("Quota configs for the default user-principal are consumer_byte_rate=1048576.0"),
        "{out}"
    );
    // A named user: describing one also asks for its SCRAM credentials, of which there are none.
    let (ok, out) = configs(
        b,
        &[
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--add-config",
            "producer_byte_rate=4096",
        ],
    );
    assert!(ok && out.contains("Completed updating config for user alice."), "{out}");
    let (ok, out) = configs(b, &["--describe", "--entity-type", "users", "--entity-name", "alice"]);
    assert!(
        ok && out.contains("Quota configs for user-principal 'alice' are producer_byte_rate=4096.0"),
        "{out}"
    );
    let (ok, out) = configs(b, &["--describe", "--entity-type", "clients"]);
    assert!(
        ok && out.contains("client-id 'c1'") && !out.contains("user-principal"),
        "{out}"
    );

    // c1 is over 1,024 bytes/s after about ten records: its answers carry a throttle time.
    let throttled = produce_throttle_max(b, "quota", "c1");
    assert!(throttled > 0.0, "c1's produce answers carried no throttle time");
    // c2 has no quota of its own, nor a default one: never throttled.
    assert_eq!(produce_throttle_max(b, "quota", "c2"), 0.0);

    // A consumer quota on the default user and client id r1 (the default user's own quota
    // comes before any client-id quota, as in Kafka): r1's fetches over 2,048 bytes/s are
    // answered empty with a throttle time, which the consumer reports.
    let (ok, out) = configs(
        b,
        &[
            "--alter",
            "--entity-type",
            "users",
            "--entity-default",
            "--entity-type",
            "clients",
            "--entity-name",
            "r1",
            "--add-config",
            "consumer_byte_rate=2048",
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = configs(
        b,
        &[
            "--describe",
            "--entity-type",
            "users",
            "--entity-default",
            "--entity-type",
            "clients",
            "--entity-name",
            "r1",
        ],
    );
    assert!(
        ok && out.contains("client-id 'r1'") && out.contains("consumer_byte_rate=2048.0"),
        "{out}"
    );
    let (ok, out) = tool(
        "kafka-consumer-perf-test",
        &[
            "--bootstrap-server",
            b,
            "--topic",
            "quota",
            "--num-records",
            "28",
            "--timeout",
            "120000",
            "--print-metrics",
            "--command-property",
            "client.id=r1",
        ],
        "",
    );
    let metric = "consumer-fetch-manager-metrics:fetch-throttle-time-max:";
    let line = out
        .lines()
        .find(|l| l.starts_with(metric) && l.contains("client-id=r1"))
        .unwrap_or_else(|| panic!("no {metric} line:\n{out}"));
    eprintln!("r1: {line}");
    let fetch_throttled: f64 = line.rsplit(':').next().and_then(|v| v.trim().parse().ok()).unwrap();
    assert!(
        ok && fetch_throttled > 0.0,
        "r1's fetch answers carried no throttle time: {out}"
    );

    // Removed, the quota is gone from the describe.
    let (ok, out) = configs(
        b,
        &[
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            "c1",
            "--delete-config",
            "producer_byte_rate",
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = configs(b, &["--describe", "--entity-type", "clients", "--entity-name", "c1"]);
    assert!(ok && !out.contains("producer_byte_rate"), "{out}");
    drop(four);
}
