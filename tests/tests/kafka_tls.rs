//! TLS on the Kafka listener with real clients. SASL_SSL with SCRAM-SHA-512: Kafka's own tools
//! with a `client.properties` trusting the CA (a PEM truststore), and kcat. Refused, with the
//! broker serving the others: a plaintext client on the TLS port, a client that trusts another
//! CA, and a broker certificate that has expired (the listener then serves a renewed one
//! without a restart). SSL with `ssl.client.auth=required`: the client certificate names the
//! principal, and a client without one is refused.

use std::path::Path;
use std::process::Command;

use tests::kafka::{kcat_ssl, run, tool};

/// A CA, and a server certificate for 127.0.0.1 it signs, valid from `from_days` to `to_days`
/// (relative to now) — as PEM: (CA certificate, server chain and key, CA).
fn ca_and_server(from_days: i64, to_days: i64) -> (String, String, (rcgen::Certificate, rcgen::KeyPair)) {
    let now = time_now();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, "test CA");
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    p.not_before = now + days(from_days);
    p.not_after = now + days(to_days);
    let server = p.signed_by(&key, &ca, &ca_key).unwrap();
    (
        ca.pem(),
        format!("{}{}", server.pem(), key.serialize_pem()),
        (ca, ca_key),
    )
}

fn time_now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn days(d: i64) -> time::Duration {
    time::Duration::days(d)
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_serves_kafkas_tools_and_kcat_refuses_bad_peers_and_reloads_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, server_pem, (ca, ca_key)) = ca_and_server(-1, 30);
    let ca_path = write(dir.path(), "ca.pem", &ca_pem);
    let keystore = write(dir.path(), "server.pem", &server_pem);
    let ks = keystore.clone();
    let (four, k) = tests::kafka::start(dir.path(), move |_| {
        vec![
            "--kafka-security-protocol".into(),
            "SASL_SSL".into(),
            "--ssl-keystore-location".into(),
            ks.clone(),
            "--connection-failed-authentication-delay-ms".into(),
            "10".into(),
        ]
    })
    .await;
    let b = k.bootstrap();
    let node = four.nodes[&1].addr.clone();
    tests::kafka::set_scram(dir.path(), &node, "admin", "admin-secret");
    let props = write(
        dir.path(),
        "client.properties",
        &format!(
            "security.protocol=SASL_SSL\n\
             sasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"admin\" password=\"admin-secret\";\n\
             ssl.truststore.type=PEM\n\
             ssl.truststore.location={ca_path}\n"
        ),
    );
    let (ok, out) = tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            &b,
            "--command-config",
            &props,
            "--create",
            "--topic",
            "tls",
            "--partitions",
            "1",
            "--replication-factor",
            "3",
        ],
        "",
    );
    assert!(ok && out.contains("Created topic tls."), "{out}");
    let sasl = [
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-512",
        "-X",
        "sasl.username=admin",
        "-X",
        "sasl.password=admin-secret",
    ];
    let (code, _, err) = kcat_ssl(&b, &ca_path, &sasl, &["-P", "-t", "tls", "-p", "0"], "x\ny\n");
    assert_eq!(code, Some(0), "{err}");
    let (ok, out) = tool(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            &b,
            "--command-config",
            &props,
            "--topic",
            "tls",
            "--from-beginning",
            "--max-messages",
            "2",
            "--timeout-ms",
            "30000",
        ],
        "",
    );
    assert!(
        ok && out.lines().filter(|l| *l == "x" || *l == "y").count() == 2,
        "{out}"
    );

    // A plaintext client on the TLS port, and a client trusting another CA, get nothing.
    let (code, _, _) = run(
        Command::new("timeout").args(["20", "kcat", "-b", &b, "-L", "-m", "5"]),
        "",
    );
    assert_ne!(code, Some(0), "a plaintext client is not served");
    let (other_ca, _, _) = ca_and_server(-1, 30);
    let other = write(dir.path(), "other-ca.pem", &other_ca);
    let (code, _, err) = kcat_ssl(&b, &other, &sasl, &["-L", "-m", "5"], "");
    assert_ne!(code, Some(0));
    assert!(
        err.contains("certificate verify failed") || err.contains("SSL handshake failed"),
        "{err}"
    );

    // An expired certificate is refused by the client; a renewed one is served without a restart.
    let expired = ca_params_signed(&ca, &ca_key, -30, -1);
    std::fs::write(&keystore, &expired).unwrap();
    tests::wait_until(
        std::time::Duration::from_secs(30),
        "the expired certificate served",
        || {
            let (b, ca_path) = (b.clone(), ca_path.clone());
            async move {
                let (code, _, err) = kcat_ssl(&b, &ca_path, &sasl, &["-L", "-m", "5"], "");
                // librdkafka says only that the certificate failed verification; the CA and the
                // host are the ones that verified before, and the renewal below verifies again.
                code != Some(0) && err.contains("certificate verify failed")
            }
        },
    )
    .await;
    std::fs::write(&keystore, ca_params_signed(&ca, &ca_key, -1, 30)).unwrap();
    tests::wait_until(
        std::time::Duration::from_secs(30),
        "the renewed certificate served",
        || {
            let (b, ca_path) = (b.clone(), ca_path.clone());
            async move { kcat_ssl(&b, &ca_path, &sasl, &["-L", "-m", "5"], "").0 == Some(0) }
        },
    )
    .await;
}

/// A server chain and key for 127.0.0.1 signed by `ca`, valid from `from` to `to` days from now.
fn ca_params_signed(ca: &rcgen::Certificate, ca_key: &rcgen::KeyPair, from: i64, to: i64) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let now = time_now();
    p.not_before = now + days(from);
    p.not_after = now + days(to);
    let cert = p.signed_by(&key, ca, ca_key).unwrap();
    format!("{}{}", cert.pem(), key.serialize_pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssl_client_certificates_name_the_principal_and_are_required() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let (code, out, err) = tests::run_ferry(&[
        "certs",
        "--dir",
        certs.to_str().unwrap(),
        "--host",
        "127.0.0.1",
        "--client",
        "alice",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let ca = certs.join("ca.pem").to_string_lossy().into_owned();
    let server = certs.join("server.pem").to_string_lossy().into_owned();
    let alice = certs.join("alice.pem").to_string_lossy().into_owned();
    let (ca2, server2) = (ca.clone(), server.clone());
    let (four, k) = tests::kafka::start(dir.path(), move |_| {
        [
            "--kafka-security-protocol",
            "SSL",
            "--ssl-keystore-location",
            &server2,
            "--ssl-truststore-location",
            &ca2,
            "--ssl-client-auth",
            "required",
            "--authorizer",
            "--super-users",
            "User:O=ferry,CN=alice",
        ]
        .map(String::from)
        .into()
    })
    .await;
    let b = k.bootstrap();
    let tls = ["-X", "security.protocol=SSL"];
    let with_cert = [
        "-X",
        "security.protocol=SSL",
        "-X",
        &format!("ssl.certificate.location={alice}"),
        "-X",
        &format!("ssl.key.location={alice}"),
    ];
    // alice's certificate makes her the super user: she sees a topic that no ACL names, which
    // the authorizer hides from anyone else.
    tests::data::create_topic(&four.client, "seen", 1, 3, &[])
        .await
        .unwrap();
    let (code, out, err) = kcat_ssl(&b, &ca, &with_cert, &["-L", "-t", "seen"], "");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("topic \"seen\" with 1 partitions"), "{out}");
    // Without a certificate the handshake fails.
    let (code, _, _) = kcat_ssl(&b, &ca, &tls, &["-L", "-m", "5"], "");
    assert_ne!(code, Some(0));
}
