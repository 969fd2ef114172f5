//! The key workloads (put, txn10, get) and the bigvalue search, on any backend.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::{Rng, SeedableRng};

use crate::args::{Args, Workload};
use crate::backend::Backend;
use crate::meter::{Meter, Report, Window};

/// The name of key number `i`.
fn key(i: usize) -> String {
    format!("/bench/k{i:07}")
}

/// `clients` clients running workload `w` over the keys, each from its own seed.
pub async fn run_load<B: Backend>(
    args: &Args,
    endpoints: &[String],
    w: Workload,
    clients: usize,
) -> anyhow::Result<Report> {
    let value = Bytes::from(vec![b'v'; args.value_size]);
    let window = Window::starting_now(args);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let backend = B::connect(endpoints, c).await?;
        let value = value.clone();
        let keys = args.keys;
        let seed = args.seed.wrapping_add(c as u64);
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut m = Meter::new(window);
            while let Some(started) = m.next() {
                let res = match w {
                    Workload::Put => backend.put(&key(rng.random_range(0..keys)), value.clone()).await,
                    Workload::Txn10 => {
                        // Ten distinct keys: etcd refuses a transaction that names a key twice.
                        let kvs = rand::seq::index::sample(&mut rng, keys, 10.min(keys))
                            .iter()
                            .map(|k| (key(k), value.clone()))
                            .collect();
                        backend.put_all(kvs).await
                    }
                    Workload::Get => backend.get(&key(rng.random_range(0..keys))).await,
                    Workload::Bigvalue | Workload::Produce => unreachable!("{w:?} is not a key workload"),
                };
                m.record(started, res);
            }
            m
        }));
    }
    Ok(Report {
        workload: w,
        clients,
        produce: None,
        meter: Meter::join(window, tasks).await?,
        secs: args.duration,
    })
}

/// Writes the keys the key workloads use.
pub async fn preload<B: Backend>(args: &Args, endpoints: &[String]) -> anyhow::Result<()> {
    let b = B::connect(endpoints, 0).await?;
    let keys: Vec<String> = (0..args.keys).map(key).collect();
    b.preload(&keys, Bytes::from(vec![b'v'; args.value_size])).await
}

/// Finds the largest N (up to the maximum) for which one atomic request of N partitions commits.
pub async fn bigvalue<B: Backend>(args: &Args, endpoints: &[String]) -> anyhow::Result<(usize, Duration)> {
    let b = B::connect(endpoints, 0).await?;
    let (mut ok, mut bad) = (0usize, None::<usize>);
    let mut n = 1000usize;
    let mut round = 0;
    let mut best_time = Duration::ZERO;
    loop {
        round += 1;
        let t = Instant::now();
        if b.write_reassignment(n, round).await.is_ok() {
            ok = n;
            best_time = t.elapsed();
        } else {
            bad = Some(n);
        }
        let next = match bad {
            None if n >= args.max_partitions => break,
            None => (n * 4).min(args.max_partitions),
            Some(b) if b - ok <= (ok / 20).max(1) => break,
            Some(b) => ok + (b - ok) / 2,
        };
        n = next;
    }
    Ok((ok, best_time))
}
