//! The figures as a table, and as JSON lines with `--json`.

use serde_json::json;

use crate::scale::ScaleOutcome;
use crate::variant::Outcome;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// The ratio p99 during the drain / p99 idle (NaN without idle figures).
pub fn p99_ratio(o: &Outcome) -> f64 {
    let idle = o.produced.idle.p99_ms;
    if idle > 0.0 {
        o.produced.drain.p99_ms / idle
    } else {
        f64::NAN
    }
}

/// Whether a sampled peak went past the drain's cap.
pub fn cap_exceeded(o: &Outcome) -> bool {
    o.cap
        .is_some_and(|cap| o.peak.into as i64 > cap || o.peak.out as i64 > cap)
}

/// Prints the drains, against the disk's figure, and the producer's latencies.
pub fn drains(outcomes: &[Outcome], disk: Option<(f64, u64)>, json_lines: bool) {
    if let Some((secs, bytes)) = disk {
        println!(
            "disk: cp -r of broker 4's log dir ({:.0} MiB) + sync: {secs:.2} s ({:.1} MB/s)",
            mib(bytes),
            bytes as f64 / secs / 1e6
        );
    }
    println!();
    println!("drain of broker 4        moves   MiB  recv  wall_s   MB/s  wall/disk  ideal_s(even/busiest)  peak in/out/all  left  skip/fail");
    for o in outcomes {
        let disk_ratio = disk.map_or(f64::NAN, |(s, _)| o.wall_s / s);
        let ideal = o.ideal_s.map_or("-".to_string(), |(e, b)| format!("{e:.1}/{b:.1}"));
        let cap = o.cap.map_or(String::new(), |c| format!(" (cap {c})"));
        let flag = if cap_exceeded(o) { " CAP EXCEEDED" } else { "" };
        println!(
            "{:<24} {:>5} {:>5.0} {:>5} {:>7.2} {:>6.1} {:>10.2} {:>22} {:>7}/{}/{}{cap}{flag} {:>5} {:>4}/{}",
            o.variant.name(),
            o.moves,
            mib(o.bytes),
            o.receivers,
            o.wall_s,
            o.bytes as f64 / o.wall_s / 1e6,
            disk_ratio,
            ideal,
            o.peak.into,
            o.peak.out,
            o.peak.cluster,
            o.left_on_broker,
            o.skipped,
            o.failed,
        );
    }
    println!();
    println!("producer (acks=all)      idle p50/p99/max ms     drain p50/p99/max ms    p99 drain/idle  acked idle/drain  retries  errors  dropped");
    for o in outcomes {
        let (i, d) = (o.produced.idle, o.produced.drain);
        println!(
            "{:<24} {:>6.1}/{:>6.1}/{:>7.1}    {:>6.1}/{:>6.1}/{:>7.1}    {:>14.2}  {:>7}/{:<8} {:>7}  {:>6}  {:>7}",
            o.variant.name(),
            i.p50_ms,
            i.p99_ms,
            i.max_ms,
            d.p50_ms,
            d.p99_ms,
            d.max_ms,
            p99_ratio(o),
            i.count,
            d.count,
            o.produced.retries,
            o.produced.errors,
            o.produced.dropped,
        );
    }
    if json_lines {
        if let Some((secs, bytes)) = disk {
            println!("{}", json!({"figure": "disk", "cp_sync_s": secs, "bytes": bytes}));
        }
        for o in outcomes {
            let (i, d) = (o.produced.idle, o.produced.drain);
            println!(
                "{}",
                json!({
                    "figure": "drain", "variant": o.variant.name(), "moves": o.moves, "bytes": o.bytes,
                    "broker_bytes": o.broker_bytes, "receivers": o.receivers, "wall_s": o.wall_s,
                    "wall_per_disk": disk.map(|(s, _)| o.wall_s / s),
                    "ideal_even_s": o.ideal_s.map(|x| x.0), "ideal_busiest_s": o.ideal_s.map(|x| x.1),
                    "peak_into": o.peak.into, "peak_out": o.peak.out, "peak_cluster": o.peak.cluster,
                    "peak_samples": o.peak.samples, "cap": o.cap, "cap_exceeded": cap_exceeded(o),
                    "done": o.done, "skipped": o.skipped, "failed": o.failed, "left_on_broker": o.left_on_broker,
                    "idle_p50_ms": i.p50_ms, "idle_p99_ms": i.p99_ms, "idle_max_ms": i.max_ms, "idle_count": i.count,
                    "drain_p50_ms": d.p50_ms, "drain_p99_ms": d.p99_ms, "drain_max_ms": d.max_ms, "drain_count": d.count,
                    "p99_ratio": p99_ratio(o), "retries": o.produced.retries, "errors": o.produced.errors,
                    "dropped": o.produced.dropped,
                })
            );
        }
    }
}

/// Prints the scale figures.
pub fn scale(s: &ScaleOutcome, json_lines: bool) {
    println!();
    println!(
        "scale: {} empty partitions on broker 4, uncapped drain plan",
        s.partitions
    );
    println!(
        "  create topic            {:>9.2} s (every replica on broker 4 after {:.2} s)",
        s.create_s, s.exist_s
    );
    println!("  store plan (CreatePlan) {:>9.2} s for {} moves", s.store_s, s.moves);
    println!(
        "  stored plan             {:>9} bytes ({:.1} bytes a move)",
        s.stored_bytes,
        s.stored_bytes as f64 / f64::from(s.moves.max(1))
    );
    println!(
        "  memory of a queued move {:>9.1} bytes (plan core: struct + replica slices)",
        s.move_mem_bytes
    );
    println!("  plan done after         {:>9.2} s", s.done_s);
    println!(
        "  controller (node {}) CPU {:>8.2} s ({:.2} cores); all nodes {:.2} s; controller RSS {:.0} -> {:.0} MiB{}",
        s.controller,
        s.controller_cpu_s,
        s.controller_cpu_s / (s.store_s + s.done_s),
        s.all_cpu_s,
        s.controller_rss_mib.0,
        s.controller_rss_mib.1,
        if s.same_controller {
            ""
        } else {
            " (the controller changed meanwhile)"
        }
    );
    if json_lines {
        println!(
            "{}",
            json!({
                "figure": "scale", "partitions": s.partitions, "create_s": s.create_s, "exist_s": s.exist_s,
                "moves": s.moves, "store_s": s.store_s, "stored_bytes": s.stored_bytes,
                "move_mem_bytes": s.move_mem_bytes, "done_s": s.done_s, "controller": s.controller,
                "controller_cpu_s": s.controller_cpu_s, "all_cpu_s": s.all_cpu_s,
                "controller_rss_mib_before": s.controller_rss_mib.0, "controller_rss_mib_done": s.controller_rss_mib.1,
                "same_controller": s.same_controller,
            })
        );
    }
}
