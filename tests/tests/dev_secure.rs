//! `ferry dev --secure`: the local cluster with TLS (a throwaway CA), SASL_SSL with
//! SCRAM-SHA-512 and the authorizer, and a super user `admin` whose Kafka client config it
//! prints as `client config: PATH`. Kafka's tools and `ferry`'s commands work with that file as
//! it is; without a login they get nothing.

use tests::dev::start_dev_until;
use tests::kafka::tool;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_secure_prints_a_client_config_that_kafkas_tools_use_as_is() {
    let dir = tempfile::tempdir().unwrap();
    let (_dev, printed) = tokio::task::block_in_place(|| start_dev_until(dir.path(), &["--secure"], "client config: "));
    let kafka = printed
        .iter()
        .find_map(|l| l.strip_prefix("kafka bootstrap: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no kafka bootstrap line: {printed:?}"))
        .to_string();
    let config = printed.last().unwrap().strip_prefix("client config: ").unwrap();
    let config = dir.path().join(config).to_string_lossy().into_owned();
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.contains("security.protocol=SASL_SSL") && text.contains("SCRAM-SHA-512"),
        "{text}"
    );

    let (ok, out) = tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            &kafka,
            "--command-config",
            &config,
            "--create",
            "--topic",
            "secure",
            "--partitions",
            "1",
            "--replication-factor",
            "3",
        ],
        "",
    );
    assert!(ok && out.contains("Created topic secure."), "{out}");
    let (ok, out) = tool(
        "kafka-acls",
        &["--bootstrap-server", &kafka, "--command-config", &config, "--list"],
        "",
    );
    assert!(ok, "the admin may list ACLs: {out}");
    // The same tool without the config speaks plaintext to a TLS port: no answer.
    let (ok, _) = tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            &kafka,
            "--list",
            "--command-config",
            "/dev/null",
            "--request-timeout-ms",
            "3000",
        ],
        "",
    );
    assert!(!ok, "a client without TLS and a login is not served");

    // ferry's own commands log in with the same file; without it the admin service refuses.
    let grpc = printed
        .iter()
        .find_map(|l| l.strip_prefix("bootstrap: "))
        .unwrap_or_else(|| panic!("no bootstrap line: {printed:?}"))
        .to_string();
    let (code, out, err) = tests::run_ferry(&[
        "topics",
        "--list",
        "--bootstrap-server",
        &grpc,
        "--command-config",
        &config,
    ]);
    assert!(code == 0 && out.lines().any(|l| l == "secure"), "{out}{err}");
    // The gRPC port speaks TLS: a plaintext caller is not served.
    let (code, out, _) = tests::run_ferry(&["topics", "--list", "--bootstrap-server", &grpc]);
    assert_ne!(code, 0, "a plaintext caller was answered: {out}");
    // Over TLS without a login, the caller is anonymous.
    let tls_only = std::path::Path::new(&config).with_file_name("tls-only.properties");
    let text = std::fs::read_to_string(&config).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("sasl."))
        .map(|l| {
            if l.starts_with("security.protocol") {
                "security.protocol=SSL"
            } else {
                l
            }
        })
        .collect();
    std::fs::write(&tls_only, kept.join("\n")).unwrap();
    let tls_only = tls_only.display().to_string();
    let (code, _, err) = tests::run_ferry(&[
        "topics",
        "--list",
        "--bootstrap-server",
        &grpc,
        "--command-config",
        &tls_only,
    ]);
    assert!(
        code != 0 && err.contains("CLUSTER_AUTHORIZATION_FAILED") && err.contains("User:ANONYMOUS"),
        "{err}"
    );
}
