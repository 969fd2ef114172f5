//! Printing runs: a table row (unless `--json`) and a JSON line each, and server CPU time.

use std::time::Duration;

use crate::args::Args;
use crate::meter::{ProduceShape, Report};

/// `--acks` as the flag spells it.
fn acks_name(acks: i32) -> String {
    if acks == -1 {
        "all".to_string()
    } else {
        acks.to_string()
    }
}

/// CPU seconds (user + system) that the given processes have used, from /proc.
pub fn cpu_seconds(pids: &[u32]) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    let ticks = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<f64>().ok())
        .unwrap_or(100.0);
    let mut total = 0.0;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name, which is in parentheses and may hold spaces.
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let utime: f64 = f.get(11)?.parse().ok()?;
        let stime: f64 = f.get(12)?.parse().ok()?;
        total += (utime + stime) / ticks;
    }
    Some(total)
}

/// Microseconds as milliseconds.
fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// A produce run's records, records/s and payload MB/s (10^6 bytes to the MB).
struct Produced {
    shape: ProduceShape,
    records: u64,
    per_sec: f64,
    mb_per_sec: f64,
}

/// Prints one run as a table row (unless `--json`) and a JSON line.
pub fn print_report(args: &Args, r: &Report, cpu_us_per_op: Option<f64>) {
    let backend = format!("{:?}", args.backend).to_lowercase();
    let workload = format!("{:?}", r.workload).to_lowercase();
    let m = &r.meter;
    let rate = m.ops as f64 / r.secs;
    let (p50, p99, max) = (
        m.hist.value_at_quantile(0.5),
        m.hist.value_at_quantile(0.99),
        m.hist.max(),
    );
    let produced = r.produce.map(|shape| {
        let records = m.ops * shape.batch_records as u64;
        Produced {
            shape,
            records,
            per_sec: records as f64 / r.secs,
            mb_per_sec: (records * shape.record_bytes as u64) as f64 / r.secs / 1e6,
        }
    });
    if !args.json {
        let cpu = cpu_us_per_op.map_or("-".to_string(), |c| format!("{c:.0}"));
        let (label, rec_s, mb_s) = match &produced {
            Some(p) => (
                format!("{workload}/{}", acks_name(p.shape.acks)),
                format!("{:.0}", p.per_sec),
                format!("{:.1}", p.mb_per_sec),
            ),
            None => (workload.clone(), "-".to_string(), "-".to_string()),
        };
        println!(
            "{backend:<8} {label:<11} {:>7} {rate:>11.0} {:>9.3} {:>9.3} {:>9.3} {:>7} {cpu:>13} {rec_s:>11} {mb_s:>8}",
            r.clients,
            ms(p50),
            ms(p99),
            ms(max),
            m.errors,
        );
    }
    let cpu_json = cpu_us_per_op.map_or("null".to_string(), |c| format!("{c:.1}"));
    let produce_json = produced.map_or(String::new(), |p| {
        format!(
            ",\"acks\":\"{}\",\"batch_records\":{},\"record_bytes\":{},\"records\":{},\"records_per_sec\":{:.1},\"mb_per_sec\":{:.2}",
            acks_name(p.shape.acks),
            p.shape.batch_records,
            p.shape.record_bytes,
            p.records,
            p.per_sec,
            p.mb_per_sec
        )
    });
    println!(
        "{{\"backend\":\"{backend}\",\"workload\":\"{workload}\",\"clients\":{},\"ops\":{},\"errors\":{},\"ops_per_sec\":{rate:.1},\"p50_us\":{p50},\"p99_us\":{p99},\"max_us\":{max},\"server_cpu_us_per_op\":{cpu_json}{produce_json}}}",
        r.clients,
        m.ops,
        m.errors,
    );
    if let Some(e) = &m.first_error {
        eprintln!(
            "ferry-bench: {workload} at {} clients: {} errors, the first: {e}",
            r.clients, m.errors
        );
    }
}

/// The table's header row.
pub fn print_header() {
    println!(
        "{:<8} {:<11} {:>7} {:>11} {:>9} {:>9} {:>9} {:>7} {:>13} {:>11} {:>8}",
        "backend",
        "workload",
        "clients",
        "ops/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "errors",
        "srv cpu µs/op",
        "records/s",
        "MB/s"
    );
}

/// The bigvalue search's result: a table line (unless `--json`) and a JSON line.
pub fn print_bigvalue(args: &Args, backend: &str, n: usize, took: Duration) {
    if !args.json {
        println!(
            "{backend:<8} bigvalue    largest atomic reassignment: {n} partitions ({:.2} s to commit)",
            took.as_secs_f64()
        );
    }
    println!(
        "{{\"backend\":\"{backend}\",\"workload\":\"bigvalue\",\"partitions\":{n},\"commit_ms\":{:.1}}}",
        took.as_secs_f64() * 1000.0
    );
}
