//! Runs the README walkthrough's commands exactly as written, against `ferry dev` started in a
//! scratch directory, so that the README cannot drift from what the tools do.

use std::path::Path;
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

/// The commands between the README's walkthrough markers.
fn walkthrough() -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
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

fn sh(dir: &Path, command: &str) -> (bool, String) {
    let bin_dir = ferry_bin().parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("sh")
        .args(["-c", command])
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
    let dir = tempfile::tempdir().unwrap();
    let _dev = Dev(Command::new(ferry_bin())
        .arg("dev")
        .current_dir(dir.path())
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
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
        let cmd = command.clone();
        let (ok, out) = tokio::task::spawn_blocking(move || sh(&d, &cmd)).await.unwrap();
        assert!(ok, "`{command}` failed:\n{out}");
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
