//! Mixed, end to end: kcat produces at acks=all while Kafka's own kafka-reassign-partitions
//! moves the partition to another broker and into a named dir there, under a throttle;
//! `ferry reassign --progress` shows the move; then Kafka's console consumer reads every
//! acknowledged record back, byte-identical, in order, once.

use std::process::Command;
use std::time::Duration;

use tests::reassign::create;

/// Runs a command with `input` on stdin; whether it succeeded, and its stdout and stderr.
fn run(cmd: &mut Command, input: &str) -> (bool, String) {
    let (code, stdout, stderr) = tests::kafka::run(cmd, input);
    (code == Some(0), format!("{stdout}{stderr}"))
}

fn tool(name: &str, args: &[&str]) -> (bool, String) {
    run(tests::kafka::kafka_tool(name).args(args), "")
}

/// Lines `from..to` of the records kcat sends: a key, then a value that names it.
fn lines(from: usize, to: usize, pad: usize) -> Vec<String> {
    (from..to)
        .map(|i| format!("key-{i}\tvalue-{i}-{}", "z".repeat(pad)))
        .collect()
}

fn kcat_produce(bootstrap: &str, lines: &[String]) -> bool {
    let (ok, _) = run(
        Command::new("timeout").args([
            "60",
            "kcat",
            "-P",
            "-b",
            bootstrap,
            "-t",
            "mix",
            "-p",
            "0",
            "-K",
            "\t",
            "-H",
            "via=kcat",
            "-X",
            "acks=all",
            "-X",
            "enable.idempotence=true",
        ]),
        &(lines.join("\n") + "\n"),
    );
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_produces_through_a_java_tool_reassignment_and_the_java_consumer_reads_it_all() {
    let dir = tempfile::tempdir().unwrap();
    let dir_b = dir.path().join("n4/b");
    let four_dirs = format!("{},{}", dir.path().join("n4/a").display(), dir_b.display());
    let (four, k) = tests::kafka::start(dir.path(), |id| {
        if id == 4 {
            vec!["--log-dirs".to_string(), four_dirs.clone()]
        } else {
            Vec::new()
        }
    })
    .await;
    let c = four.client.clone();
    create(&c, "mix", vec![vec![1, 2, 3]], &[]).await;
    tests::wait_until(Duration::from_secs(30), "mix-0 in sync", || {
        tests::data::isr_is(&c, "mix", 0, &[1, 2, 3])
    })
    .await;
    let bootstrap = k.bootstrap();

    // About 3 MB first, so that the move at 500 kB/s lasts a few seconds.
    let first = lines(0, 3000, 1000);
    assert!(kcat_produce(&bootstrap, &first));

    // kcat keeps producing, a chunk at a time, while the move runs.
    let b2 = bootstrap.clone();
    let producer = std::thread::spawn(move || {
        (0..20)
            .map(|chunk| {
                let l = lines(3000 + chunk * 50, 3000 + (chunk + 1) * 50, 10);
                (kcat_produce(&b2, &l), l)
            })
            .collect::<Vec<_>>()
    });

    let plan = dir.path().join("move.json");
    let json = format!(
        r#"{{"version":1,"partitions":[{{"topic":"mix","partition":0,"replicas":[4,2,3],"log_dirs":["{}","any","any"]}}]}}"#,
        dir_b.display()
    );
    std::fs::write(&plan, json).unwrap();
    let plan = plan.to_str().unwrap();
    let (ok, out) = tool(
        "kafka-reassign-partitions",
        &[
            "--bootstrap-server",
            &bootstrap,
            "--reassignment-json-file",
            plan,
            "--execute",
            "--throttle",
            "500000",
        ],
    );
    assert!(
        ok && out.contains("Successfully started partition reassignment for mix-0"),
        "{out}"
    );
    let (code, out, err) = tokio::task::block_in_place(|| {
        tests::run_ferry(&["reassign", "--progress", "--bootstrap-server", &four.bootstrap()])
    });
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("mix-0: replica 4: "), "{out}");

    let chunks = tokio::task::block_in_place(|| producer.join().unwrap());
    let mut acked = first.clone();
    for (ok, l) in &chunks {
        if *ok {
            acked.extend(l.iter().cloned());
        }
    }
    assert!(
        chunks.iter().filter(|(ok, _)| *ok).count() >= 15,
        "most chunks were acknowledged during the move"
    );
    let mut verified = String::new();
    tests::wait_until(Duration::from_secs(180), "the move to complete", || {
        let (ok, out) = tool(
            "kafka-reassign-partitions",
            &[
                "--bootstrap-server",
                &bootstrap,
                "--reassignment-json-file",
                plan,
                "--verify",
            ],
        );
        verified = out.clone();
        async move { ok && out.contains("Reassignment of partition mix-0 is completed.") }
    })
    .await;
    let state = tests::data::partition_state(&c, "mix", 0).await.unwrap();
    assert_eq!(state.replicas, vec![4, 2, 3], "{verified}");
    // Broker 4 holds it in the dir the file named (the tool asked it with AlterReplicaLogDirs).
    tests::wait_until(Duration::from_secs(60), "mix-0 in broker 4's dir b", || {
        let (ok, out) = tool(
            "kafka-log-dirs",
            &[
                "--bootstrap-server",
                &bootstrap,
                "--describe",
                "--broker-list",
                "4",
                "--topic-list",
                "mix",
            ],
        );
        let json = out.lines().find(|l| l.starts_with('{')).unwrap_or("{}").to_string();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        let in_b = v["brokers"][0]["logDirs"].as_array().is_some_and(|dirs| {
            dirs.iter().any(|d| {
                d["logDir"].as_str() == dir_b.to_str()
                    && d["partitions"]
                        .as_array()
                        .is_some_and(|ps| ps.iter().any(|p| p["partition"] == "mix-0" && p["isFuture"] == false))
            })
        });
        async move { ok && in_b }
    })
    .await;

    // The Java consumer: every acknowledged record, byte-identical, in order, once.
    let (ok, out) = tool(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "mix",
            "--partition",
            "0",
            "--offset",
            "earliest",
            "--timeout-ms",
            "15000",
            "--property",
            "print.key=true",
            "--property",
            "key.separator=\t",
        ],
    );
    let read: Vec<&str> = out.lines().filter(|l| l.starts_with("key-")).collect();
    assert!(ok || out.contains("TimeoutException"), "{out}");
    let mut at = 0;
    for want in &acked {
        let found = read[at..].iter().position(|l| l == want);
        assert!(
            found.is_some(),
            "acknowledged record {want:.40} missing or out of order"
        );
        at += found.unwrap() + 1;
    }
    let unique: std::collections::BTreeSet<&&str> = read.iter().collect();
    assert_eq!(unique.len(), read.len(), "no record twice");
    drop(four);
}
