//! Each Kafka listener with its own certificates and mechanisms (Kafka's
//! `listener.name.NAME.` settings, given with `--listener-config`), and Java's JKS and PKCS12
//! stores as keystores and truststores, made by `keytool` and `openssl` as operators make them.
//!
//! One node serves INTERNAL (SSL) from a JKS keystore whose key has its own password, requiring
//! client certificates that a JKS truststore trusts, and EXTERNAL (SASL_SSL) from the shared PEM
//! keystore of another CA, offering SCRAM-SHA-512 alone. kcat sees each listener's own
//! certificate, INTERNAL refuses a client without a certificate, and EXTERNAL refuses PLAIN.
//! Bad per-listener settings stop the node naming the setting.

use std::path::Path;
use std::time::Duration;

use metastore::keystore::{self, KeystoreAccess, Password, StoreType};
use metastore::truststore::{self, Truststore};
use tests::java_stores::{JavaStores, KEY_SECRET, SECRET};

/// A CA with a server and a client `alice` (`ferry certs`), and the same in Java's stores.
struct Pki {
    ca: String,
    server: String,
    alice: String,
    java: JavaStores,
}

fn pki(dir: &Path) -> Pki {
    let (code, out, err) = tests::run_ferry(&[
        "certs",
        "--dir",
        dir.to_str().unwrap(),
        "--host",
        "127.0.0.1",
        "--client",
        "alice",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let s = |f: &str| dir.join(f).to_string_lossy().into_owned();
    Pki {
        ca: s("ca.pem"),
        server: s("server.pem"),
        alice: s("alice.pem"),
        java: tests::java_stores::convert(dir),
    }
}

fn trust(path: &str, kind: StoreType, password: Option<&str>) -> Truststore {
    Truststore {
        location: path.into(),
        kind,
        password: password.map(Password::new),
    }
}

#[test]
fn java_stores_read_to_the_same_certificates_and_bad_passwords_name_their_setting() {
    let dir = tempfile::tempdir().unwrap();
    let p = pki(dir.path());
    let (chain, key) = keystore::read(Path::new(&p.server), &KeystoreAccess::default()).unwrap();
    let jks = |store: Option<&str>, key: Option<&str>| KeystoreAccess {
        kind: StoreType::Jks,
        keystore_password: store.map(Password::new),
        key_password: key.map(Password::new),
    };
    let read = |a: KeystoreAccess| keystore::read(Path::new(&p.java.server_jks), &a);
    let (c, k) = read(jks(Some(SECRET), Some(KEY_SECRET))).unwrap();
    assert_eq!((c[0].as_ref(), k.secret_der()), (chain[0].as_ref(), key.secret_der()));
    let err = |a| read(a).map(|_| ()).unwrap_err().to_string();
    let e = err(jks(Some("wrong"), Some(KEY_SECRET)));
    assert!(
        e.starts_with("ssl.keystore.password ") && e.contains("does not match"),
        "{e}"
    );
    // Without ssl.key.password the store's password opens the key, as in Java: not this one.
    let e = err(jks(Some(SECRET), None));
    assert!(
        e.starts_with("ssl.keystore.password ") && e.contains("wrong password"),
        "{e}"
    );
    let e = err(jks(Some(SECRET), Some("wrong")));
    assert!(
        e.starts_with("ssl.key.password ") && e.contains("wrong password"),
        "{e}"
    );
    let e = err(jks(None, None));
    assert!(e.contains("a JKS keystore needs its password"), "{e}");

    // The CA, from each kind of truststore.
    let pem = truststore::read(&Truststore::pem(&p.ca)).unwrap();
    for t in [
        trust(&p.java.trust_jks, StoreType::Jks, Some(SECRET)),
        trust(&p.java.trust_jks, StoreType::Jks, None),
        trust(&p.java.trust_p12, StoreType::Pkcs12, Some(SECRET)),
        // A keystore trusts its key's own certificate, as Java's does.
        trust(&p.java.server_jks, StoreType::Jks, Some(SECRET)),
    ] {
        let roots = truststore::read(&t).unwrap_or_else(|e| panic!("{t:?}: {e}"));
        assert_eq!(roots.roots.len(), 1, "{t:?}");
    }
    assert_eq!(pem.roots.len(), 1);
    let e = truststore::read(&trust(&p.java.trust_jks, StoreType::Jks, Some("wrong"))).unwrap_err();
    assert!(e.to_string().starts_with("ssl.truststore.password "), "{e}");
    let e = truststore::read(&trust(&p.java.trust_p12, StoreType::Pkcs12, Some("wrong"))).unwrap_err();
    assert!(e.to_string().starts_with("ssl.truststore.password "), "{e}");
    // openssl marks no certificate of its PKCS12 store as trusted, so Java trusts none of them
    // (its "trustAnchors parameter must be non-empty"), and neither does Ferry.
    let e = truststore::read(&trust(&p.java.trust_openssl_p12, StoreType::Pkcs12, Some(SECRET))).unwrap_err();
    assert!(e.to_string().contains("holds no certificate"), "{e}");
    let e = truststore::read(&trust(&p.java.trust_jks, StoreType::Pem, None)).unwrap_err();
    assert!(e.to_string().contains("holds no certificate"), "{e}");
}

/// kcat's metadata from `addr` trusting `ca`, with `extra` settings.
fn kcat(addr: &str, ca: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let settings: Vec<&str> = extra.iter().flat_map(|x| ["-X", x]).collect();
    tests::kafka::kcat_ssl(addr, ca, &settings, &["-L", "-m", "5"], "")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_listener_serves_its_own_certificates_and_mechanisms() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (pki(&dir.path().join("a")), pki(&dir.path().join("b")));
    let (internal, external) = (tests::free_port(), tests::free_port());
    let listeners = format!("INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}");
    let base = [
        "--listeners",
        &listeners,
        "--listener-security-protocol-map",
        "INTERNAL:SSL,EXTERNAL:SASL_SSL",
        "--ssl-keystore-location",
        &b.server,
    ];
    let internal_own = [
        "listener.name.internal.ssl.keystore.type=JKS".to_string(),
        format!("listener.name.internal.ssl.keystore.location={}", a.java.server_jks),
        format!("listener.name.internal.ssl.keystore.password={SECRET}"),
        format!("listener.name.internal.ssl.key.password={KEY_SECRET}"),
        "listener.name.INTERNAL.ssl.truststore.type=JKS".to_string(),
        format!("listener.name.internal.ssl.truststore.location={}", a.java.trust_jks),
        "listener.name.internal.ssl.client.auth=required".to_string(),
        "listener.name.external.sasl.enabled.mechanisms=SCRAM-SHA-512".to_string(),
    ];
    let config = |extra: &[String]| -> Vec<String> {
        internal_own
            .iter()
            .chain(extra)
            .flat_map(|c| ["--listener-config".to_string(), c.clone()])
            .collect()
    };

    // Bad settings stop the node before it writes anything, naming the setting.
    let data = dir.path().join("refused");
    let refused = |extra: &[String]| {
        let args: Vec<String> = base.iter().map(|s| s.to_string()).chain(config(extra)).collect();
        tests::refused_node(&data, &args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let err = refused(&["listener.name.other.ssl.client.auth=none".into()]);
    assert!(
        err.contains("--listener-config: listener.name.other.ssl.client.auth: OTHER is not a listener"),
        "{err}"
    );
    let err = refused(&["listener.name.internal.sasl.enabled.mechanisms=PLAIN".into()]);
    assert!(err.contains("listener INTERNAL is SSL and does not use it"), "{err}");
    let err = refused(&["listener.name.internal.ssl.keystore.password=wrong".into()]);
    assert!(err.contains("given twice"), "{err}");
    let mut wrong = internal_own.to_vec();
    wrong[2] = "listener.name.internal.ssl.keystore.password=wrong".into();
    let args: Vec<String> = base
        .iter()
        .map(|s| s.to_string())
        .chain(wrong.iter().flat_map(|c| ["--listener-config".to_string(), c.clone()]))
        .collect();
    let err = tests::refused_node(&data, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        err.contains("listener INTERNAL: ssl.keystore.password") && err.contains(&a.java.server_jks),
        "{err}"
    );
    assert!(!data.exists(), "a refused node wrote its data dir");

    let peers = tests::loopback_peers(1);
    let mut args: Vec<String> = base.iter().map(|s| s.to_string()).collect();
    args.extend(config(&[]));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut node = tests::ProcNode::new(1, &peers[&1], &dir.path().join("n1"), &peers, false).with_args(&args);
    node.spawn();
    let int_addr = format!("127.0.0.1:{internal}");
    let ext_addr = format!("127.0.0.1:{external}");
    let with_cert = [
        "security.protocol=SSL".to_string(),
        format!("ssl.certificate.location={}", a.alice),
        format!("ssl.key.location={}", a.alice),
    ];
    let with_cert: Vec<&str> = with_cert.iter().map(String::as_str).collect();
    tests::wait_until(Duration::from_secs(60), "INTERNAL serving over TLS", || {
        let (int_addr, ca, with_cert) = (int_addr.clone(), a.ca.clone(), with_cert.clone());
        async move { kcat(&int_addr, &ca, &with_cert).0 == Some(0) }
    })
    .await;

    // INTERNAL shows CA a's certificate from the JKS store and requires a client certificate.
    let (code, out, err) = kcat(&int_addr, &a.ca, &with_cert);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("broker 1 at {int_addr}")), "{out}");
    let (code, _, _) = kcat(&int_addr, &a.ca, &["security.protocol=SSL"]);
    assert_ne!(code, Some(0), "INTERNAL served a client without a certificate");
    let (code, _, _) = kcat(&int_addr, &b.ca, &with_cert);
    assert_ne!(
        code,
        Some(0),
        "INTERNAL's certificate is CA a's, not the shared one of CA b"
    );

    // EXTERNAL shows the shared certificate of CA b and offers SCRAM-SHA-512 alone.
    tests::wait_for_file(&tests::credential_file(&dir.path().join("n1")));
    tests::kafka::set_scram(dir.path(), &peers[&1], "alice", "alice-secret");
    let login = |mechanism: &str| {
        [
            "security.protocol=SASL_SSL".to_string(),
            format!("sasl.mechanisms={mechanism}"),
            "sasl.username=alice".into(),
            "sasl.password=alice-secret".into(),
        ]
    };
    let scram = login("SCRAM-SHA-512");
    let scram: Vec<&str> = scram.iter().map(String::as_str).collect();
    let (code, out, err) = kcat(&ext_addr, &b.ca, &scram);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("broker 1 at {ext_addr}")), "{out}");
    let (code, _, _) = kcat(&ext_addr, &a.ca, &scram);
    assert_ne!(code, Some(0), "EXTERNAL's certificate is CA b's");
    let plain = login("PLAIN");
    let plain: Vec<&str> = plain.iter().map(String::as_str).collect();
    let (code, _, err) = kcat(&ext_addr, &b.ca, &plain);
    assert_ne!(
        code,
        Some(0),
        "EXTERNAL offers SCRAM-SHA-512 alone, yet PLAIN logged in: {err}"
    );
    drop(node);
}
