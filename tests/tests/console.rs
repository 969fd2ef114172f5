//! The web console in a real browser (headless `chromium`): during a throttled reassignment,
//! with hand throttles and a consumer group that lags, each page shows the numbers the CLI and
//! Kafka's tools print, and a screenshot of each page is saved.

use std::collections::BTreeMap;
use std::time::Duration;

use tests::browser::{self, attr, num, tag_with, tags_with};
use tests::data::isr_is;
use tests::kafka::tool;
use tests::reassign::{alter, create, ok, produce_n};
use tests::{run_ferry, wait_until};

/// The move's own throttle: its 6 MB copy (two adding replicas) takes minutes at this rate, so
/// it is in flight while every page loads.
const RATE: i64 = 30_000;
/// The hand throttle on broker 2, removed by Ferry once no move touches broker 2.
const HAND_RATE: &str = "7000000";
/// Records the group reads, then records produced after it stopped: its lag.
const READ: usize = 100;
const LAG: usize = 37;

/// `2.9 MB` (as `ferry reassign --progress` prints sizes, in powers of 1000) in bytes.
fn parse_bytes(s: &str) -> Option<f64> {
    let (v, unit) = s.trim().split_once(' ')?;
    let m = match unit {
        "B" => 1.0,
        "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => return None,
    };
    Some(v.parse::<f64>().ok()? * m)
}

/// Bytes left of `partition` summed over its copies, from `ferry reassign --progress` lines
/// such as `t-0: replica 3: 1.0 MB copied, 2.9 MB left, 30.0 kB/s, ETA 1m 37s`.
fn cli_bytes_left(out: &str, partition: &str) -> f64 {
    out.lines()
        .filter(|l| l.starts_with(&format!("{partition}: replica ")))
        .filter_map(|l| {
            let left = l.split(", ").find(|p| p.ends_with(" left"))?;
            parse_bytes(left.trim_end_matches(" left"))
        })
        .sum()
}

/// Per broker (leaders, replicas), from `ferry topics --describe` of every topic.
fn cli_counts(out: &str) -> BTreeMap<i64, (i64, i64)> {
    let mut counts: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for l in out.lines().filter(|l| l.starts_with("\tTopic: ")) {
        for col in l.split('\t') {
            if let Some(leader) = col.strip_prefix("Leader: ").and_then(|v| v.parse().ok()) {
                counts.entry(leader).or_default().0 += 1;
            }
            if let Some(rs) = col.strip_prefix("Replicas: ") {
                for r in rs.split(',').filter_map(|r| r.parse().ok()) {
                    counts.entry(r).or_default().1 += 1;
                }
            }
        }
    }
    counts
}

/// Replicas (not future logs) per log dir, from `ferry log-dirs --describe`'s JSON.
fn cli_dir_replicas(out: &str) -> BTreeMap<String, i64> {
    let json = out.lines().find(|l| l.starts_with('{')).expect("log-dirs JSON");
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let mut dirs = BTreeMap::new();
    for b in v["brokers"].as_array().unwrap() {
        for d in b["logDirs"].as_array().unwrap() {
            let n = d["partitions"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["isFuture"] == false)
                .count();
            dirs.insert(d["logDir"].as_str().unwrap().to_string(), n as i64);
        }
    }
    dirs
}

/// The lag of `group` that `kafka-consumer-groups --describe` prints, summed over its rows.
fn kafka_lag(kafka: &str, group: &str) -> Option<i64> {
    let (ok, out) = tool(
        "kafka-consumer-groups",
        &["--bootstrap-server", kafka, "--describe", "--group", group],
        "",
    );
    let rows: Vec<i64> = out
        .lines()
        .filter(|l| l.starts_with(&format!("{group} ")))
        .filter_map(|l| l.split_whitespace().nth(5)?.parse().ok())
        .collect();
    (ok && !rows.is_empty()).then(|| rows.iter().sum())
}

/// The DOM of the console's `tab` once the page drew it and `ready` holds (retried up to a
/// minute: the first answer of a node may come before its first rate sample).
async fn page(console: &str, tab: &str, ready: impl Fn(&str) -> bool) -> String {
    let url = format!("{console}#{tab}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let u = url.clone();
        let dom = tokio::task::spawn_blocking(move || browser::dump_dom(&u, 4000))
            .await
            .unwrap();
        let body = browser::start_tags(&dom).find(|t| t.starts_with("body "));
        let loaded = body.and_then(|b| attr(b, "data-loaded")).as_deref() == Some(tab);
        if loaded && ready(&dom) {
            return dom;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the {tab} page never showed what was expected; last DOM:\n{dom}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Saves a screenshot of `tab` where test output is kept, and prints its path.
async fn screenshot(console: &str, tab: &str) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{tab}.png"));
    let url = format!("{console}#{tab}");
    let p = path.clone();
    tokio::task::spawn_blocking(move || browser::screenshot(&url, &p, 4000))
        .await
        .unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() > 1000, "{}", path.display());
    println!("screenshot of the {tab} page: {}", path.display());
}

fn ferry_ok(args: &[&str]) -> String {
    let (code, out, err) = run_ferry(args);
    assert_eq!(code, 0, "ferry {args:?}: {out}{err}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_page_shows_what_the_cli_prints_during_a_running_move() {
    assert!(
        browser::chromium().is_some(),
        "chromium is not installed (tools/test.sh installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let http: BTreeMap<i32, u16> = (1..=4).map(|id| (id, tests::free_port())).collect();
    let (four, k) = tests::kafka::start(dir.path(), |id| {
        vec!["--http-listen".to_string(), format!("127.0.0.1:{}", http[&id])]
    })
    .await;
    let (c, b, kb) = (four.client.clone(), four.bootstrap(), k.bootstrap());
    // Broker 4 is broker-only: its console asks the quorum's admin service.
    let console = format!("http://127.0.0.1:{}/", http[&4]);

    // A group that read READ records and stopped, then LAG more records: first, so that the
    // offsets topic it creates is there before anything is counted.
    create(&c, "grp", vec![vec![1, 2]], &[]).await;
    wait_until(Duration::from_secs(30), "grp in sync", || isr_is(&c, "grp", 0, &[1, 2])).await;
    produce_n(&c, "grp", 0, 1, READ, 10).await;
    let (read, out) = tool(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            &kb,
            "--topic",
            "grp",
            "--group",
            "g",
            "--from-beginning",
            "--max-messages",
            &READ.to_string(),
            "--timeout-ms",
            "60000",
        ],
        "",
    );
    assert!(read, "{out}");
    produce_n(&c, "grp", 0, 1, LAG, 10).await;
    let kb2 = kb.clone();
    wait_until(
        Duration::from_secs(120),
        "kafka-consumer-groups to print the lag",
        || {
            let kb = kb2.clone();
            async move { tokio::task::spawn_blocking(move || kafka_lag(&kb, "g")).await.unwrap() == Some(LAG as i64) }
        },
    )
    .await;

    // A hand throttle Ferry removes after the moves on broker 2, one that stays, and a move
    // under its own low throttle.
    create(&c, "moving", vec![vec![1, 2]], &[]).await;
    create(&c, "quiet", vec![vec![3]], &[]).await;
    wait_until(Duration::from_secs(30), "moving in sync", || {
        isr_is(&c, "moving", 0, &[1, 2])
    })
    .await;
    produce_n(&c, "moving", 0, 30, 100, 1000).await;
    // The plan below drains broker 3 largest partition first: this one keeps it running.
    produce_n(&c, "quiet", 0, 30, 100, 1000).await;
    ferry_ok(&[
        "throttles",
        "--brokers",
        "2",
        "--leader-rate",
        HAND_RATE,
        "--auto-remove",
        "--bootstrap-server",
        &b,
    ]);
    ferry_ok(&[
        "throttles",
        "--topic",
        "quiet",
        "--follower-replicas",
        "*",
        "--bootstrap-server",
        &b,
    ]);
    ok(&alter(&c, &[("moving", 0, Some(vec![3, 4]))], Some(RATE)).await);

    // Moves: the partition with a live rate, and bytes left of the order `--progress` prints.
    let moving_tag = ["class=\"card move\"", "data-partition=\"moving-0\""];
    let dom = page(&console, "moves", |d| {
        tag_with(d, &moving_tag).is_some_and(|t| num(t, "data-rate").is_some_and(|r| r > 0))
    })
    .await;
    let cli = ferry_ok(&["reassign", "--progress", "--bootstrap-server", &b]);
    let t = tag_with(&dom, &moving_tag).unwrap();
    let dom_left = num(t, "data-bytes-left").unwrap() as f64;
    let cli_left = cli_bytes_left(&cli, "moving-0");
    assert!(dom_left > 0.0 && cli_left > 0.0, "{dom_left} {cli_left}\n{cli}");
    assert!(
        dom_left / cli_left < 10.0 && cli_left / dom_left < 10.0,
        "bytes left: page {dom_left}, CLI {cli_left}\n{cli}"
    );
    assert_eq!(num(t, "data-throttle-rate"), Some(RATE));
    for r in [3, 4] {
        let broker = format!("data-broker=\"{r}\"");
        let parts = ["class=\"copy meta\"", "data-partition=\"moving-0\"", broker.as_str()];
        assert!(tag_with(&dom, &parts).is_some(), "no copy to broker {r}");
    }
    let total = tag_with(&dom, &["id=\"moves-total\""]).unwrap();
    assert_eq!(num(total, "data-partitions"), Some(1));
    screenshot(&console, "moves").await;

    // Brokers: leader and replica counts as `ferry topics --describe` prints them, and each
    // dir's replicas as `ferry log-dirs --describe` lists them.
    let dom = page(&console, "brokers", |d| {
        tags_with(d, &["class=\"card broker\""]).len() == 4
    })
    .await;
    let counts = cli_counts(&ferry_ok(&["topics", "--describe", "--bootstrap-server", &b]));
    let dirs = cli_dir_replicas(&ferry_ok(&["log-dirs", "--describe", "--bootstrap-server", &b]));
    for id in 1..=4i64 {
        let broker = format!("data-broker=\"{id}\"");
        let t = tag_with(&dom, &["class=\"card broker\"", broker.as_str()]).unwrap();
        let (leaders, replicas) = counts.get(&id).copied().unwrap_or_default();
        assert_eq!(num(t, "data-leaders"), Some(leaders), "broker {id} leaders");
        assert_eq!(num(t, "data-replicas"), Some(replicas), "broker {id} replicas");
    }
    assert!(
        counts[&4].1 >= 1,
        "the move's adding replica counts on broker 4: {counts:?}"
    );
    let mut shown = 0;
    for t in tags_with(&dom, &["class=\"dir\""]) {
        let path = attr(t, "data-dir").unwrap();
        assert_eq!(num(t, "data-replicas"), dirs.get(&path).copied(), "{path}");
        assert!(num(t, "data-total-bytes").unwrap() > 0, "{path}");
        shown += 1;
    }
    assert_eq!(shown, dirs.len());
    screenshot(&console, "brokers").await;

    // Throttles: the hand ones with their owners, and the move's own rate.
    let dom = page(&console, "throttles", |d| {
        tag_with(d, &["data-scope=\"move\""]).is_some()
    })
    .await;
    let hand = tag_with(
        &dom,
        &[
            "data-scope=\"broker\"",
            "data-name=\"2\"",
            "data-key=\"leader.replication.throttled.rate\"",
        ],
    )
    .expect("broker 2's hand throttle");
    assert_eq!(attr(hand, "data-value").as_deref(), Some(HAND_RATE));
    assert_eq!(attr(hand, "data-owner").as_deref(), Some("auto-remove"));
    assert_eq!(
        attr(hand, "data-armed").as_deref(),
        Some("true"),
        "the move on broker 2 armed it"
    );
    let quiet = tag_with(&dom, &["data-scope=\"topic\"", "data-name=\"quiet\""]).expect("quiet's hand throttle");
    assert_eq!(
        attr(quiet, "data-key").as_deref(),
        Some("follower.replication.throttled.replicas")
    );
    assert_eq!(attr(quiet, "data-owner").as_deref(), Some("hand"));
    let own = tag_with(&dom, &["data-scope=\"move\"", "data-name=\"moving-0\""]).unwrap();
    assert_eq!(num(own, "data-value"), Some(RATE));
    assert_eq!(attr(own, "data-owner").as_deref(), Some("move"));
    screenshot(&console, "throttles").await;

    // Groups: the lag kafka-consumer-groups printed.
    let dom = page(&console, "groups", |d| {
        tag_with(d, &["data-group=\"g\"", "data-total-lag"]).is_some()
    })
    .await;
    let g = tag_with(&dom, &["class=\"card group\"", "data-group=\"g\""]).unwrap();
    assert_eq!(num(g, "data-total-lag"), Some(LAG as i64));
    let row = tag_with(&dom, &["data-group=\"g\"", "data-partition=\"grp-0\""]).unwrap();
    assert_eq!(num(row, "data-committed"), Some(READ as i64));
    assert_eq!(num(row, "data-end"), Some((READ + LAG) as i64));
    screenshot(&console, "groups").await;

    // Plans: a drain of broker 3, one move at a time under a low throttle, runs while the page
    // loads; the page shows the counts `ferry plan show` prints.
    let started = ferry_ok(&[
        "plan",
        "drain",
        "--broker",
        "3",
        "--throttle",
        "20000",
        "--max-moves-into-broker",
        "1",
        "--max-moves-out-of-broker",
        "1",
        "--bootstrap-server",
        &b,
    ]);
    let id: u64 = started
        .split_whitespace()
        .nth(2)
        .and_then(|w| w.trim_end_matches(';').parse().ok())
        .unwrap_or_else(|| panic!("a plan id: {started}"));
    let plan_tag = ["class=\"card plan\"".to_string(), format!("data-plan=\"{id}\"")];
    let plan_tag: Vec<&str> = plan_tag.iter().map(String::as_str).collect();
    let dom = page(&console, "plans", |d| {
        tag_with(d, &plan_tag).is_some_and(|t| num(t, "data-running").is_some_and(|r| r > 0))
    })
    .await;
    let cli = ferry_ok(&["plan", "show", &id.to_string(), "--bootstrap-server", &b]);
    let p = tag_with(&dom, &plan_tag).unwrap();
    assert_eq!(attr(p, "data-state").as_deref(), Some("running"), "{cli}");
    let total = num(p, "data-moves-total").unwrap();
    assert!(
        cli.contains(&format!("  moves: {total} total, ")),
        "page {total} moves, CLI:\n{cli}"
    );
    assert!(
        num(p, "data-running").unwrap() <= 1,
        "the cap of one move out of broker 3"
    );
    let from3 = tag_with(&dom, &["class=\"plan-broker\"", "data-broker=\"3\""]).expect("broker 3's load");
    assert!(num(from3, "data-moving-out").unwrap() <= 1);
    screenshot(&console, "plans").await;

    // The move was in flight the whole time.
    let l = tests::reassign::list(&c).await;
    assert!(
        l.reassignments.iter().any(|e| e.topic == "moving"),
        "the move ended early"
    );
}

#[test]
fn cli_sizes_and_lines_parse() {
    assert_eq!(parse_bytes("2.9 MB"), Some(2.9e6));
    assert_eq!(parse_bytes("999 B"), Some(999.0));
    assert_eq!(parse_bytes("x"), None);
    let out = "t-0: replica 3: 1.0 MB copied, 2.0 MB left, 30.0 kB/s, ETA 1m 06s\n\
               t-0: replica 4: 1.0 MB copied, 1.5 MB left, 30.0 kB/s, ETA 50s\n\
               t-10: replica 4: 1.0 MB copied, 9.0 MB left, 30.0 kB/s, ETA 5m 00s\n";
    assert_eq!(cli_bytes_left(out, "t-0"), 3.5e6);
    let described = "Topic: a\tTopicId: x\tPartitionCount: 2\n\
                     \tTopic: a\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n\
                     \tTopic: a\tPartition: 1\tLeader: none\tReplicas: 2,3\tIsr: \n";
    assert_eq!(
        cli_counts(described),
        BTreeMap::from([(1, (1, 1)), (2, (0, 2)), (3, (0, 1))])
    );
}
