//! `kafka-metadata-quorum describe` (DescribeQuorum) against Ferry: the quorum Kafka's tool
//! describes is the metastore's Raft quorum, answered from its leader's view by any broker, a
//! broker-only one included. LeaderId is the Raft leader, LeaderEpoch its term, the voters are
//! the three quorum nodes; when the leader is killed the answer follows the new one.

use std::collections::BTreeSet;
use std::time::Duration;

/// The Raft leader and its term, as the quorum nodes at `addrs` report them: the one that says
/// it leads, once every node that answers names it.
async fn raft_leader(addrs: &[String]) -> (u64, u64) {
    for _ in 0..600 {
        let mut leader = None;
        let mut named = BTreeSet::new();
        for a in addrs {
            let c = metastore::Client::new(std::slice::from_ref(a)).expect("client");
            if let Ok(s) = c.status_of(0).await {
                let h = s.header.unwrap_or_default();
                named.insert(h.leader_id);
                if s.state == "Leader" {
                    leader = Some((h.member_id, h.raft_term));
                }
            }
        }
        if let Some((id, term)) = leader {
            if named.len() == 1 && named.contains(&id) {
                return (id, term);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no settled Raft leader within 60 s");
}

/// `Key: value` lines of `describe --status`.
fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {key} in:\n{out}"))
}

/// The voter ids in `CurrentVoters: [{"id": 1, ...}, ...]`.
fn voter_ids(out: &str) -> BTreeSet<u64> {
    field(out, "CurrentVoters")
        .split("\"id\": ")
        .skip(1)
        .map(|s| s.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap())
        .collect()
}

/// The rows of `describe --replication`: (NodeId, LogEndOffset, LastFetchTimestamp, Status).
fn replication_rows(out: &str) -> Vec<(u64, i64, i64, String)> {
    out.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(cols.len(), 7, "a row of 7 columns: {l}");
            (
                cols[0].parse().unwrap(),
                cols[2].parse().unwrap(),
                cols[4].parse().unwrap(),
                cols[6].to_string(),
            )
        })
        .collect()
}

/// Runs `kafka-metadata-quorum describe <what>` against `bootstrap` until the answer names
/// `leader` (an answer taken just before an election settled may name the one before).
fn describe_until_led_by(bootstrap: &str, what: &str, leader: u64) -> String {
    let mut last = String::new();
    for _ in 0..10 {
        let (ok, out) = tests::kafka::tool(
            "kafka-metadata-quorum",
            &["--bootstrap-server", bootstrap, "describe", what],
            "",
        );
        let names_it = match what {
            "--status" => ok && field(&out, "LeaderId") == leader.to_string(),
            _ => ok && replication_rows(&out).iter().any(|r| r.0 == leader && r.3 == "Leader"),
        };
        if names_it {
            return out;
        }
        last = out;
        std::thread::sleep(Duration::from_secs(1));
    }
    panic!("describe {what} never named leader {leader}:\n{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_metadata_quorum_describes_the_raft_quorum_and_follows_a_new_leader() {
    let dir = tempfile::tempdir().unwrap();
    let (mut four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let quorum: Vec<String> = (1..=3).map(|id| four.nodes[&id].addr.clone()).collect();
    let (leader, term) = raft_leader(&quorum).await;

    // Asked of broker 4, which is not a quorum member: it asks the quorum's leader.
    let broker_only = k.addr(4);
    let out = describe_until_led_by(&broker_only, "--status", leader);
    assert_eq!(field(&out, "LeaderEpoch"), term.to_string(), "{out}");
    assert_eq!(voter_ids(&out), BTreeSet::from([1, 2, 3]), "{out}");
    assert_eq!(field(&out, "CurrentObservers"), "[]", "{out}");
    assert!(field(&out, "HighWatermark").parse::<u64>().unwrap() > 0, "{out}");
    assert!(out.contains("RAFT://"), "voters' quorum addresses: {out}");

    let out = describe_until_led_by(&broker_only, "--replication", leader);
    let rows = replication_rows(&out);
    let ids: BTreeSet<u64> = rows.iter().map(|r| r.0).collect();
    assert_eq!(ids, BTreeSet::from([1, 2, 3]), "{out}");
    assert_eq!(rows.iter().filter(|r| r.3 == "Leader").count(), 1, "{out}");
    assert_eq!(rows.iter().filter(|r| r.3 == "Follower").count(), 2, "{out}");
    // Every voter has answered the leader's appends, so each has a fetch time.
    assert!(rows.iter().all(|r| r.2 > 0), "{out}");

    // Kill the leader; the answer, from a surviving node, follows the new one.
    four.nodes.get_mut(&(leader as i32)).unwrap().kill();
    let survivors: Vec<String> = (1..=3)
        .filter(|id| *id as u64 != leader)
        .map(|id| four.nodes[&id].addr.clone())
        .collect();
    let (new_leader, new_term) = raft_leader(&survivors).await;
    assert_ne!(new_leader, leader);
    assert!(new_term > term);
    let out = describe_until_led_by(&broker_only, "--status", new_leader);
    assert_eq!(field(&out, "LeaderEpoch"), new_term.to_string(), "{out}");
    assert_eq!(
        voter_ids(&out),
        BTreeSet::from([1, 2, 3]),
        "the dead voter stays a voter: {out}"
    );
    let survivor_broker = k.addr((1..=3).find(|id| *id as u64 != leader).unwrap());
    let out = describe_until_led_by(&survivor_broker, "--replication", new_leader);
    let rows = replication_rows(&out);
    let dead = rows.iter().find(|r| r.0 == leader).expect("the dead voter's row");
    // The new leader never heard from the node killed before it was elected.
    assert_eq!((dead.2, dead.3.as_str()), (-1, "Follower"), "{out}");
}

/// A Kafka 4 client's ApiVersions and then a hand-made Produce v2 and Fetch v3 on one socket:
/// each is answered with UNSUPPORTED_VERSION for the partition it names, and the connection
/// stays open for the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_v2_and_fetch_v3_are_answered_unsupported_version_on_an_open_connection() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let (_four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let mut s = std::net::TcpStream::connect(k.addr(1)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let header = |key: i16, version: i16, corr: i32| {
        let mut h = Vec::new();
        h.extend_from_slice(&key.to_be_bytes());
        h.extend_from_slice(&version.to_be_bytes());
        h.extend_from_slice(&corr.to_be_bytes());
        h.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
        h
    };
    let topic = |out: &mut Vec<u8>| {
        out.extend_from_slice(&1i32.to_be_bytes());
        out.extend_from_slice(&2i16.to_be_bytes());
        out.extend_from_slice(b"qt");
        out.extend_from_slice(&1i32.to_be_bytes());
        out.extend_from_slice(&5i32.to_be_bytes()); // partition 5
    };
    let mut produce = header(0, 2, 41);
    produce.extend_from_slice(&1i16.to_be_bytes()); // acks
    produce.extend_from_slice(&1000i32.to_be_bytes());
    topic(&mut produce);
    produce.extend_from_slice(&0i32.to_be_bytes()); // an empty record set
    let mut fetch = header(1, 3, 42);
    for v in [-1i32, 500, 1, 1 << 20] {
        fetch.extend_from_slice(&v.to_be_bytes());
    }
    topic(&mut fetch);
    fetch.extend_from_slice(&0i64.to_be_bytes());
    fetch.extend_from_slice(&(1i32 << 20).to_be_bytes());
    let mut answer = |req: &[u8]| {
        s.write_all(&(req.len() as i32).to_be_bytes()).unwrap();
        s.write_all(req).unwrap();
        let mut size = [0u8; 4];
        s.read_exact(&mut size).expect("an answer, not a closed connection");
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        s.read_exact(&mut body).unwrap();
        body
    };
    // Produce v2: correlation, [topic "qt", [5, UNSUPPORTED_VERSION, -1, -1]], throttle 0.
    let mut want = 41i32.to_be_bytes().to_vec();
    topic(&mut want);
    want.extend_from_slice(&35i16.to_be_bytes());
    want.extend_from_slice(&(-1i64).to_be_bytes());
    want.extend_from_slice(&(-1i64).to_be_bytes());
    want.extend_from_slice(&0i32.to_be_bytes());
    assert_eq!(answer(&produce), want);
    // Fetch v3: correlation, throttle 0, [topic "qt", [5, UNSUPPORTED_VERSION, -1, no records]].
    let mut want = 42i32.to_be_bytes().to_vec();
    want.extend_from_slice(&0i32.to_be_bytes());
    topic(&mut want);
    want.extend_from_slice(&35i16.to_be_bytes());
    want.extend_from_slice(&(-1i64).to_be_bytes());
    want.extend_from_slice(&0i32.to_be_bytes());
    assert_eq!(answer(&fetch), want);
    // The connection still serves: ApiVersions v0 answers with no error.
    let body = answer(&header(18, 0, 43));
    assert_eq!(&body[..6], &[0, 0, 0, 43, 0, 0]);
}
