//! Kafka's keystore formats, made by the tools operators use (`openssl`, Java's `keytool`), read
//! to the same certificate and key. On the Kafka listener: a PKCS12 keystore written by Java's
//! `keytool` (`ssl.keystore.type=PKCS12`, `ssl.keystore.password`) serves kcat over SSL, and a
//! wrong or missing password, for it or for a PEM keystore's encrypted key (`ssl.key.password`),
//! stops the node at start naming the setting, before it writes anything.

use std::path::Path;
use std::process::Command;

use metastore::keystore::{self, KeystoreAccess, Password, StoreType};
use tests::java_stores::ok;
use tests::kafka::run;

const SECRET: &str = "keystore-secret";

/// `ferry certs`' CA and server keystore, and the same certificate and key in Kafka's other
/// keystore formats, as `openssl` and `keytool` write them.
struct Stores {
    ca: String,
    /// PEM, the key unencrypted (`ferry certs`' own).
    plain: String,
    /// PEM, the key encrypted with [`SECRET`] (`openssl pkcs8 -topk8`).
    encrypted: String,
    /// PKCS12 by `openssl pkcs12 -export`.
    openssl_p12: String,
    /// PKCS12 written again by `keytool -importkeystore`, with Java's algorithms.
    keytool_p12: String,
}

fn keystores(dir: &Path) -> Stores {
    let certs = dir.join("certs");
    let (code, out, err) = tests::run_ferry(&["certs", "--dir", certs.to_str().unwrap(), "--host", "127.0.0.1"]);
    assert_eq!(code, 0, "{out}{err}");
    let (ca, server) = (certs.join("ca.pem"), certs.join("server.pem"));
    let pass = format!("pass:{SECRET}");
    ok(Command::new("openssl")
        .args(["pkcs12", "-export", "-name", "broker", "-passout", &pass, "-in"])
        .arg(&server)
        .arg("-inkey")
        .arg(&server)
        .arg("-certfile")
        .arg(&ca)
        .arg("-out")
        .arg(dir.join("openssl.p12")));
    ok(Command::new("keytool")
        .args([
            "-importkeystore",
            "-noprompt",
            "-srcstoretype",
            "PKCS12",
            "-deststoretype",
            "PKCS12",
        ])
        .args(["-srcstorepass", SECRET, "-deststorepass", SECRET, "-srckeystore"])
        .arg(dir.join("openssl.p12"))
        .arg("-destkeystore")
        .arg(dir.join("keytool.p12")));
    ok(Command::new("openssl")
        .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-passout", &pass, "-in"])
        .arg(&server)
        .arg("-out")
        .arg(dir.join("key.enc")));
    let pem = std::fs::read_to_string(&server).unwrap();
    let chain: String = pem
        .split_inclusive("-----END CERTIFICATE-----\n")
        .filter(|b| b.contains("CERTIFICATE"))
        .collect();
    let encrypted = dir.join("encrypted.pem");
    std::fs::write(
        &encrypted,
        chain + &std::fs::read_to_string(dir.join("key.enc")).unwrap(),
    )
    .unwrap();
    let s = |p: &Path| p.to_string_lossy().into_owned();
    Stores {
        ca: s(&ca),
        plain: s(&server),
        encrypted: s(&encrypted),
        openssl_p12: s(&dir.join("openssl.p12")),
        keytool_p12: s(&dir.join("keytool.p12")),
    }
}

fn access(kind: StoreType, keystore: Option<&str>, key: Option<&str>) -> KeystoreAccess {
    KeystoreAccess {
        kind,
        keystore_password: keystore.map(Password::new),
        key_password: key.map(Password::new),
    }
}

#[test]
fn every_format_yields_the_same_certificate_and_key_and_bad_passwords_name_their_setting() {
    let dir = tempfile::tempdir().unwrap();
    let k = keystores(dir.path());
    let read = |path: &str, a: KeystoreAccess| keystore::read(Path::new(path), &a);
    let err = |path: &str, a: KeystoreAccess| read(path, a).map(|_| ()).unwrap_err().to_string();
    let (chain, key) = read(&k.plain, KeystoreAccess::default()).unwrap();
    let cases = [
        (&k.encrypted, access(StoreType::Pem, None, Some(SECRET))),
        (&k.openssl_p12, access(StoreType::Pkcs12, Some(SECRET), None)),
        (&k.keytool_p12, access(StoreType::Pkcs12, Some(SECRET), Some(SECRET))),
    ];
    for (path, a) in cases {
        let (c, kk) = read(path, a).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(c[0], chain[0], "{path}");
        assert_eq!(kk.secret_der(), key.secret_der(), "{path}");
    }

    let e = err(&k.encrypted, access(StoreType::Pem, None, Some("wrong")));
    assert!(
        e.starts_with("ssl.key.password ") && e.contains("does not decrypt"),
        "{e}"
    );
    let e = err(&k.encrypted, access(StoreType::Pem, None, None));
    assert!(
        e.contains("ssl.key.password") && e.contains("is encrypted and no password is set"),
        "{e}"
    );
    let e = err(&k.plain, access(StoreType::Pem, None, Some(SECRET)));
    assert!(e.contains("ssl.key.password") && e.contains("not encrypted"), "{e}");
    for p12 in [&k.openssl_p12, &k.keytool_p12] {
        let e = err(p12, access(StoreType::Pkcs12, Some("wrong"), None));
        assert!(e.starts_with("ssl.keystore.password "), "{e}");
        let e = err(p12, access(StoreType::Pkcs12, None, None));
        assert!(e.contains("a PKCS12 keystore needs its password"), "{e}");
        let e = err(p12, access(StoreType::Pkcs12, Some(SECRET), Some("other")));
        assert!(e.starts_with("ssl.key.password ") && e.contains("differs"), "{e}");
    }
    // A PEM file read as PKCS12, and the reverse.
    let e = err(&k.plain, access(StoreType::Pkcs12, Some(SECRET), None));
    assert!(e.starts_with("ssl.keystore.password "), "{e}");
    let e = err(&k.keytool_p12, KeystoreAccess::default());
    assert!(e.starts_with("ssl.keystore.location "), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keytool_pkcs12_keystore_serves_ssl_and_bad_passwords_stop_the_node_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let k = keystores(dir.path());
    let (ca, p12, encrypted) = (k.ca, k.keytool_p12, k.encrypted);

    let data = dir.path().join("refused");
    let refused = |extra: &[&str]| {
        let ssl = ["--kafka-listen", "127.0.0.1:0", "--kafka-security-protocol", "SSL"];
        tests::refused_node(&data, &[&ssl[..], extra].concat())
    };
    let pkcs12 = ["--ssl-keystore-type", "PKCS12", "--ssl-keystore-location", &p12];
    let err = refused(&[&pkcs12[..], &["--ssl-keystore-password", "wrong"]].concat());
    assert!(
        err.contains("ssl.keystore.password") && err.contains("does not open it"),
        "{err}"
    );
    let err = refused(&pkcs12);
    assert!(
        err.contains("ssl.keystore.password") && err.contains("needs its password"),
        "{err}"
    );
    let err = refused(&["--ssl-keystore-location", &encrypted]);
    assert!(
        err.contains("ssl.key.password") && err.contains("no password is set"),
        "{err}"
    );
    let err = refused(&["--ssl-keystore-location", &encrypted, "--ssl-key-password", "wrong"]);
    assert!(
        err.contains("ssl.key.password") && err.contains("does not decrypt"),
        "{err}"
    );
    let err = refused(&[
        "--ssl-keystore-type",
        "JKS",
        "--ssl-keystore-location",
        &p12,
        "--ssl-keystore-password",
        SECRET,
    ]);
    assert!(
        err.contains("ssl.keystore.location") && err.contains("is not a JKS keystore"),
        "{err}"
    );
    assert!(!data.exists(), "a refused node wrote its data dir");

    // Half the brokers serve the keytool store, half the encrypted PEM one: kcat trusts the CA
    // and reads the metadata from each.
    let (p12_, enc_) = (p12.clone(), encrypted.clone());
    let (_four, k) = tests::kafka::start(dir.path(), move |id| {
        let mut a = vec!["--kafka-security-protocol", "SSL"];
        if id % 2 == 0 {
            a.extend(["--ssl-keystore-type", "PKCS12", "--ssl-keystore-location", &p12_]);
            a.extend(["--ssl-keystore-password", SECRET]);
        } else {
            a.extend(["--ssl-keystore-location", &enc_, "--ssl-key-password", SECRET]);
        }
        a.into_iter().map(String::from).collect()
    })
    .await;
    for id in 1..=4 {
        let mut cmd = Command::new("timeout");
        cmd.args(["30", "kcat", "-b", &k.addr(id), "-X", "security.protocol=SSL"])
            .args(["-X", &format!("ssl.ca.location={ca}"), "-L", "-m", "10"]);
        let (code, out, err) = run(&mut cmd, "");
        assert_eq!(code, Some(0), "broker {id}: {err}");
        assert!(out.contains("4 brokers"), "broker {id}: {out}");
    }
}
