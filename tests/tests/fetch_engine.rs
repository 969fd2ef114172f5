//! The one fetch engine, seen from its edges over real sockets: a Kafka Fetch keeps KIP-74's
//! byte limits (the first batch whole past every limit, then the answer's budget across
//! partitions), and a long-polling Kafka or gRPC fetch is answered by the append it waited for,
//! which the follower's fetch (the third edge) must copy before the high watermark moves.

use std::io::{Read, Write};
use std::time::Duration;

use bytes::Bytes;
use proto::ferry::{CreateTopicsRequest, NewTopic, Replicas};

const TOPIC: &str = "polled";

/// One partition of a Fetch answer: its index, error code, high watermark and record bytes.
type Answered = (i32, i16, i64, Vec<u8>);

/// Reads a big-endian integer of `N` bytes at `*at`, moving past it.
fn int<const N: usize>(b: &[u8], at: &mut usize) -> i64 {
    let mut v = 0i64;
    for x in &b[*at..*at + N] {
        v = (v << 8) | i64::from(*x);
    }
    *at += N;
    // Sign-extend from N bytes.
    let shift = 64 - 8 * N as u32;
    (v << shift) >> shift
}

/// Sends a Fetch v4 (built by hand, as the tests carry no Kafka protocol crate) for `TOPIC`'s
/// `(partition, offset)`s, each with `partition_max` bytes, and returns each partition's answer.
fn kafka_fetch(
    addr: &str,
    parts: &[(i32, i64)],
    wait_ms: i32,
    min_bytes: i32,
    max_bytes: i32,
    partition_max: i32,
) -> Vec<Answered> {
    let mut body = Vec::new();
    body.extend_from_slice(&1i16.to_be_bytes()); // Fetch
    body.extend_from_slice(&4i16.to_be_bytes());
    body.extend_from_slice(&9i32.to_be_bytes()); // correlation id
    body.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
    body.extend_from_slice(&(-1i32).to_be_bytes()); // replica id: a consumer
    body.extend_from_slice(&wait_ms.to_be_bytes());
    body.extend_from_slice(&min_bytes.to_be_bytes());
    body.extend_from_slice(&max_bytes.to_be_bytes());
    body.push(0); // read_uncommitted
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&(TOPIC.len() as i16).to_be_bytes());
    body.extend_from_slice(TOPIC.as_bytes());
    body.extend_from_slice(&(parts.len() as i32).to_be_bytes());
    for (p, offset) in parts {
        body.extend_from_slice(&p.to_be_bytes());
        body.extend_from_slice(&offset.to_be_bytes());
        body.extend_from_slice(&partition_max.to_be_bytes());
    }
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    s.write_all(&(body.len() as i32).to_be_bytes()).unwrap();
    s.write_all(&body).unwrap();
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let mut r = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut r).unwrap();
    // Correlation id, throttle time, one topic and its name.
    let mut at = 4 + 4 + 4;
    let name_len = int::<2>(&r, &mut at) as usize;
    at += name_len;
    let count = int::<4>(&r, &mut at);
    (0..count)
        .map(|_| {
            let index = int::<4>(&r, &mut at) as i32;
            let error = int::<2>(&r, &mut at) as i16;
            let hw = int::<8>(&r, &mut at);
            at += 8; // last stable offset
            let aborted = int::<4>(&r, &mut at);
            at += 16 * aborted.max(0) as usize;
            let len = int::<4>(&r, &mut at).max(0) as usize;
            let records = r[at..at + len].to_vec();
            at += len;
            (index, error, hw, records)
        })
        .collect()
}

/// The base offset and record count of each whole batch in `records`.
fn batches(records: &[u8]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let mut p = at;
        let base = int::<8>(records, &mut p);
        let len = int::<4>(records, &mut p) as usize;
        let mut c = at + 57;
        out.push((base, int::<4>(records, &mut c)));
        at += 12 + len;
    }
    out
}

/// Values of `n` bytes each, one batch.
fn values(n: usize, count: usize, tag: u8) -> Vec<Bytes> {
    (0..count).map(|_| Bytes::from(vec![tag; n])).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_and_grpc_fetches_keep_kafkas_limits_and_wake_on_the_append_they_wait_for() {
    let tmp = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start(tmp.path(), |_| Vec::new()).await;
    let c = four.client.clone();
    // Both partitions led by broker 1 and copied by broker 2, so one Fetch reaches both.
    let req = CreateTopicsRequest {
        topics: vec![NewTopic {
            topic: TOPIC.into(),
            partitions: -1,
            replication_factor: -1,
            assignment: vec![Replicas { brokers: vec![1, 2] }, Replicas { brokers: vec![1, 2] }],
            config: Default::default(),
        }],
        validate_only: false,
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.create_topics(req).await }
        })
        .await
        .expect("admin reachable");
    assert!(r.results.iter().all(|r| r.error_code == 0), "{r:?}");
    for p in 0..2 {
        tests::wait_until(Duration::from_secs(30), "partition in sync under broker 1", || {
            let c = c.clone();
            async move {
                tests::data::partition_state(&c, TOPIC, p)
                    .await
                    .is_some_and(|s| s.leader == 1 && s.isr.len() == 2)
            }
        })
        .await;
    }
    // Partition 0: batches of 3, then 2 records of 1000 bytes; partition 1: one of 2.
    let acked = |r: Result<i64, broker::DataError>| r.expect("produced at acks=all");
    acked(c.produce_once(TOPIC, 0, values(1000, 3, b'a'), -1).await);
    acked(c.produce_once(TOPIC, 0, values(1000, 2, b'b'), -1).await);
    acked(c.produce_once(TOPIC, 1, values(1000, 2, b'c'), -1).await);
    let addr = k.addr(1);

    // Limits of 1 byte: the first batch comes whole anyway, and nothing after it.
    let a = addr.clone();
    let got = tokio::task::spawn_blocking(move || kafka_fetch(&a, &[(0, 0), (1, 0)], 0, 1, 1, 1))
        .await
        .unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].1, got[0].2), (0, 5), "no error, high watermark 5");
    assert_eq!(batches(&got[0].3), vec![(0, 3)], "only the first batch");
    assert_eq!(
        (got[1].1, got[1].3.len()),
        (0, 0),
        "the answer is full: nothing of partition 1"
    );

    // A budget past the first batch: partition 0 takes what fits of its own maximum, partition 1
    // what is left of the answer's, whole batches only.
    let first = got[0].3.len() as i32;
    let a = addr.clone();
    let got = tokio::task::spawn_blocking(move || kafka_fetch(&a, &[(0, 0), (1, 0)], 0, 1, first + 10, 1 << 20))
        .await
        .unwrap();
    assert_eq!(
        batches(&got[0].3),
        vec![(0, 3)],
        "the second batch passes the answer's limit"
    );
    assert!(
        got[1].3.is_empty(),
        "partition 1's batch does not fit in the 10 bytes left"
    );
    let a = addr.clone();
    let got = tokio::task::spawn_blocking(move || kafka_fetch(&a, &[(0, 0), (1, 0)], 0, 1, 1 << 20, first))
        .await
        .unwrap();
    assert_eq!(batches(&got[0].3), vec![(0, 3)], "partition 0 keeps to its own maximum");
    assert_eq!(batches(&got[1].3), vec![(0, 2)], "partition 1 has its own maximum too");

    // A Kafka fetch at the end waits for min_bytes; the append it waits for answers it.
    let a = addr.clone();
    let waiting = tokio::task::spawn_blocking(move || kafka_fetch(&a, &[(0, 5), (1, 2)], 60_000, 1, 1 << 20, 1 << 20));
    // A gRPC fetch at the end waits for a record the same way.
    let grpc = {
        let c = c.clone();
        tokio::spawn(async move { c.fetch(TOPIC, 1, 2, 1 << 20, 60_000).await })
    };
    // Give both time to arrive; neither may answer before the append, having nothing to send.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiting.is_finished() && !grpc.is_finished(),
        "answered with nothing to send"
    );
    acked(c.produce_once(TOPIC, 1, values(10, 1, b'd'), -1).await);
    let got = waiting.await.unwrap();
    assert!(got[0].3.is_empty());
    assert_eq!(batches(&got[1].3), vec![(2, 1)], "woken by the append to partition 1");
    assert_eq!(got[1].2, 3, "the follower copied it, so the high watermark moved");
    let r = grpc.await.unwrap().expect("gRPC fetch answered");
    assert_eq!(r.high_watermark, 3);
    let offsets: Vec<i64> = r.records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![2]);
    assert_eq!(r.records[0].value, Bytes::from(vec![b'd'; 10]));
}
