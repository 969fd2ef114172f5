//! The fault suite: three `ferry node` processes and a register workload from several clients
//! (reads, writes, compare-and-sets, plus writes of keys never overwritten), under randomized
//! SIGKILL + restart, SIGSTOP/SIGCONT and, where the machine allows (root with `ip netns`),
//! network partitions between network namespaces. At the end, with every fault healed: the
//! history must be linearizable, and every acknowledged write must be on every node. It reports
//! (without asserting on them) the longest stretches with no successful read and no successful
//! write, also leaving out the time two of the three nodes were down, when nothing can succeed.
//!
//! The clients run as a process of their own (`ferry-fault-client`); with namespaces, inside the
//! clients' namespace, so they reach the nodes only through the test's network.
//!
//! Settings (environment): FERRY_FAULT_SECS (seconds of faults per run, default 60),
//! FERRY_FAULT_RUNS (default 1), FERRY_FAULT_SEED (default random; logged),
//! FERRY_FAULT_NETNS (`auto` default: partitions when possible; `0` never; `1` required),
//! FERRY_FAULT_STALE_READS=1 (serializable reads, which may be stale: the run should then fail,
//! which shows the checker catches stale reads in a real history), FERRY_FAULT_KEEP=1 (keep each
//! run's node logs, data and history; a failed run's are always kept), FERRY_FAULT_STRICT=1 (fail
//! a run whose linearizable reads are not served again within 60 s of the heal; by default that
//! is reported as LIVENESS, since it says nothing about the safety this suite asserts).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use metastore::RaftTuning;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tests::fault_client::{self, FinalState, NodeView};
use tests::history::{self, Call, Op, Outcome};
use tests::linearizable;
use tests::netns::Net;
use tests::ProcNode;

const CLIENT_BIN: &str = env!("CARGO_BIN_EXE_ferry-fault-client");
const NODES: usize = 3;
const CLIENTS: u32 = 5;
const KEYS: u32 = 4;
/// Clients go on this long after the last fault starts, to see the cluster recover.
const TAIL_SECS: f64 = 12.0;
/// Search steps the checker may spend per key.
const CHECK_BUDGET: u64 = 20_000_000;

struct Settings {
    secs: f64,
    runs: u32,
    seed: u64,
    netns: bool,
    /// Stale-prone reads, to see the checker fail (FERRY_FAULT_STALE_READS=1).
    serializable_reads: bool,
    /// Keep every run's dir, not only failed ones (FERRY_FAULT_KEEP=1).
    keep: bool,
    /// Fail a run whose linearizable reads do not come back after the heal (FERRY_FAULT_STRICT=1).
    strict: bool,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn settings() -> Settings {
    let want = std::env::var("FERRY_FAULT_NETNS").unwrap_or_else(|_| "auto".into());
    let netns = match want.as_str() {
        "0" => false,
        "1" => {
            assert!(
                Net::available(),
                "FERRY_FAULT_NETNS=1 but network namespaces cannot be made here"
            );
            true
        }
        _ => Net::available(),
    };
    Settings {
        secs: env_or("FERRY_FAULT_SECS", 60.0),
        runs: env_or("FERRY_FAULT_RUNS", 1),
        seed: env_or("FERRY_FAULT_SEED", rand::random::<u32>() as u64),
        netns,
        serializable_reads: env_or("FERRY_FAULT_STALE_READS", 0) == 1,
        keep: env_or("FERRY_FAULT_KEEP", 0) == 1,
        strict: env_or("FERRY_FAULT_STRICT", 0) == 1,
    }
}

/// The cluster and where it runs. Nodes go before the namespaces they live in.
struct Site {
    nodes: Vec<ProcNode>,
    net: Option<Net>,
    endpoints: Vec<String>,
    /// Data dirs, node logs, the history; kept when a run fails.
    dir: Option<tempfile::TempDir>,
}

impl Site {
    fn start(netns: bool) -> Site {
        let dir = tempfile::tempdir().expect("temp dir");
        let net = netns.then(|| Net::create(NODES).expect("making network namespaces"));
        let peers: BTreeMap<u64, String> = match &net {
            Some(n) => (1..=NODES)
                .map(|i| (i as u64, format!("{}:7000", n.node_ip(i))))
                .collect(),
            None => tests::loopback_peers(NODES as u64),
        };
        let nodes = peers
            .iter()
            .map(|(id, addr)| {
                // The timing `ferry node` runs with by default, not the tests' slower one: the
                // gaps reported are those an operator's cluster would show.
                let data = dir.path().join(format!("n{id}"));
                let node = ProcNode::tuned(*id, addr, &data, &peers, false, RaftTuning::default())
                    .with_args(&["--roles", "quorum"])
                    .log_to(&dir.path().join(format!("node{id}.log")));
                match &net {
                    Some(n) => node.in_netns(&n.node_ns(*id as usize)),
                    None => node,
                }
            })
            .collect();
        let mut site = Site {
            nodes,
            net,
            endpoints: peers.values().cloned().collect(),
            dir: Some(dir),
        };
        for n in &mut site.nodes {
            n.spawn();
        }
        let ok = site
            .client()
            .args(["ready", "--secs", "60"])
            .status()
            .expect("running the client");
        assert!(ok.success(), "the cluster did not form");
        site
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.as_ref().expect("the run's dir").path().join(name)
    }

    /// Keeps the run's dir (data, node logs, history) for a post-mortem; returns where it is.
    fn keep(&mut self) -> String {
        self.dir
            .take()
            .map_or_else(String::new, |d| d.keep().display().to_string())
    }

    /// The client binary, in the clients' namespace when there is one.
    fn client(&self) -> Command {
        let mut c = match &self.net {
            Some(n) => Net::command_in(&n.client_ns(), Path::new(CLIENT_BIN)),
            None => Command::new(CLIENT_BIN),
        };
        c.arg("--endpoints").arg(self.endpoints.join(","));
        c
    }

    fn probe(&self) -> Vec<NodeView> {
        let out = self
            .client()
            .args(["probe", "--timeout-ms", "500"])
            .stderr(Stdio::inherit())
            .output()
            .expect("running the probe");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The leader's index in `nodes`, if some node names one.
    fn leader(&self) -> Option<usize> {
        fault_client::leader_of(&self.probe()).map(|id| id as usize - 1)
    }

    /// Resumes every node, restarts dead ones, and undoes every partition.
    fn heal(&mut self) {
        for n in &mut self.nodes {
            if n.running() {
                n.resume();
            } else {
                n.spawn();
            }
        }
        if let Some(net) = &self.net {
            net.heal();
        }
    }
}

/// Microseconds as seconds for the report; `none` for nothing.
fn secs(us: Option<u64>) -> String {
    us.map_or("none".into(), |us| format!("{:.2} s", us as f64 / 1e6))
}

fn sleep_s(s: f64) {
    std::thread::sleep(Duration::from_secs_f64(s));
}

/// Injects one random fault and undoes it; returns what it did, for the log. A fault that
/// leaves a majority down adds its window (microseconds since `t0`) to `quorum_lost`.
fn one_fault(site: &mut Site, rng: &mut StdRng, t0: Instant, quorum_lost: &mut Vec<(u64, u64)>) -> String {
    // Every draw is made whatever the cluster does, so that a seed gives the same kinds and
    // durations of faults (only which node leads can differ).
    let kinds = if site.net.is_some() { 6 } else { 4 };
    let (aim_leader, any, kind) = (
        rng.random_bool(0.75),
        rng.random_range(0..NODES),
        rng.random_range(0..kinds),
    );
    let (u1, u2, other_off): (f64, f64, usize) = (rng.random(), rng.random(), rng.random_range(1..NODES));
    let span = |lo: f64, hi: f64, u: f64| lo + (hi - lo) * u;
    let leader = site.leader();
    // Mostly the leader: that is where faults hurt.
    let (target, who) = match leader {
        Some(l) if aim_leader => (l, "leader"),
        _ => (any, "a node"),
    };
    let id = target + 1;
    match kind {
        0 => {
            let down = span(0.1, 3.0, u1);
            site.nodes[target].kill();
            sleep_s(down);
            site.nodes[target].spawn();
            format!("SIGKILL {who} (node {id}), restarted after {down:.1} s")
        }
        1 => {
            let pause = span(0.3, 5.0, u1);
            site.nodes[target].pause();
            sleep_s(pause);
            site.nodes[target].resume();
            format!("SIGSTOP {who} (node {id}) for {pause:.1} s")
        }
        2 => {
            // The leader for ~3 s, then whoever leads next for ~3 s.
            let l1 = leader.unwrap_or(target);
            let (p1, p2) = (span(2.0, 4.0, u1), span(2.0, 4.0, u2));
            site.nodes[l1].pause();
            sleep_s(p1);
            site.nodes[l1].resume();
            let l2 = site.leader().unwrap_or((l1 + 1) % NODES);
            site.nodes[l2].pause();
            sleep_s(p2);
            site.nodes[l2].resume();
            format!(
                "SIGSTOP leader (node {}) {p1:.1} s, then leader (node {}) {p2:.1} s",
                l1 + 1,
                l2 + 1
            )
        }
        3 => {
            // Quorum lost for a while: the leader and one more node die.
            let other = (target + other_off) % NODES;
            let down = span(0.5, 4.0, u1);
            site.nodes[target].kill();
            site.nodes[other].kill();
            let lost_at = t0.elapsed().as_micros() as u64;
            sleep_s(down);
            site.nodes[target].spawn();
            site.nodes[other].spawn();
            quorum_lost.push((lost_at, t0.elapsed().as_micros() as u64));
            format!(
                "SIGKILL {who} (node {id}) and node {}, restarted after {down:.1} s",
                other + 1
            )
        }
        4 => {
            let net = site.net.as_ref().expect("only with namespaces");
            let t = span(1.0, 8.0, u1);
            net.isolate(id, true).expect("isolating a node");
            sleep_s(t);
            net.isolate(id, false).expect("reconnecting a node");
            format!("isolated {who} (node {id}) from everyone for {t:.1} s")
        }
        _ => {
            let net = site.net.as_ref().expect("only with namespaces");
            let t = span(1.0, 8.0, u1);
            net.cut_peers(id, true).expect("cutting a node from its peers");
            sleep_s(t);
            net.cut_peers(id, false).expect("restoring a node's peers");
            format!("cut {who} (node {id}) from the other nodes (clients still reach it) for {t:.1} s")
        }
    }
}

/// What one run saw.
struct RunResult {
    faults: usize,
    counts: history::Counts,
    read_gap: (u64, u64),
    write_gap: (u64, u64),
    /// The same gaps, not counting time with a majority of the nodes down.
    gaps_up: (u64, u64),
    /// From the heal to the first successful read and write begun after it.
    recovery: (Option<u64>, Option<u64>),
    /// Whether linearizable reads were served again at the end.
    reads_back: bool,
    check_steps: u64,
}

fn wait_child(child: &mut Child, within: Duration, what: &str) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        match child.try_wait().expect("waiting for a child") {
            Some(s) if s.success() => return Ok(()),
            Some(s) => return Err(format!("{what} failed: {s}")),
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} did not finish within {within:?}"));
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn run_once(run: u32, seed: u64, s: &Settings) -> RunResult {
    let mode = if s.netns { "network namespaces" } else { "loopback" };
    eprintln!("run {run}: seed {seed}, {:.0} s of faults, {mode}", s.secs);
    let started = Instant::now();
    let mut site = Site::start(s.netns);
    eprintln!("  cluster up in {:.1} s", started.elapsed().as_secs_f64());
    match faults_and_checks(&mut site, run, seed, s) {
        Ok(r) => {
            if s.keep {
                eprintln!("run {run}: node logs, data and history kept in {}", site.keep());
            }
            r
        }
        Err(e) => {
            let kept = site.keep();
            panic!("run {run} (seed {seed}): {e}\nnode logs, data and history kept in {kept}");
        }
    }
}

fn faults_and_checks(site: &mut Site, run: u32, seed: u64, s: &Settings) -> Result<RunResult, String> {
    let hist_path = site.path("history.jsonl");
    let end_path = site.path("final.json");
    let workload_secs = s.secs + TAIL_SECS;
    let t0 = Instant::now();
    let mut workload = site
        .client()
        .args([
            "workload",
            "--clients",
            &CLIENTS.to_string(),
            "--keys",
            &KEYS.to_string(),
        ])
        .args(["--secs", &workload_secs.to_string(), "--seed", &seed.to_string()])
        .args(s.serializable_reads.then_some("--serializable-reads"))
        .arg("--out")
        .arg(&hist_path)
        .spawn()
        .expect("starting the workload");

    let mut rng = StdRng::seed_from_u64(seed);
    let (mut faults, mut quorum_lost) = (0, Vec::new());
    while t0.elapsed().as_secs_f64() < s.secs {
        sleep_s(rng.random_range(0.3..2.0));
        let at = t0.elapsed().as_secs_f64();
        let what = one_fault(site, &mut rng, t0, &mut quorum_lost);
        faults += 1;
        eprintln!("  [{at:6.1} s] fault {faults}: {what}");
    }
    site.heal();
    let healed_us = t0.elapsed().as_micros() as u64;
    eprintln!("  [{:6.1} s] healed", healed_us as f64 / 1e6);
    // Clients stop starting operations at workload_secs; one in flight ends within 5 s.
    wait_child(
        &mut workload,
        Duration::from_secs_f64(workload_secs + 90.0),
        "the workload",
    )?;
    eprintln!("  [{:6.1} s] workload done", t0.elapsed().as_secs_f64());
    let status = site
        .client()
        .args([
            "final",
            "--keys",
            &KEYS.to_string(),
            "--secs",
            "120",
            "--read-secs",
            "60",
            "--out",
        ])
        .arg(&end_path)
        .status()
        .expect("running the final read");
    if !status.success() {
        return Err(
            "the final read failed: the cluster did not serve reads and writes again within 120 s of the heal".into(),
        );
    }
    eprintln!("  [{:6.1} s] final state read", t0.elapsed().as_secs_f64());

    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut ops = history::from_json_lines(&read(&hist_path)?).map_err(|e| format!("history: {e}"))?;
    let end: FinalState = serde_json::from_str(&read(&end_path)?).map_err(|e| format!("final state: {e}"))?;
    let end_us = ops.iter().map(|o| o.complete_us).max().unwrap_or(0);
    let counts = history::counts(&ops);
    let read_gap = history::longest_gap(&ops, 0, end_us, Op::read_ok);
    let write_gap = history::longest_gap(&ops, 0, end_us, Op::write_ok);
    // Not counting the time two of the three nodes were down, when nothing can succeed.
    let read_gap_up = history::longest_gap_outside(&ops, 0, end_us, &quorum_lost, Op::read_ok);
    let write_gap_up = history::longest_gap_outside(&ops, 0, end_us, &quorum_lost, Op::write_ok);
    let recovery = (
        history::first_after(&ops, healed_us, Op::read_ok),
        history::first_after(&ops, healed_us, Op::write_ok),
    );
    let reads_back = end.reads_served;
    if !reads_back {
        eprintln!(
            "LIVENESS: run {run} (seed {seed}): linearizable reads were still not served {:.0} s after the \
             closing write, with every fault healed; the registers' final values were {}",
            end.read_wait_s,
            if end.registers.is_some() {
                "confirmed by guarded transactions instead"
            } else {
                "not confirmed either"
            }
        );
        if s.strict {
            return Err("linearizable reads did not come back after the heal (FERRY_FAULT_STRICT=1)".into());
        }
    }
    if end.registers.is_none() {
        return Err("the registers' final values could be neither read nor confirmed by a transaction".into());
    }
    // The closing reads came after every operation ended.
    for (key, value) in end.registers.iter().flatten() {
        ops.push(Op {
            client: u32::MAX,
            key: key.clone(),
            call: Call::Read,
            outcome: Outcome::Read { value: value.clone() },
            invoke_us: end_us + 1,
            complete_us: end_us + 2,
            node: 0,
        });
    }
    let check_start = Instant::now();
    let report = linearizable::check_history(&ops, CHECK_BUDGET);
    let lost = fault_client::durability_problems(&ops, &end);
    let gap = |(len, at): (u64, u64)| format!("{:.2} s (from {:.1} s)", len as f64 / 1e6, at as f64 / 1e6);
    eprintln!(
        "run {run}: {} ops ({} reads ok, {} writes/CAS ok, {} CAS guard failed, {} unknown, {} failed), \
         {faults} faults; longest with no successful read {}, with no successful write {}; \
         the same not counting time with a majority down: read {}, write {}; \
         after the heal, first read in {}, first write in {}; checker {} steps over {} keys in {:.1} s",
        counts.ops,
        counts.reads_ok,
        counts.writes_ok,
        counts.cas_failed,
        counts.unknown,
        counts.failed,
        gap(read_gap),
        gap(write_gap),
        gap(read_gap_up),
        gap(write_gap_up),
        secs(recovery.0),
        secs(recovery.1),
        report.steps,
        report.keys,
        check_start.elapsed().as_secs_f64()
    );
    std::fs::write(site.path("checked.jsonl"), history::to_json_lines(&ops)).map_err(|e| e.to_string())?;
    if !report.violations.is_empty() {
        for (key, d) in &report.violations {
            eprintln!("NOT LINEARIZABLE on {key}: {d}");
        }
        return Err(format!(
            "history not linearizable on {} key(s) (checked.jsonl is the history)",
            report.violations.len()
        ));
    }
    if !report.inconclusive.is_empty() {
        return Err(format!("the checker ran out of budget on {:?}", report.inconclusive));
    }
    if !lost.is_empty() {
        return Err(format!("acknowledged writes missing:\n{}", lost.join("\n")));
    }
    if faults < 3 {
        return Err(format!("only {faults} faults injected"));
    }
    if counts.reads_ok < 50 || counts.writes_ok < 50 {
        return Err(format!("too little got done to judge: {counts:?}"));
    }
    Ok(RunResult {
        faults,
        counts,
        read_gap,
        write_gap,
        gaps_up: (read_gap_up.0, write_gap_up.0),
        recovery,
        reads_back,
        check_steps: report.steps,
    })
}

#[test]
fn histories_stay_linearizable_and_acknowledged_writes_survive_faults() {
    let s = settings();
    if !s.netns {
        eprintln!("network namespaces unavailable or disabled: kills and pauses on loopback only, no partitions");
    }
    let mut results = Vec::new();
    for run in 0..s.runs {
        results.push(run_once(run, s.seed + u64::from(run), &s));
    }
    let max = |f: fn(&RunResult) -> u64| results.iter().map(f).max().unwrap_or(0);
    let worst = |f: fn(&RunResult) -> Option<u64>| {
        // A run with no success after the heal is the worst there is.
        results
            .iter()
            .map(|r| f(r).unwrap_or(u64::MAX))
            .max()
            .filter(|m| *m != u64::MAX)
    };
    eprintln!(
        "fault suite: {} run(s) from seed {}, {} faults, {} ops, {} checker steps; \
         longest with no successful read {}, with no successful write {}; \
         not counting time with a majority down: read {}, write {}; \
         after the heal, first read within {}, first write within {}; \
         {} run(s) where linearizable reads never came back",
        results.len(),
        s.seed,
        results.iter().map(|r| r.faults).sum::<usize>(),
        results.iter().map(|r| r.counts.ops).sum::<usize>(),
        results.iter().map(|r| r.check_steps).sum::<u64>(),
        secs(Some(max(|r| r.read_gap.0))),
        secs(Some(max(|r| r.write_gap.0))),
        secs(Some(max(|r| r.gaps_up.0))),
        secs(Some(max(|r| r.gaps_up.1))),
        secs(worst(|r| r.recovery.0)),
        secs(worst(|r| r.recovery.1)),
        results.iter().filter(|r| !r.reads_back).count(),
    );
}
