//! What the tests that drive Ferry with Kafka's own clients share: four nodes each with a
//! Kafka listener, a way to run a client with input, and Kafka's Java tools.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::reassign::{start_four_each, Four};

/// The Kafka listener ports of brokers 1 to 4.
pub struct Listeners(Vec<u16>);

impl Listeners {
    /// Broker `id`'s Kafka address.
    pub fn addr(&self, id: i32) -> String {
        format!("127.0.0.1:{}", self.0[id as usize - 1])
    }

    /// Every broker's Kafka address, as a bootstrap list.
    pub fn bootstrap(&self) -> String {
        (1..=self.0.len() as i32)
            .map(|id| self.addr(id))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Starts the four nodes, each with a Kafka listener and `extra(id)` flags, and waits until all
/// four brokers are registered.
pub async fn start(dir: &Path, extra: impl Fn(i32) -> Vec<String>) -> (Four, Listeners) {
    let k = Listeners((0..4).map(|_| crate::free_port()).collect());
    let four = start_four_each(dir, |id| {
        let mut args = vec!["--kafka-listen".to_string(), k.addr(id)];
        args.extend(extra(id));
        args
    });
    let c = four.client.clone();
    crate::wait_until(Duration::from_secs(60), "four brokers registered", || {
        let c = c.clone();
        async move { c.brokers().await.is_ok_and(|b| b.len() == 4) }
    })
    .await;
    (four, k)
}

/// Runs a command, feeding it `input`; its exit code, stdout and stderr.
pub fn run(cmd: &mut Command, input: &str) -> (Option<i32>, String, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running a Kafka client (tools/test.sh installs kcat, kafka-python and Kafka's jars)");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// kcat against `bootstrap` trusting the CA file `ca`, with `extra` options (`-X` settings)
/// and `args`, fed `input`, within 30 s; its exit code, stdout and stderr.
pub fn kcat_ssl(
    bootstrap: &str,
    ca: &str,
    extra: &[&str],
    args: &[&str],
    input: &str,
) -> (Option<i32>, String, String) {
    let mut cmd = Command::new("timeout");
    cmd.args(["30", "kcat", "-b", bootstrap, "-X", &format!("ssl.ca.location={ca}")])
        .args(extra)
        .args(args);
    run(&mut cmd, input)
}

/// Every record of partition 0 of `topic`, read from the start with kcat as JSON lines.
pub fn kcat_read(bootstrap: &str, topic: &str) -> Vec<serde_json::Value> {
    let (code, out, err) = run(
        Command::new("timeout").args([
            "60",
            "kcat",
            "-C",
            "-J",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
        ]),
        "",
    );
    assert_eq!(code, Some(0), "kcat consume failed: {err}");
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// One of Kafka's Java tools by its script name (`tools/kafka-tool.sh`), with a deadline.
pub fn kafka_tool(name: &str) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/kafka-tool.sh");
    let mut cmd = Command::new("timeout");
    cmd.arg("180").arg(script).arg(name);
    cmd
}

/// Runs a Kafka tool with `input` on stdin; whether it succeeded, and its stdout (and stderr
/// on failure).
pub fn tool(name: &str, args: &[&str], input: &str) -> (bool, String) {
    tool_of(None, name, args, input)
}

/// [`tool`] from Kafka `version`'s jars (`None`: `tools/kafka-jars.sh`'s default).
pub fn tool_of(version: Option<&str>, name: &str, args: &[&str], input: &str) -> (bool, String) {
    let mut cmd = kafka_tool(name);
    if let Some(v) = version {
        cmd.env("KAFKA_VERSION", v);
    }
    let (code, stdout, stderr) = run(cmd.args(args), input);
    let ok = code == Some(0);
    (ok, format!("{stdout}{}", if ok { "" } else { stderr.as_str() }))
}

/// Creates `topic` with `kafka-topics` (of Kafka `version`, as in [`tool_of`]), one partition on
/// brokers 1 and 2 (plus `extra` flags), and waits until both replicas are in sync.
pub async fn create_on_1_and_2(
    c: &broker::ClusterClient,
    bootstrap: &str,
    version: Option<&str>,
    topic: &str,
    extra: &[&str],
) {
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--topic",
        topic,
        "--replica-assignment",
        "1:2",
    ];
    args.extend_from_slice(extra);
    let (ok, out) = tool_of(version, "kafka-topics", &args, "");
    assert!(ok && out.contains(&format!("Created topic {topic}.")), "{out}");
    crate::wait_until(Duration::from_secs(30), "the new topic's partition in sync", || {
        crate::data::isr_is(c, topic, 0, &[1, 2])
    })
    .await;
}

/// Sets `user`'s SCRAM-SHA-512 password with `ferry users set-scram`, through quorum node 1 of
/// a cluster started by [`start`] in `dir` (its cluster credential in `dir/n1`).
pub fn set_scram(dir: &Path, node: &str, user: &str, password: &str) {
    let credential = dir.join("n1").join(metastore::credential::CREDENTIAL_FILE);
    let (code, out, err) = crate::run_ferry(&[
        "users",
        "set-scram",
        user,
        "--password",
        password,
        "--mechanism",
        "SCRAM-SHA-512",
        "--bootstrap-server",
        node,
        "--cluster-credential-file",
        credential.to_str().expect("a UTF-8 temp path"),
    ]);
    assert_eq!(code, 0, "{out}{err}");
}

/// A Kafka `client.properties` for a SCRAM `mechanism` login over SASL_PLAINTEXT, written in
/// `dir`; its path.
pub fn scram_properties(dir: &Path, user: &str, password: &str, mechanism: &str) -> String {
    let path = dir.join(format!("{user}-{mechanism}.properties"));
    std::fs::write(
        &path,
        format!(
            "security.protocol=SASL_PLAINTEXT\n\
             sasl.mechanism={mechanism}\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"{user}\" password=\"{password}\";\n"
        ),
    )
    .expect("writing a client config");
    path.to_string_lossy().into_owned()
}

/// Starts the four nodes of [`start`] with SASL_PLAINTEXT listeners, the authorizer and the
/// super user `User:admin` (failed logins answered after 10 ms).
pub async fn start_with_acls(dir: &Path) -> (Four, Listeners) {
    start(dir, |_| {
        [
            "--kafka-security-protocol",
            "SASL_PLAINTEXT",
            "--authorizer",
            "--super-users",
            "User:admin",
            "--connection-failed-authentication-delay-ms",
            "10",
        ]
        .map(String::from)
        .into()
    })
    .await
}
