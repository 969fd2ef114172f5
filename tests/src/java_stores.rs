//! A CA's files from `ferry certs` (`ca.pem`, `server.pem`, `alice.pem`) in Java's stores, made
//! as operators make them: with `keytool` and `openssl`.

use std::path::Path;
use std::process::Command;

/// The stores' password.
pub const SECRET: &str = "store-secret";
/// The password of the JKS server key, which differs from its store's.
pub const KEY_SECRET: &str = "key-secret";

/// The stores' paths.
pub struct JavaStores {
    /// The server's key and chain in JKS: the store under [`SECRET`], the key under
    /// [`KEY_SECRET`].
    pub server_jks: String,
    /// alice's key and chain in PKCS12 under [`SECRET`] (`openssl pkcs12 -export`).
    pub alice_p12: String,
    /// The CA as a trusted entry in JKS, by `keytool`.
    pub trust_jks: String,
    /// The CA as a trusted entry in PKCS12, by `keytool`.
    pub trust_p12: String,
    /// The CA in PKCS12, by `openssl pkcs12 -export -nokeys`.
    pub trust_openssl_p12: String,
}

/// Runs `cmd`, which must succeed.
pub fn ok(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes the stores next to `ferry certs`' files in `dir` (made with `--client alice`).
pub fn convert(dir: &Path) -> JavaStores {
    let pass = format!("pass:{SECRET}");
    let export = |pem: &str, out: &str| {
        ok(Command::new("openssl")
            .args(["pkcs12", "-export", "-name", "broker", "-passout", &pass, "-in"])
            .arg(dir.join(pem))
            .arg("-inkey")
            .arg(dir.join(pem))
            .arg("-out")
            .arg(dir.join(out)));
    };
    export("server.pem", "server.p12");
    export("alice.pem", "alice.p12");
    ok(Command::new("keytool")
        .args([
            "-importkeystore",
            "-noprompt",
            "-srcstoretype",
            "PKCS12",
            "-srcalias",
            "broker",
        ])
        .args(["-srcstorepass", SECRET, "-srckeystore"])
        .arg(dir.join("server.p12"))
        .args([
            "-deststoretype",
            "JKS",
            "-destalias",
            "broker",
            "-deststorepass",
            SECRET,
        ])
        .args(["-destkeypass", KEY_SECRET, "-destkeystore"])
        .arg(dir.join("server.jks")));
    for (kind, file) in [("JKS", "trust.jks"), ("PKCS12", "trust.p12")] {
        ok(Command::new("keytool")
            .args(["-importcert", "-noprompt", "-alias", "ca", "-storetype", kind])
            .args(["-storepass", SECRET, "-file"])
            .arg(dir.join("ca.pem"))
            .arg("-keystore")
            .arg(dir.join(file)));
    }
    ok(Command::new("openssl")
        .args(["pkcs12", "-export", "-nokeys", "-passout", &pass, "-in"])
        .arg(dir.join("ca.pem"))
        .arg("-out")
        .arg(dir.join("trust-openssl.p12")));
    let s = |f: &str| dir.join(f).to_string_lossy().into_owned();
    JavaStores {
        server_jks: s("server.jks"),
        alice_p12: s("alice.p12"),
        trust_jks: s("trust.jks"),
        trust_p12: s("trust.p12"),
        trust_openssl_p12: s("trust-openssl.p12"),
    }
}
