//! Log compaction benchmark: writes a dirty log (keyed records, each key written many times)
//! into a work dir, then times one clean of it as a cleaner thread runs it, and prints the
//! throughput: the dirty log's bytes over the clean's time, in MB/s (10^6 bytes). The log was
//! just written, so its pages are likely cached: the figure is the cleaner's own cost (reading,
//! decoding, hashing, rewriting, syncing the cleaned segments), not the disk's read speed.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use broker::cleaner::batch_codec::{encode_keyed, KeyValue};
use broker::cleaner::clean::clean_exclusive;
use broker::cleaner::offset_map::OffsetMap;
use broker::cleaner::policy::CompactionPolicy;
use broker::cleaner::CleanerConfig;
use broker::partition_log::{LogConfig, PartitionLog};
use clap::Parser;

/// Flags of the benchmark.
#[derive(Parser)]
struct Args {
    /// Where the log is written (removed afterwards).
    #[arg(long, default_value = "ferry-compact-bench")]
    work_dir: PathBuf,
    /// Size of the dirty log, in MiB.
    #[arg(long, default_value_t = 150)]
    size_mib: u64,
    /// Distinct keys.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Bytes of each value.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Records per batch (a producer's 16 KiB batch holds about 130 such records).
    #[arg(long, default_value_t = 130)]
    batch_records: usize,
    /// Codec of the batches: none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none")]
    codec: String,
    /// Segment size, in MiB (Kafka's default is 1024; Ferry's broker default 64).
    #[arg(long, default_value_t = 64)]
    segment_mib: u64,
    /// Rounds: each writes the log anew and cleans it once.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

fn codec_bits(name: &str) -> anyhow::Result<u8> {
    Ok(match name {
        "none" => 0,
        "gzip" => 1,
        "snappy" => 2,
        "lz4" => 3,
        "zstd" => 4,
        _ => bail!("unknown codec {name:?}"),
    })
}

/// Writes the dirty log: keys in a fixed pseudo-random order, until `size` bytes; returns the
/// records written.
fn write_log(a: &Args, log: &mut PartitionLog, codec: u8) -> anyhow::Result<u64> {
    let size = a.size_mib << 20;
    let value = vec![b'v'; a.value_bytes];
    let (mut n, mut state) = (0u64, 0x9e37_79b9_7f4a_7c15u64);
    while log.size_bytes() < size {
        let keys: Vec<Vec<u8>> = (0..a.batch_records)
            .map(|_| {
                // xorshift: every key comes back many times, in no order.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                format!("key-{:08}", state % a.keys).into_bytes()
            })
            .collect();
        let records: Vec<KeyValue> = keys
            .iter()
            .map(|k| (Some(k.as_slice()), Some(value.as_slice())))
            .collect();
        let batch = encode_keyed(&records, 1_700_000_000_000 + n as i64, codec)?;
        log.append_batch_as_leader(batch, 1)?;
        n += records.len() as u64;
    }
    log.flush()?;
    Ok(n)
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let codec = codec_bits(&a.codec)?;
    if a.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let cfg = LogConfig {
        segment_bytes: a.segment_mib << 20,
        ..Default::default()
    };
    let memory = CleanerConfig::default().dedupe_buffer_size;
    let policy = CompactionPolicy {
        compact: true,
        ..Default::default()
    };
    let mut rates = Vec::new();
    for round in 0..a.rounds {
        let dir = a.work_dir.join("t-0");
        let _ = std::fs::remove_dir_all(&a.work_dir);
        let mut log = PartitionLog::open(&dir, cfg.clone()).context("opening the log")?;
        let records = write_log(&a, &mut log, codec)?;
        let before = log.size_bytes();
        let mut map = OffsetMap::new(memory);
        let start = Instant::now();
        let stats = clean_exclusive(&mut log, None, i64::MAX, &policy, 0, &mut map)?;
        let secs = start.elapsed().as_secs_f64();
        let rate = stats.bytes_before as f64 / secs / 1e6;
        rates.push(rate);
        println!(
            "{}",
            serde_json::json!({
                "round": round,
                "codec": a.codec,
                "records": records,
                "log_bytes": before,
                "cleaned_bytes_before": stats.bytes_before,
                "cleaned_bytes_after": stats.bytes_after,
                "bytes_read": stats.bytes_read,
                "keys": stats.keys,
                "records_kept": stats.records_kept,
                "seconds": secs,
                "mb_per_s": rate,
            })
        );
        drop(log);
    }
    let _ = std::fs::remove_dir_all(&a.work_dir);
    rates.sort_by(f64::total_cmp);
    println!(
        "compaction throughput (dirty bytes cleaned per second, {} rounds): median {:.1} MB/s, min {:.1}, max {:.1}",
        rates.len(),
        rates[rates.len() / 2],
        rates[0],
        rates[rates.len() - 1]
    );
    Ok(())
}
