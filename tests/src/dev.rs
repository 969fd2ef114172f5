//! `ferry dev` run as a child process by the tests.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Kills the child when dropped, so a failed assertion leaves no cluster running.
pub struct Dev(pub std::process::Child);

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `ferry dev ARGS` on free ports in `dir`; returns it with the lines it printed up to and
/// including the first that starts with `last`.
pub fn start_dev_until(dir: &std::path::Path, args: &[&str], last: &str) -> (Dev, Vec<String>) {
    let mut child = Command::new(crate::ferry_bin())
        .current_dir(dir)
        .args(["dev", "--base-port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting ferry dev");
    let stdout = child.stdout.take().unwrap();
    // Read on its own thread, so that a full pipe never blocks the cluster; shown if it fails.
    let mut stderr = child.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let mut dev = Dev(child);
    let mut lines = BufReader::new(stdout).lines();
    let mut printed = Vec::new();
    loop {
        let Some(line) = lines.next() else {
            let _ = dev.0.wait();
            panic!(
                "ferry dev stopped before its {last:?} line; it printed {printed:?} and on stderr: {}",
                errors.join().unwrap_or_default()
            );
        };
        let line = line.unwrap();
        let done = line.starts_with(last);
        printed.push(line);
        if done {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    (dev, printed)
}
