//! Crash safety across processes: three `ferry node` processes under a write load; one node at a
//! time, the leader included, is SIGKILLed at a random moment and restarted. Every acknowledged
//! write must then be on every node with its value.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use metastore::Client;
use proto::metastore as pb;
use rand::{Rng, SeedableRng};
use tests::ProcNode;

const KILL_CYCLES: usize = 24;

async fn leader_of(client: &Client, n: usize) -> Option<u64> {
    for i in 0..n {
        if let Ok(s) = client.status_of(i).await {
            let leader = s.header.unwrap_or_default().leader_id;
            if leader != 0 {
                return Some(leader);
            }
        }
    }
    None
}

/// The leader, once some node names one (within 10 s).
async fn wait_leader(client: &Client, n: usize) -> Option<u64> {
    for _ in 0..100 {
        if let Some(l) = leader_of(client, n).await {
            return Some(l);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_repeated_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let peers = tests::loopback_peers(3);
    let mut nodes: BTreeMap<u64, ProcNode> = peers
        .iter()
        .map(|(id, addr)| {
            (
                *id,
                ProcNode::new(*id, addr, &dir.path().join(format!("n{id}")), &peers, false),
            )
        })
        .collect();
    for n in nodes.values_mut() {
        n.spawn();
    }
    let endpoints: Vec<String> = peers.values().cloned().collect();
    let client = Client::new(&endpoints).unwrap();
    client.put("/crash-ready", "1").await.expect("cluster forms");

    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4usize {
        let client = Client::new(&endpoints).unwrap().starting_at(w);
        let stop = stop.clone();
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("/crash/{w}/{seq:08}");
                let value = format!("value-{w}-{seq}");
                if client.put(&key, value.clone()).await.is_ok() {
                    acked.push((key, value));
                }
                seq += 1;
            }
            acked
        }));
    }

    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut leader_kills = 0;
    for cycle in 0..KILL_CYCLES {
        tokio::time::sleep(Duration::from_millis(rng.random_range(150..700))).await;
        // Every third kill aims at the leader; the others at a random node.
        let victim = if cycle % 3 == 0 {
            // A killed leader's successor is elected after an election timeout.
            match wait_leader(&client, endpoints.len()).await {
                Some(l) => {
                    leader_kills += 1;
                    l
                }
                None => rng.random_range(1..=3),
            }
        } else {
            rng.random_range(1..=3)
        };
        let node = nodes.get_mut(&victim).unwrap();
        node.kill();
        tokio::time::sleep(Duration::from_millis(rng.random_range(50..500))).await;
        node.spawn();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    assert!(
        leader_kills >= KILL_CYCLES / 3 - 1,
        "the leader was killed only {leader_kills} times"
    );
    assert!(acked.len() > 100, "too few writes acknowledged: {}", acked.len());

    // Let every node catch up to a write made after the load, then read each replica locally.
    let last = client.put("/crash-done", "1").await.unwrap();
    for (i, endpoint) in endpoints.iter().enumerate() {
        let mut tries = 0;
        loop {
            match client.status_of(i).await {
                Ok(s) if s.header.as_ref().is_some_and(|h| h.revision >= last) => break,
                _ if tries > 300 => panic!("node at {endpoint} did not catch up"),
                _ => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        let kvs = client
            .call_endpoint(i, |mut c| async move {
                c.range(pb::RangeRequest {
                    prefix: "/crash/".into(),
                    serializable: true,
                    ..Default::default()
                })
                .await
            })
            .await
            .unwrap()
            .kvs;
        let stored: BTreeMap<String, Vec<u8>> = kvs.into_iter().map(|kv| (kv.key, kv.value.to_vec())).collect();
        for (k, v) in &acked {
            assert_eq!(
                stored.get(k).map(Vec::as_slice),
                Some(v.as_bytes()),
                "node {} lost {k}",
                i + 1
            );
        }
    }
    eprintln!(
        "{KILL_CYCLES} kill cycles ({leader_kills} of the leader), {} acknowledged writes all present on 3 nodes",
        acked.len()
    );
}
