//! The Kafka listener of every broker, reached by Kafka's own clients: kcat lists the brokers,
//! topics and partitions, kafka-python reads the same metadata, and malformed, oversized or
//! unknown requests close the connection without harming the broker.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tests::reassign::create;

/// Runs a client with no input; its exit code, stdout and stderr.
fn run(cmd: &mut Command) -> (Option<i32>, String, String) {
    tests::kafka::run(cmd, "")
}

/// Sends one raw frame and reports whether the broker closed the connection without an answer.
fn closed_after(addr: &str, frame: &[u8]) -> bool {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(frame).unwrap();
    let mut buf = [0u8; 4];
    matches!(s.read(&mut buf), Ok(0) | Err(_))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_clients_read_brokers_topics_and_partitions_and_bad_frames_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let kafka = |id: i32| k.addr(id);
    create(
        &four.client,
        "k",
        vec![vec![1, 2, 3], vec![2, 3, 4], vec![3, 4, 1]],
        &[],
    )
    .await;
    let bootstrap = k.bootstrap();

    // kcat: every broker at its advertised Kafka address, the topic with its replicas, each
    // partition led by its first replica once the controller has elected.
    let mut listed = String::new();
    tests::wait_until(Duration::from_secs(60), "kcat to see three led partitions", || {
        let b = bootstrap.clone();
        let out = run(Command::new("kcat").args(["-L", "-J", "-b", &b, "-t", "k", "-m", "20"]));
        listed = out.1.clone();
        let ok = out.0 == Some(0) && {
            let v: serde_json::Value = serde_json::from_str(&out.1).unwrap_or_default();
            v["topics"][0]["partitions"]
                .as_array()
                .is_some_and(|ps| ps.len() == 3 && ps.iter().all(|p| p["leader"].as_i64().unwrap_or(-1) > 0))
        };
        async move { ok }
    })
    .await;
    let v: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let mut brokers: Vec<(i64, String)> = v["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["id"].as_i64().unwrap(), b["name"].as_str().unwrap().to_string()))
        .collect();
    brokers.sort();
    assert_eq!(brokers, (1..=4).map(|id| (id as i64, kafka(id))).collect::<Vec<_>>());
    let t = &v["topics"][0];
    assert_eq!(t["topic"], "k");
    let replicas: Vec<Vec<i64>> = t["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p["replicas"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].as_i64().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(replicas, vec![vec![1, 2, 3], vec![2, 3, 4], vec![3, 4, 1]]);

    // kcat on a topic that does not exist: Kafka's error, and no topic is created.
    let (_, out, _) = run(Command::new("kcat").args(["-L", "-J", "-b", &kafka(2), "-t", "absent", "-m", "20"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["topics"][0]["error"], "Broker: Unknown topic or partition", "{out}");

    // kafka-python, through another broker.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/kafka_metadata.py");
    let (code, out, err) = run(Command::new("timeout")
        .arg("120")
        .arg("python3")
        .arg(&script)
        .args([&kafka(4), "k"]));
    assert_eq!(code, Some(0), "kafka-python failed: {err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["topics"], serde_json::json!(["k"]));
    assert_eq!(v["brokers"], serde_json::json!([1, 2, 3, 4]));
    assert_eq!(v["partitions"], serde_json::json!([0, 1, 2]));
    assert_eq!(v["leaders"], serde_json::json!([1, 2, 3]), "{out}");

    // Bad frames close the connection: a size over socket.request.max.bytes, a negative size,
    // an unknown API key, a Metadata request claiming 2^31-1 topics in a few bytes.
    let addr = kafka(1);
    assert!(closed_after(&addr, &0x7fff_ffffi32.to_be_bytes()));
    assert!(closed_after(&addr, &(-5i32).to_be_bytes()));
    let unknown = [0, 0, 0, 10, 0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
    assert!(closed_after(&addr, &unknown));
    let mut huge = vec![0, 3, 0, 1, 0, 0, 0, 7, 0xff, 0xff]; // Metadata v1, client id null
    huge.extend_from_slice(&i32::MAX.to_be_bytes());
    let mut frame = (huge.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&huge);
    assert!(closed_after(&addr, &frame));

    // The broker still answers, with the same metadata.
    let (code, out, err) = run(Command::new("kcat").args(["-L", "-J", "-b", &addr, "-t", "k", "-m", "20"]));
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["topics"][0]["partitions"].as_array().unwrap().len(), 3);
    drop(four);
}
