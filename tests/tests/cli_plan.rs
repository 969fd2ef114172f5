//! `ferry plan` against a real cluster of processes: a drain's dry run prints each move and the
//! totals and stores nothing; the drain itself runs to the end under `show --watch`; `show
//! --moves` prints each move done; bad flags and refusals exit non-zero with the flag or Kafka's
//! error name.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tests::reassign::{create, produce_n, start_four};

const PARTITIONS: u32 = 4;

/// Runs `ferry` with `args` and the bootstrap servers, stopped with SIGTERM after `bound` (a
/// watch that never ends fails the test rather than hanging it). Exit code, stdout, stderr.
fn ferry(bootstrap: &str, args: &[&str], bound: Duration) -> (i32, String, String) {
    let mut child = Command::new(tests::ferry_bin())
        .args(args)
        .args(["--bootstrap-server", bootstrap])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting ferry");
    let start = Instant::now();
    while child.try_wait().expect("waiting for ferry").is_none() {
        if start.elapsed() > bound {
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
            let out = child.wait_with_output().expect("ferry output");
            panic!(
                "ferry {args:?} still ran after {bound:?}:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("ferry output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The line of `out` that starts with `prefix` once its indent is cut.
fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{out}"))
}

/// Asserts that `l` is a move of partition `p` off broker 4: `t-P: [4,B] -> [X,B]...` with 4
/// gone from the target.
fn moves_off_four(l: &str, p: u32) {
    let rest = l.strip_prefix(&format!("t-{p}: ")).unwrap_or_else(|| panic!("{l}"));
    let (from, rest) = rest.split_once(" -> ").unwrap_or_else(|| panic!("{l}"));
    let to = &rest[..=rest.find(']').unwrap_or_else(|| panic!("{l}"))];
    let other = 1 + (p % 3) as i32;
    assert_eq!(from, format!("[4,{other}]"), "{l}");
    let to: Vec<i32> = to
        .trim_matches(['[', ']'])
        .split(',')
        .map(|b| b.parse().unwrap_or_else(|_| panic!("{l}")))
        .collect();
    assert_eq!(to.len(), 2, "{l}");
    assert!(!to.contains(&4) && to.contains(&other), "{l}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_drain_dry_run_then_drain_and_show() {
    let dir = tempfile::tempdir().unwrap();
    let four = start_four(dir.path());
    let c = four.client.clone();
    let assignment = (0..PARTITIONS).map(|p| vec![4, 1 + (p % 3) as i32]).collect();
    create(&c, "t", assignment, &[]).await;
    for p in 0..PARTITIONS {
        produce_n(&c, "t", p, 4, 10, 500).await;
    }
    let bs = four.bootstrap();
    let minute = Duration::from_secs(60);

    tokio::task::block_in_place(|| {
        // A cap of zero is refused before anything is sent, naming the flag.
        let (code, out, err) = ferry(
            &bs,
            &["plan", "drain", "--broker", "4", "--max-moves-into-broker", "0"],
            minute,
        );
        assert_eq!(code, 1, "{out}{err}");
        assert_eq!(err.trim(), "error: --max-moves-into-broker must be above zero, got 0");

        // The server's refusal: Kafka's error name and the field.
        let (code, out, err) = ferry(&bs, &["plan", "drain", "--broker", "9", "--dry-run"], minute);
        assert_eq!(code, 1, "{out}{err}");
        assert!(err.starts_with("error: BROKER_NOT_AVAILABLE (8): "), "{err}");
        assert!(err.contains("broker 9 is not registered"), "{err}");

        // The dry run: each move, the totals, and the time at the throttle.
        let (code, out, err) = ferry(
            &bs,
            &[
                "plan",
                "drain",
                "--broker",
                "4",
                "--throttle",
                "1000000",
                "--max-moves-into-broker",
                "2",
                "--dry-run",
            ],
            minute,
        );
        assert_eq!(code, 0, "{out}{err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "Dry run of a drain-broker plan for broker 4; nothing was stored."
        );
        for p in 0..PARTITIONS {
            let l = line(&out, &format!("t-{p}: "));
            moves_off_four(l, p);
            assert!(l.ends_with(" kB") || l.ends_with(" B"), "the move's bytes: {l}");
        }
        let total = line(&out, "Total: ");
        assert!(total.starts_with("Total: 4 moves, "), "{total}");
        assert!(
            total.contains(", expected time ") && total.ends_with(" at 1.0 MB/s."),
            "{total}"
        );
        assert!(
            line(&out, "Caps: ").starts_with("Caps: max-moves-into-broker 2, "),
            "{out}"
        );

        // Nothing was stored.
        let (code, out, err) = ferry(&bs, &["plan", "show"], minute);
        assert_eq!((code, out.as_str()), (0, "No plans found.\n"), "{err}");

        // The drain itself, watched to its end.
        let (code, out, err) = ferry(
            &bs,
            &["plan", "drain", "--broker", "4", "--max-moves-into-broker", "2"],
            minute,
        );
        assert_eq!(code, 0, "{out}{err}");
        let started = line(&out, "Started plan ");
        let id: u64 = started["Started plan ".len()..]
            .split(';')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{started}"));
        let id_s = id.to_string();
        assert!(line(&out, "moves: ").starts_with("moves: 4 total, "), "{out}");

        let (code, out, err) = ferry(&bs, &["plan", "show", &id_s, "--watch"], Duration::from_secs(300));
        assert_eq!(code, 0, "{out}{err}");
        assert_eq!(
            line(&out, "Plan "),
            format!("Plan {id}: drain-broker of broker 4, done"),
            "{out}"
        );
        assert_eq!(
            line(&out, "moves: "),
            "moves: 4 total, 0 queued, 0 running, 4 done, 0 skipped, 0 failed",
            "{out}"
        );
        assert!(line(&out, "bytes: ").starts_with("bytes: 0 B left of "), "{out}");
        assert!(
            line(&out, "caps: ").starts_with("caps: max-moves-into-broker 2, "),
            "{out}"
        );

        // Each move, done.
        let (code, out, err) = ferry(&bs, &["plan", "show", &id_s, "--moves"], minute);
        assert_eq!(code, 0, "{out}{err}");
        for p in 0..PARTITIONS {
            let l = line(&out, &format!("t-{p}: "));
            moves_off_four(l, p);
            assert!(l.ends_with(", done"), "{l}");
        }

        // Pausing a plan that does not exist is refused by name.
        let (code, out, err) = ferry(&bs, &["plan", "pause", "999999"], minute);
        assert_eq!(code, 1, "{out}{err}");
        assert!(err.starts_with("error: INVALID_REQUEST (42): "), "{err}");
        assert!(err.contains("no plan 999999"), "{err}");

        // The drain is over: an undrain only uncordons.
        let (code, out, err) = ferry(&bs, &["plan", "undrain", "--broker", "4"], minute);
        assert_eq!(code, 0, "{out}{err}");
        assert_eq!(out.trim(), "Uncordoned broker 4; no drain of it was running.");
    });
}
