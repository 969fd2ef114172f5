//! TLS on the gRPC port, with client certificates required: three `ferry node` processes form
//! their quorum and replicate a topic to each other over mutual TLS; a client that trusts the
//! CA and shows a certificate writes and reads, and so does the `ferry` CLI with a Kafka
//! `client.properties`; a plaintext caller, one that shows no certificate and one that trusts
//! another CA are refused. Under the authorizer the certificate names the caller: alice, a
//! super user, lists topics; bob is refused by name. The HTTP port serves metrics over HTTPS
//! with the same certificate, or with one of its own (`--http-ssl-*`). Renewed certificate files are taken without a restart. One node
//! and one CLI config read the certificates from Java's JKS and PKCS12 stores.

use std::path::Path;
use std::time::Duration;

use metastore::grpc_tls::ClientTlsFiles;
use metastore::truststore::Truststore;

/// `ferry certs` into `dir`: ca.pem, server.pem (the nodes'), alice.pem and bob.pem (clients').
fn certs(dir: &Path) {
    let (code, out, err) = tests::run_ferry(&[
        "certs",
        "--dir",
        &dir.display().to_string(),
        "--host",
        "127.0.0.1",
        "--client",
        "alice",
        "--client",
        "bob",
    ]);
    assert_eq!(code, 0, "ferry certs: {out}{err}");
}

/// A `client.properties` for the CLI over TLS, showing the certificate of `cert` (a client's name).
fn properties(dir: &Path, name: &str, ca: &Path, cert: Option<&str>) -> String {
    let mut text = format!(
        "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={}\n",
        ca.display()
    );
    if let Some(cert) = cert {
        let keystore = dir.join(format!("{cert}.pem"));
        text.push_str(&format!(
            "ssl.keystore.type=PEM\nssl.keystore.location={}\n",
            keystore.display()
        ));
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// GET `path` over HTTPS from `addr`, trusting `ca`; the whole answer.
async fn https_get(addr: &str, ca: &Path, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let files = ClientTlsFiles {
        truststore: Truststore::pem(ca),
        keystore: None,
        keystore_access: Default::default(),
    };
    let config = metastore::grpc_tls::client_config(&files).map_err(std::io::Error::other)?;
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls_pki_types_name("127.0.0.1");
    let mut tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await?;
    tls.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut out = String::new();
    tls.read_to_string(&mut out).await?;
    Ok(out)
}

fn rustls_pki_types_name(host: &str) -> tokio_rustls::rustls::pki_types::ServerName<'static> {
    tokio_rustls::rustls::pki_types::ServerName::try_from(host.to_string()).expect("a server name")
}

fn kv_get_with(node: &str, config: &str) -> (i32, String, String) {
    tests::run_ferry(&[
        "kv",
        "get",
        "/tls/ready",
        "--bootstrap-server",
        node,
        "--command-config",
        config,
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_replicate_over_mutual_tls_and_refuse_callers_without_a_trusted_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    certs(&pki);
    let java = tests::java_stores::convert(&pki);
    let (ca, server) = (pki.join("ca.pem"), pki.join("server.pem"));
    let peers = tests::loopback_peers(3);
    let quorum: Vec<String> = peers.values().cloned().collect();
    // Node 2 reads the same certificates from Java's stores: a JKS keystore whose key has its
    // own password, and a PKCS12 truststore.
    let pem_stores = [
        "--grpc-ssl-keystore-location",
        &server.display().to_string(),
        "--grpc-ssl-truststore-location",
        &ca.display().to_string(),
    ]
    .map(String::from);
    let java_stores = [
        "--grpc-ssl-keystore-type",
        "JKS",
        "--grpc-ssl-keystore-location",
        &java.server_jks,
        "--grpc-ssl-keystore-password",
        tests::java_stores::SECRET,
        "--grpc-ssl-key-password",
        tests::java_stores::KEY_SECRET,
        "--grpc-ssl-truststore-type",
        "PKCS12",
        "--grpc-ssl-truststore-location",
        &java.trust_p12,
        "--grpc-ssl-truststore-password",
        tests::java_stores::SECRET,
    ]
    .map(String::from);
    let tls_args = [
        "--grpc-ssl-client-auth",
        "required",
        "--authorizer",
        "--super-users",
        "User:O=ferry,CN=alice",
    ]
    .map(String::from);
    let tls_args: Vec<&str> = tls_args.iter().map(String::as_str).collect();
    let http = format!("127.0.0.1:{}", tests::free_port());
    // Node 3's HTTP port shows a certificate of its own, from another CA.
    let web = dir.path().join("web");
    certs(&web);
    let web_keystore = web.join("server.pem").display().to_string();
    let http3 = format!("127.0.0.1:{}", tests::free_port());
    let mut nodes: Vec<tests::ProcNode> = peers
        .iter()
        .map(|(id, addr)| {
            let stores = if *id == 2 { &java_stores[..] } else { &pem_stores[..] };
            let stores: Vec<&str> = stores.iter().map(String::as_str).collect();
            let n = tests::ProcNode::new(*id, addr, &dir.path().join(format!("n{id}")), &peers, false)
                .with_args(&stores)
                .with_args(&tls_args);
            match *id {
                1 => n.with_args(&["--http-listen", &http]),
                3 => n.with_args(&["--http-listen", &http3, "--http-ssl-keystore-location", &web_keystore]),
                _ => n,
            }
        })
        .collect();
    for n in &mut nodes {
        n.spawn();
    }

    // This process's channels trust the CA and show alice's certificate.
    metastore::grpc_tls::set_client(Some(ClientTlsFiles {
        truststore: Truststore::pem(&ca),
        keystore: Some(pki.join("alice.pem")),
        keystore_access: Default::default(),
    }));
    let meta = metastore::Client::new(&quorum).unwrap();
    tests::wait_until(Duration::from_secs(60), "the quorum forms over TLS", || {
        let meta = meta.clone();
        async move { meta.put("/tls/ready", "1").await.is_ok() }
    })
    .await;
    // Every node reads it linearizably: its read index comes from the leader over TLS.
    for addr in &quorum {
        let one = metastore::Client::new(std::slice::from_ref(addr)).unwrap();
        let kv = one
            .get("/tls/ready")
            .await
            .expect("a read through each node")
            .expect("present");
        assert_eq!(kv.value, &b"1"[..]);
    }

    // The brokers replicate to each other over mutual TLS: all three replicas join the ISR and
    // an acks=all write commits.
    meta.set_credential_file(Path::new(&tests::credential_file(&dir.path().join("n1"))))
        .unwrap_or_else(|e| panic!("credential file: {e}"));
    let identity = broker::auth::call_identity::CallIdentity::credential(meta.credential_interceptor());
    let client = broker::ClusterClient::new(&quorum).unwrap().with_identity(identity);
    tests::wait_until(Duration::from_secs(60), "three brokers registered", || {
        let c = client.clone();
        async move { c.brokers().await.is_ok_and(|b| b.len() == 3) }
    })
    .await;
    tests::reassign::create(&client, "t", vec![vec![1, 2, 3]], &[]).await;
    tests::wait_until(Duration::from_secs(60), "an acks=all write", || {
        let c = client.clone();
        async move {
            c.produce_once("t", 0, vec![bytes::Bytes::from("over tls")], -1)
                .await
                .is_ok()
        }
    })
    .await;
    tests::wait_until(Duration::from_secs(60), "all three replicas in sync", || {
        let c = client.clone();
        async move { tests::data::isr_is(&c, "t", 0, &[1, 2, 3]).await }
    })
    .await;
    let records = tests::data::read_all(&client, "t", 0).await;
    assert_eq!(records, vec![(0, "over tls".to_string())]);

    // The CLI over TLS with a Kafka client config.
    let node = quorum[0].as_str();
    let kv_get = |config: Option<&str>| {
        let mut args = vec!["kv", "get", "/tls/ready", "--bootstrap-server", node];
        if let Some(c) = config {
            args.extend(["--command-config", c]);
        }
        tests::run_ferry(&args)
    };
    let good = properties(&pki, "alice.properties", &ca, Some("alice"));
    let (code, out, err) = kv_get(Some(good.as_str()));
    assert_eq!(code, 0, "the CLI with alice's certificate: {out}{err}");
    assert!(out.contains('1'), "{out}");
    // The same from Java's stores: a JKS truststore that names no type (read as its bytes show)
    // and alice's PKCS12 keystore.
    let java_config = pki.join("alice-java.properties");
    std::fs::write(
        &java_config,
        format!(
            "security.protocol=SSL\nssl.truststore.location={}\nssl.keystore.type=PKCS12\n\
             ssl.keystore.location={}\nssl.keystore.password={}\n",
            java.trust_jks,
            java.alice_p12,
            tests::java_stores::SECRET
        ),
    )
    .unwrap();
    let (code, out, err) = kv_get(Some(&java_config.display().to_string()));
    assert_eq!(code, 0, "the CLI with alice's Java stores: {out}{err}");
    assert!(out.contains('1'), "{out}");
    // Metrics over HTTPS, with the gRPC port's certificate, or node 3's own.
    let page = https_get(&http, &ca, "/metrics").await.expect("metrics over HTTPS");
    assert!(
        page.starts_with("HTTP/1.") && page.contains(" 200 ") && page.contains("ferry_"),
        "{page}"
    );
    let page = https_get(&http3, &web.join("ca.pem"), "/metrics")
        .await
        .expect("metrics over HTTPS with the HTTP port's own certificate");
    assert!(page.contains(" 200 ") && page.contains("ferry_"), "{page}");
    assert!(
        https_get(&http3, &ca, "/metrics").await.is_err(),
        "node 3's HTTP port showed the gRPC port's certificate"
    );

    // The certificate names the caller under the authorizer.
    let ferry_topics = |config: &str| {
        tests::run_ferry(&[
            "topics",
            "--list",
            "--bootstrap-server",
            node,
            "--command-config",
            config,
        ])
    };
    let (code, out, err) = ferry_topics(&good);
    assert!(
        code == 0 && out.lines().any(|l| l == "t"),
        "alice, a super user: {out}{err}"
    );
    let bob = properties(&pki, "bob.properties", &ca, Some("bob"));
    let (code, _, err) = ferry_topics(&bob);
    assert!(
        code != 0 && err.contains("CLUSTER_AUTHORIZATION_FAILED") && err.contains("User:O=ferry,CN=bob"),
        "bob, without an ACL: {err}"
    );

    // Refused: plaintext to a TLS port, no certificate where one is required, another CA. Side
    // by side: each CLI retries for a while before it gives up.
    let no_cert = properties(&pki, "nocert.properties", &ca, None);
    let other = dir.path().join("other");
    certs(&other);
    let other_ca = properties(&pki, "other.properties", &other.join("ca.pem"), Some("alice"));
    let cases = [
        ("a plaintext caller", None),
        ("a caller without a certificate", Some(no_cert.as_str())),
        ("a caller that trusts another CA", Some(other_ca.as_str())),
    ];
    let refusals: Vec<String> = std::thread::scope(|s| {
        let runs: Vec<_> = cases.iter().map(|(_, c)| s.spawn(|| kv_get(*c))).collect();
        runs.into_iter()
            .zip(&cases)
            .map(|(run, (who, _))| {
                let (code, out, err) = run.join().unwrap();
                assert_ne!(code, 0, "{who} was answered: {out}");
                if *who == "a plaintext caller" {
                    assert!(err.contains("security.protocol=SSL"), "no hint to use TLS: {err}");
                }
                format!("{who}: {}", err.trim())
            })
            .collect()
    });
    eprintln!("refusals:\n{}", refusals.join("\n"));
    let page = https_get(&http, &ca, "/metrics").await.expect("metrics over HTTPS");
    let failures: f64 = page
        .lines()
        .find_map(|l| l.strip_prefix("ferry_grpc_tls_handshake_failures_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no handshake failure count: {page}"));
    assert!(failures >= 2.0, "the refused handshakes were not counted: {failures}");

    // Renewed files (a new CA, its server and client certificates) are taken without a
    // restart: the CLI that trusts the new CA gets in; one that trusts the old CA no longer does.
    let old_ca = dir.path().join("old-ca.pem");
    std::fs::copy(&ca, &old_ca).unwrap();
    for f in ["ca.pem", "server.pem", "alice.pem"] {
        let tmp = pki.join(format!("{f}.new"));
        std::fs::copy(other.join(f), &tmp).unwrap();
        std::fs::rename(&tmp, pki.join(f)).unwrap();
    }
    let renewed = properties(&pki, "renewed.properties", &ca, Some("alice"));
    tests::wait_until(Duration::from_secs(30), "the renewed certificate served", || {
        let renewed = renewed.clone();
        async move { kv_get_with(node, &renewed).0 == 0 }
    })
    .await;
    let old = properties(&pki, "old.properties", &old_ca, Some("alice"));
    let (code, out, _) = kv_get_with(node, &old);
    assert_ne!(code, 0, "a caller that trusts only the replaced CA was answered: {out}");
    for n in &mut nodes {
        n.kill();
    }
}
