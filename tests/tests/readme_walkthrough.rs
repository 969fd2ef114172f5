//! Runs the README walkthrough's commands exactly as written, the way the README tells a reader
//! to (`ferry dev` running in the same folder, `ferry` installed on the PATH), so that the README
//! cannot drift from what the tools do.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use broker::ClusterClient;
use tests::{ferry_bin, wait_until};

/// Kills `ferry dev` however the test ends.
struct Dev(Child);

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The README's text.
fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap()
}

/// The commands between the README's walkthrough markers.
fn walkthrough() -> Vec<String> {
    let readme = readme();
    let block = readme
        .split("<!-- walkthrough:start -->")
        .nth(1)
        .and_then(|b| b.split("<!-- walkthrough:end -->").next())
        .expect("the README has a walkthrough block");
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("```") && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// A folder holding only `ferry`, as `cargo install --path tools` leaves it in `~/.cargo/bin`,
/// so the commands find `ferry` the way the README tells a reader to set it up and nothing else
/// from the build.
fn installed_bin_dir(scratch: &Path) -> PathBuf {
    let bin = scratch.join("installed-bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(ferry_bin(), bin.join("ferry")).unwrap();
    bin
}

/// How long one walkthrough command may take: `--progress --watch` waits for the move to end,
/// and a move that never ends must fail the test, not hang it.
const COMMAND_LIMIT_SECS: &str = "300";

/// The last lines of dev's log that name the walkthrough's topic or an error.
fn dev_log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("walk") || l.contains("ERROR") || l.contains("WARN"))
        .collect();
    lines[lines.len().saturating_sub(150)..].join("\n")
}

/// Runs one command through `sh` in `dir`, with `bin` first on the PATH.
fn sh(dir: &Path, bin: &Path, command: &str) -> (bool, String) {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("timeout")
        .args([COMMAND_LIMIT_SECS, "sh", "-c", command])
        .current_dir(dir)
        .env("PATH", path)
        .output()
        .expect("running sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_walkthrough_works_as_written() {
    let commands = walkthrough();
    assert!(commands.len() >= 10, "{commands:?}");
    assert!(
        readme().contains("cargo install --path tools --locked"),
        "the README tells the reader how to put `ferry` on the PATH"
    );
    let scratch = tempfile::tempdir().unwrap();
    let bin = installed_bin_dir(scratch.path());
    let dir = tempfile::tempdir().unwrap();
    // Dev's log goes to a file whose lines about the walkthrough's topic a failure shows.
    let log_path = scratch.path().join("dev.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let _dev = Dev(Command::new(ferry_bin())
        .arg("dev")
        .current_dir(dir.path())
        .env("RUST_LOG", "info,openraft=warn")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starting ferry dev"));
    let c = ClusterClient::new(&["127.0.0.1:7701".to_string()]).unwrap();
    wait_until(Duration::from_secs(60), "ferry dev's three brokers", || async {
        c.brokers().await.is_ok_and(|b| b.len() == 3)
    })
    .await;

    let mut outputs = Vec::new();
    for command in &commands {
        let d = dir.path().to_path_buf();
        let b = bin.clone();
        let cmd = command.clone();
        let (ok, out) = tokio::task::spawn_blocking(move || sh(&d, &b, &cmd)).await.unwrap();
        assert!(
            ok,
            "`{command}` failed:\n{out}\nferry dev's log:\n{}",
            dev_log_tail(&log_path)
        );
        outputs.push((command.clone(), out));
    }
    let out_of = |prefix: &str| -> Vec<&String> {
        outputs
            .iter()
            .filter(|(c, _)| c.starts_with(prefix))
            .map(|(_, o)| o)
            .collect()
    };
    let plan = std::fs::read_to_string(dir.path().join("plan.json")).unwrap();
    assert!(plan.starts_with("{\"version\":1,\"partitions\":["), "{plan}");
    let progress = out_of("ferry reassign --progress");
    assert!(progress[0].contains("Total: "), "{}", progress[0]);
    assert!(
        progress[1].contains("All partition reassignments are complete."),
        "{}",
        progress[1]
    );
    assert!(out_of("ferry reassign --cancel")[0].contains("Successfully cancelled partition reassignment"));
    let verify = out_of("ferry reassign --verify")[0];
    assert!(
        verify.contains("is completed.") && !verify.contains("still in progress"),
        "{verify}"
    );
    let describe = out_of("ferry log-dirs --describe");
    assert!(
        describe[1].contains("logs-2\",\"error\":null,\"partitions\":[{\"partition\":\"walk-"),
        "{}",
        describe[1]
    );
}
