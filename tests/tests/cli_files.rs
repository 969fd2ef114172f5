//! Hostile input files for the `ferry` binary: a 100 MB reassignment file is refused before it is
//! read, with nothing changed; a bad `ferry node --config` file stops the node with the key and
//! line named; a good one starts it, with flags and FERRY_* variables overriding it.

use std::process::{Command, Stdio};
use std::time::Duration;

use tests::data::isr_is;
use tests::reassign::{create, snapshot, start_four};
use tests::run_ferry as ferry;
use tests::wait_until;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mb_reassignment_file_is_refused_before_parsing_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    create(&c, "t", vec![vec![1, 2]], &[]).await;
    wait_until(Duration::from_secs(30), "the ISR", || isr_is(&c, "t", 0, &[1, 2])).await;
    let bs = f.bootstrap();

    // A sparse file: 100 MB long without writing 100 MB.
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge).unwrap().set_len(100 << 20).unwrap();
    let huge_s = huge.to_string_lossy().into_owned();

    let before = snapshot(&f.meta).await;
    for action in [
        &["--execute", "--reassignment-json-file"][..],
        &["--verify", "--reassignment-json-file"],
        &["--cancel", "--reassignment-json-file"],
        &["--generate", "--broker-list", "1,2", "--topics-to-move-json-file"],
    ] {
        let mut args = vec!["reassign"];
        args.extend_from_slice(action);
        args.extend([huge_s.as_str(), "--bootstrap-server", bs.as_str()]);
        let (code, out, err) = tokio::task::block_in_place(|| ferry(&args));
        assert_eq!(code, 1, "{action:?}: {out}{err}");
        assert_eq!(out, "", "{action:?}");
        // Had the file been read, the error would be a JSON one about its zero bytes.
        assert_eq!(
            err,
            format!("error: {huge_s}: 104857600 bytes is larger than the 67108864 bytes accepted\n"),
            "{action:?}"
        );
    }
    assert_eq!(snapshot(&f.meta).await, before);
}

#[test]
fn a_bad_node_config_file_names_the_key_and_the_node_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ferry.toml");
    let data = dir.path().join("data");
    let port = tests::free_port();
    let good = format!(
        "id = 1\ndata_dir = {:?}\nlisten = \"127.0.0.1:{port}\"\npeers = \"1=127.0.0.1:{port}\"\n",
        data.display().to_string()
    );
    for (extra, needle) in [
        (
            "sesion_timeout_ms = 2000\n",
            "line 5: key `sesion_timeout_ms`: unknown field",
        ),
        (
            "session_timeout_ms = \"2s\"\n",
            "line 5: key `session_timeout_ms`: invalid type",
        ),
        ("log_dirs = \"/a,/b\"\n", "line 5: key `log_dirs`: invalid type"),
        ("roles = \"brokers\"\n", "line 5: key `roles`: unknown role"),
        ("id = 2\n", "line 5"),
        ("log_dirs = [\n", "line 5"),
    ] {
        std::fs::write(&cfg, format!("{good}{extra}")).unwrap();
        let (code, out, err) = ferry(&["node", "--config", cfg.to_str().unwrap()]);
        assert_eq!(code, 1, "{extra}: {out}{err}");
        assert!(
            err.starts_with(&format!("error: {}: ", cfg.display())),
            "{extra}: {err}"
        );
        assert!(err.contains(needle), "{extra}: {err}");
        assert!(!data.exists(), "{extra}: the node started");
    }
    let (code, _, err) = ferry(&["node", "--config", dir.path().join("none.toml").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("none.toml"), "{err}");
    // Without the file, the required settings are missing.
    let (code, _, err) = ferry(&["node"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "error: --id is required (or FERRY_ID, or `id` in the --config file)\n"
    );
}

/// Kills the child when dropped, so a failed assertion leaves no node running.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_node_runs_from_its_config_file_with_variables_and_flags_overriding_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ferry.toml");
    let data = dir.path().join("data");
    let (file_port, port) = (tests::free_port(), tests::free_port());
    // The file's listen address is overridden by the flag, and its (broken) peers by the variable.
    std::fs::write(
        &cfg,
        format!(
            "id = 1\ndata_dir = {:?}\nlisten = \"127.0.0.1:{file_port}\"\npeers = \"1=nowhere\"\n\
             roles = \"quorum,broker\"\nlog_dirs = [{:?}, {:?}]\nsession_timeout_ms = 2000\n",
            data.display().to_string(),
            dir.path().join("logs-a").display().to_string(),
            dir.path().join("logs-b").display().to_string(),
        ),
    )
    .unwrap();
    let addr = format!("127.0.0.1:{port}");
    let _node = Killed(
        Command::new(tests::ferry_bin())
            .args(["node", "--config", cfg.to_str().unwrap(), "--listen", &addr])
            .env("FERRY_PEERS", format!("1={addr}"))
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting ferry node"),
    );
    let mut put = (1, String::new(), String::new());
    for _ in 0..300 {
        put = ferry(&["kv", "put", "/cfg", "yes", "--bootstrap-server", &addr]);
        if put.0 == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(put.0, 0, "the node never served on the flag's address: {}", put.2);
    // The file's log dirs are the broker's.
    for _ in 0..300 {
        if dir.path().join("logs-a").exists() && dir.path().join("logs-b").exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(dir.path().join("logs-a").exists() && dir.path().join("logs-b").exists());
    assert!(data.exists());
}
