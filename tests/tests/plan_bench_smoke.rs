//! `ferry-plan-bench` with tiny flags, so that the drain benchmark keeps working: every variant
//! drains broker 4 to empty on its own cluster, within its caps, and the scale run stores and
//! finishes its plan.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// The `ferry-plan-bench` binary, built beside `ferry` in the same profile.
fn plan_bench_bin() -> PathBuf {
    tests::ferry_bin().with_file_name("ferry-plan-bench")
}

#[test]
fn ferry_plan_bench_drains_every_way_and_reports_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(plan_bench_bin())
        .args(["--partitions", "6", "--partition-bytes", "65536", "--cap", "2"])
        .args(["--throttle", "1000000", "--rate", "40", "--idle-seconds", "1"])
        .args(["--scale-partitions", "60", "--timeout-s", "120", "--json"])
        .arg("--work-dir")
        .arg(dir.path())
        .output()
        .expect("running ferry-plan-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let of = |figure: &'static str| lines.iter().filter(move |v| v["figure"] == figure);
    let disk = of("disk").next().unwrap_or_else(|| panic!("no disk figure: {stdout}"));
    assert!(disk["cp_sync_s"].as_f64().unwrap() > 0.0, "{disk}");

    let drains: Vec<&Value> = of("drain").collect();
    let names: Vec<&str> = drains.iter().map(|d| d["variant"].as_str().unwrap()).collect();
    assert_eq!(names, ["uncapped", "capped", "throttled", "bulk"], "{stdout}");
    for d in &drains {
        // The six data partitions and the producer's three, each with a replica on broker 4.
        assert_eq!(d["moves"], 9, "{d}");
        assert_eq!(d["done"], 9, "{d}");
        assert_eq!(d["left_on_broker"], 0, "{d}");
        assert_eq!(d["cap_exceeded"], false, "{d}");
        assert!(d["bytes"].as_u64().unwrap() >= 6 * 65536, "{d}");
        assert!(d["wall_s"].as_f64().unwrap() > 0.0, "{d}");
        assert!(d["idle_count"].as_u64().unwrap() > 0, "{d}");
        assert_eq!(d["errors"], 0, "{d}");
    }
    let throttled = drains.iter().find(|d| d["variant"] == "throttled").unwrap();
    assert!(throttled["ideal_even_s"].as_f64().unwrap() > 0.0, "{throttled}");
    assert!(throttled["peak_into"].as_u64().unwrap() <= 2, "{throttled}");

    let scale = of("scale")
        .next()
        .unwrap_or_else(|| panic!("no scale figure: {stdout}"));
    assert_eq!(scale["moves"], 60, "{scale}");
    assert!(scale["stored_bytes"].as_u64().unwrap() > 60, "{scale}");
    assert!(scale["move_mem_bytes"].as_f64().unwrap() >= 16.0, "{scale}");
    assert!(scale["controller_cpu_s"].as_f64().unwrap() >= 0.0, "{scale}");
}
