//! Failover benchmark: three quorum-only `ferry node` processes on loopback, with the binary's
//! own Raft tuning unless `--node-arg` says otherwise. Over N leader kills (SIGKILL, restarted
//! once measured) and N leader pauses (SIGSTOP for at least `--pause-ms`, then SIGCONT), it
//! measures from the fault: the time until a surviving node reports a new leader (Status polled
//! every `--poll-ms`), and until the first linearizable read and the first write succeed (clients
//! trying all the time at every survivor, each attempt cut at `--attempt-timeout-ms`). After the
//! old leader is back it watches for `--settle-ms` whether the Raft term moves (a deposed leader
//! disrupting the new one). Prints a table and JSON lines.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use metastore::Client;
use proto::metastore as pb;
use tokio::sync::Mutex;

/// Failover benchmark.
#[derive(Parser)]
struct Args {
    /// Leader kills to measure.
    #[arg(long, default_value_t = 20)]
    kills: usize,
    /// Leader pauses to measure.
    #[arg(long, default_value_t = 20)]
    pauses: usize,
    /// A paused leader stays stopped at least this long (longer while a measure is pending).
    #[arg(long, default_value_t = 3000)]
    pause_ms: u64,
    /// A measure not done this long after its fault counts as missed.
    #[arg(long, default_value_t = 15000)]
    max_wait_ms: u64,
    /// How long to watch the term after the old leader is back.
    #[arg(long, default_value_t = 3000)]
    settle_ms: u64,
    /// Deadline of one read, write or Status attempt.
    #[arg(long, default_value_t = 250)]
    attempt_timeout_ms: u64,
    /// How often survivors' Status is polled.
    #[arg(long, default_value_t = 10)]
    poll_ms: u64,
    /// The `ferry` binary (default: next to this one).
    #[arg(long)]
    ferry: Option<PathBuf>,
    /// Where the nodes keep their data (default: a fresh dir under the temp dir, removed after).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// More arguments for every `ferry node`, e.g. `--node-arg=--election-min-ms=300`.
    #[arg(long, allow_hyphen_values = true)]
    node_arg: Vec<String>,
}

struct Node {
    id: u64,
    addr: String,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn spawn(&mut self, ferry: &PathBuf) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        let child = Command::new(ferry)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", ferry.display()))?;
        self.child = Some(child);
        Ok(())
    }

    fn signal(&self, sig: i32) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) with the pid of a child this process started and has not reaped.
            unsafe { libc::kill(c.id() as i32, sig) };
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        self.kill();
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fault {
    Kill,
    Pause,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Pause => "pause",
        }
    }
}

/// One fault's figures (milliseconds from the fault; `None`: not within `--max-wait-ms`).
#[derive(Debug, Clone)]
struct Sample {
    fault: Fault,
    old_leader: u64,
    new_leader: Option<u64>,
    leader_ms: Option<f64>,
    read_ms: Option<f64>,
    write_ms: Option<f64>,
    term_before: u64,
    term_after_fault: u64,
    term_after_return: u64,
}

impl Sample {
    /// Term changes after the old leader came back.
    fn disruptions(&self) -> u64 {
        self.term_after_return.saturating_sub(self.term_after_fault)
    }
}

/// (leader, term, revision) as node `i` reports it, within `t`.
async fn status(c: &Client, i: usize, t: Duration) -> Option<(u64, u64, u64)> {
    let s = tokio::time::timeout(t, c.status_of(i)).await.ok()?.ok()?;
    let h = s.header?;
    Some((h.leader_id, h.raft_term, h.revision))
}

/// Waits until every node names the same leader in the same term and a write succeeds; returns
/// (leader, term).
async fn wait_stable(c: &Client, n: usize, t: Duration) -> anyhow::Result<(u64, u64)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let views: Vec<_> = futures::future::join_all((0..n).map(|i| status(c, i, t))).await;
        if let Some(Some((l, term, _))) = views.first() {
            let agreed = views
                .iter()
                .all(|v| v.is_some_and(|(l2, t2, _)| l2 == *l && t2 == *term));
            if *l != 0 && agreed && c.put("/failover-bench/ready", "1").await.is_ok() {
                return Ok((*l, *term));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("the cluster did not settle on one leader within 60 s")
}

/// The highest term any of `idx` reports.
async fn max_term(c: &Client, idx: &[usize], t: Duration) -> u64 {
    let views = futures::future::join_all(idx.iter().map(|i| status(c, *i, t))).await;
    views.into_iter().flatten().map(|(_, term, _)| term).max().unwrap_or(0)
}

/// Retries `op` at each survivor until one succeeds; the ms from `t0` to that success.
async fn first_success<F, Fut>(survivors: &[usize], t0: Instant, until: Instant, t: Duration, op: F) -> Option<f64>
where
    F: Fn(usize) -> Fut + Clone,
    Fut: std::future::Future<Output = bool>,
{
    let tries = survivors.iter().map(|&i| {
        let op = op.clone();
        Box::pin(async move {
            while Instant::now() < until {
                let started = Instant::now();
                if tokio::time::timeout(t, op(i)).await.unwrap_or(false) {
                    return Some(t0.elapsed().as_secs_f64() * 1e3);
                }
                // An attempt refused at once is retried soon, not in a tight loop.
                if started.elapsed() < Duration::from_millis(5) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            None
        })
    });
    futures::future::select_ok(tries.map(|f| Box::pin(async move { f.await.ok_or(()) })))
        .await
        .ok()
        .map(|(ms, _)| ms)
}

/// The first leader other than `old_leader` that a survivor reports, and the ms since `t0`
/// it took; none by `until`.
async fn new_leader(
    c: &Client,
    survivors: &[usize],
    old_leader: u64,
    t0: Instant,
    until: Instant,
    poll: Duration,
    t: Duration,
) -> Option<(u64, f64)> {
    while Instant::now() < until {
        let views = futures::future::join_all(survivors.iter().map(|i| status(c, *i, t))).await;
        if let Some((l, _, _)) = views
            .into_iter()
            .flatten()
            .find(|(l, _, _)| *l != 0 && *l != old_leader)
        {
            return Some((l, t0.elapsed().as_secs_f64() * 1e3));
        }
        tokio::time::sleep(poll).await;
    }
    None
}

async fn measure(
    nodes: &Arc<Mutex<Vec<Node>>>,
    c: &Client,
    fault: Fault,
    a: &Args,
    ferry: &PathBuf,
) -> anyhow::Result<Sample> {
    let n = nodes.lock().await.len();
    let t = Duration::from_millis(a.attempt_timeout_ms);
    let (old_leader, term_before) = wait_stable(c, n, t).await?;
    let old = (old_leader - 1) as usize;
    let survivors: Vec<usize> = (0..n).filter(|i| *i != old).collect();
    let t0 = Instant::now();
    {
        let mut g = nodes.lock().await;
        match fault {
            Fault::Kill => g[old].kill(),
            Fault::Pause => g[old].signal(libc::SIGSTOP),
        }
    }
    let until = t0 + Duration::from_millis(a.max_wait_ms);
    let poll = Duration::from_millis(a.poll_ms);
    let leader = new_leader(c, &survivors, old_leader, t0, until, poll, t);
    let read = first_success(&survivors, t0, until, t, |i| async move {
        let req = pb::GetRequest {
            key: "/failover-bench/k".into(),
            serializable: false,
        };
        c.call_endpoint(i, |mut m| async move { m.get(req).await })
            .await
            .is_ok()
    });
    let write = first_success(&survivors, t0, until, t, |i| async move {
        let req = pb::PutRequest {
            key: "/failover-bench/k".into(),
            value: "v".into(),
            lease: 0,
            request_id: c.new_request_id(),
        };
        c.call_endpoint(i, |mut m| async move { m.put(req).await })
            .await
            .is_ok()
    });
    let (leader, read_ms, write_ms) = tokio::join!(leader, read, write);
    let term_after_fault = max_term(c, &survivors, t).await;
    // A paused leader stays stopped at least --pause-ms.
    let hold = t0 + Duration::from_millis(a.pause_ms);
    if fault == Fault::Pause && Instant::now() < hold {
        tokio::time::sleep(hold - Instant::now()).await;
    }
    {
        let mut g = nodes.lock().await;
        match fault {
            Fault::Kill => g[old].spawn(ferry)?,
            Fault::Pause => g[old].signal(libc::SIGCONT),
        }
    }
    tokio::time::sleep(Duration::from_millis(a.settle_ms)).await;
    let all: Vec<usize> = (0..n).collect();
    let term_after_return = max_term(c, &all, t).await.max(term_after_fault);
    Ok(Sample {
        fault,
        old_leader,
        new_leader: leader.map(|(l, _)| l),
        leader_ms: leader.map(|(_, ms)| ms),
        read_ms,
        write_ms,
        term_before,
        term_after_fault,
        term_after_return,
    })
}

/// min, p50, p90, max of `v` (nearest rank), or `None` when empty.
fn quantiles(v: &[f64]) -> Option<[f64; 4]> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = |q: f64| s[((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
    Some([s[0], rank(0.5), rank(0.9), s[s.len() - 1]])
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn print_results(samples: &[Sample], term_start: u64, term_end: u64) {
    println!(
        "{:<6} {:>3} {:<26} {:<26} {:<26} {:>11}",
        "fault", "n", "new leader ms", "first read ms", "first write ms", "disrupted"
    );
    println!(
        "{:<6} {:>3} {:<26} {:<26} {:<26} {:>11}",
        "", "", "min/p50/p90/max (missed)", "min/p50/p90/max (missed)", "min/p50/p90/max (missed)", "(terms)"
    );
    for fault in [Fault::Kill, Fault::Pause] {
        let of: Vec<&Sample> = samples.iter().filter(|s| s.fault == fault).collect();
        if of.is_empty() {
            continue;
        }
        let col = |f: fn(&Sample) -> Option<f64>| {
            let v: Vec<f64> = of.iter().filter_map(|s| f(s)).collect();
            let missed = of.len() - v.len();
            let q = quantiles(&v);
            let text = q.map_or("-".into(), |q| {
                format!("{:.0}/{:.0}/{:.0}/{:.0}", q[0], q[1], q[2], q[3])
            });
            (format!("{text} ({missed})"), q, missed)
        };
        let (l, lq, lm) = col(|s| s.leader_ms);
        let (r, rq, rm) = col(|s| s.read_ms);
        let (w, wq, wm) = col(|s| s.write_ms);
        let disrupted = of.iter().filter(|s| s.disruptions() > 0).count();
        let terms: u64 = of.iter().map(|s| s.disruptions()).sum();
        println!(
            "{:<6} {:>3} {l:<26} {r:<26} {w:<26} {:>11}",
            fault.name(),
            of.len(),
            format!("{disrupted} ({terms})")
        );
        let js = |q: Option<[f64; 4]>, missed: usize| {
            serde_json::json!({"min": q.map(|q| q[0]), "p50": q.map(|q| q[1]), "p90": q.map(|q| q[2]),
                "max": q.map(|q| q[3]), "missed": missed})
        };
        println!(
            "{}",
            serde_json::json!({"workload": "failover", "summary": fault.name(), "n": of.len(),
                "new_leader_ms": js(lq, lm), "first_read_ms": js(rq, rm), "first_write_ms": js(wq, wm),
                "disrupted_faults": disrupted, "disruption_term_changes": terms,
                "term_start": term_start, "term_end": term_end})
        );
    }
    println!("raft term: {term_start} at start, {term_end} at end");
}

/// Starts one quorum node per address, each with its data dir and log under `dir`.
fn spawn_nodes(a: &Args, dir: &Path, ferry: &PathBuf, addrs: &[String], peers: &str) -> anyhow::Result<Vec<Node>> {
    let mut nodes = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        let id = i as u64 + 1;
        let mut args: Vec<String> = ["node", "--roles", "quorum", "--id", &id.to_string(), "--listen", addr]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(["--peers".into(), peers.to_string(), "--data-dir".into()]);
        args.push(dir.join(format!("n{id}")).display().to_string());
        args.extend(a.node_arg.iter().cloned());
        let mut node = Node {
            id,
            addr: addr.clone(),
            args,
            log: dir.join(format!("node{id}.log")),
            child: None,
        };
        node.spawn(ferry)?;
        nodes.push(node);
    }
    Ok(nodes)
}

/// One sample: a line on stderr and a JSON line on stdout.
fn print_sample(fault: Fault, i: usize, s: &Sample) {
    let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
    eprintln!(
        "{} {}: leader {} -> {:?}: new leader {} ms, read {} ms, write {} ms; term {} -> {} -> {}",
        fault.name(),
        i + 1,
        s.old_leader,
        s.new_leader,
        ms(s.leader_ms),
        ms(s.read_ms),
        ms(s.write_ms),
        s.term_before,
        s.term_after_fault,
        s.term_after_return
    );
    println!(
        "{}",
        serde_json::json!({"workload": "failover", "fault": fault.name(), "i": i + 1,
            "old_leader": s.old_leader, "new_leader": s.new_leader, "new_leader_ms": s.leader_ms,
            "first_read_ms": s.read_ms, "first_write_ms": s.write_ms, "term_before": s.term_before,
            "term_after_fault": s.term_after_fault, "term_after_return": s.term_after_return})
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let ferry = match &a.ferry {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("ferry"),
    };
    let own_dir = a.data_dir.is_none();
    let dir = a
        .data_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("ferry-failover-bench-{}", std::process::id())));
    std::fs::create_dir_all(&dir)?;
    let addrs: Vec<String> = (0..3)
        .map(|_| free_port().map(|p| format!("127.0.0.1:{p}")))
        .collect::<anyhow::Result<_>>()?;
    let peers = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| format!("{}={a}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let nodes = spawn_nodes(&a, &dir, &ferry, &addrs, &peers)?;
    eprintln!(
        "3 nodes at {} (logs in {}), node args: {:?}",
        nodes
            .iter()
            .map(|n| format!("{}={}", n.id, n.addr))
            .collect::<Vec<_>>()
            .join(","),
        dir.display(),
        a.node_arg
    );
    let c = Client::new(&addrs)?;
    let t = Duration::from_millis(a.attempt_timeout_ms);
    let (_, term_start) = wait_stable(&c, 3, t).await?;
    let nodes = Arc::new(Mutex::new(nodes));
    let mut samples = Vec::new();
    for i in 0..a.kills.max(a.pauses) {
        for (fault, count) in [(Fault::Kill, a.kills), (Fault::Pause, a.pauses)] {
            if i >= count {
                continue;
            }
            let s = measure(&nodes, &c, fault, &a, &ferry).await?;
            print_sample(fault, i, &s);
            samples.push(s);
        }
    }
    let (_, term_end) = wait_stable(&c, 3, t).await?;
    print_results(&samples, term_start, term_end);
    drop(nodes);
    if own_dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::quantiles;

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(quantiles(&v), Some([1.0, 5.0, 9.0, 10.0]));
        assert_eq!(quantiles(&[3.0]), Some([3.0; 4]));
        assert_eq!(quantiles(&[]), None);
    }
}
