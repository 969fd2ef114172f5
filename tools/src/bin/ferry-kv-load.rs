//! `ferry-kv-load`: stores N keys in a Ferry metastore, `/bench/k<i>` with values of a given
//! size (the keys `ferry-bench`'s `put` workload writes over), in large transactions, for the
//! scale curves. Prints the keys stored per second.

use std::time::Instant;

use anyhow::bail;
use clap::Parser;
use futures::StreamExt;
use proto::metastore as pb;

/// Flags.
#[derive(Parser)]
struct Args {
    /// The metastore's members, HOST:PORT[,...].
    #[arg(long)]
    endpoints: String,
    /// Keys to store.
    #[arg(long)]
    keys: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 256)]
    value_size: usize,
    /// Keys per transaction.
    #[arg(long, default_value_t = 20_000)]
    per_txn: usize,
    /// Transactions in flight.
    #[arg(long, default_value_t = 2)]
    concurrency: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let endpoints: Vec<String> = a.endpoints.split(',').map(String::from).collect();
    let client = metastore::Client::new(&endpoints)?;
    let value = bytes::Bytes::from(vec![b'v'; a.value_size]);
    let started = Instant::now();
    let batches = (0..a.keys).step_by(a.per_txn.max(1)).map(|from| {
        let to = (from + a.per_txn).min(a.keys);
        let ops = (from..to)
            .map(|i| pb::Op {
                op: Some(pb::op::Op::Put(pb::PutOp {
                    // The same names as ferry-bench's `put` workload.
                    key: format!("/bench/k{i:07}"),
                    value: value.clone(),
                    lease: 0,
                })),
            })
            .collect();
        let client = client.clone();
        async move {
            client
                .txn(pb::TxnRequest {
                    guards: vec![],
                    ops,
                    request_id: String::new(),
                })
                .await
        }
    });
    let results: Vec<_> = futures::stream::iter(batches)
        .buffer_unordered(a.concurrency.max(1))
        .collect()
        .await;
    for r in results {
        let r = r?;
        if !r.succeeded {
            bail!("a load transaction failed: {}", r.failed_reason);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{{\"workload\":\"load\",\"keys\":{},\"value_size\":{},\"seconds\":{secs:.2},\"keys_per_s\":{:.0}}}",
        a.keys,
        a.value_size,
        a.keys as f64 / secs
    );
    Ok(())
}
