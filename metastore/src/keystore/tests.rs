//! The keystore settings' parsing. Keystores made by `openssl` and `keytool` are read in
//! `tests/tests/kafka_keystores.rs`, which has those tools.

use super::*;

const SECRET: &str = "s3cret-pass";

#[test]
fn keystore_types_parse_in_kafkas_spelling_and_jks_names_its_conversion() {
    assert_eq!(KeystoreType::parse("pem"), Ok(KeystoreType::Pem));
    assert_eq!(KeystoreType::parse("PKCS12"), Ok(KeystoreType::Pkcs12));
    assert!(KeystoreType::parse("JKS")
        .unwrap_err()
        .contains("keytool -importkeystore"));
    assert!(KeystoreType::parse("BCFKS")
        .unwrap_err()
        .contains("not one of PEM, PKCS12"));
}

#[test]
fn passwords_never_print() {
    let a = KeystoreAccess {
        kind: KeystoreType::Pkcs12,
        keystore_password: Some(Password::new(SECRET)),
        key_password: Some(Password::new(SECRET)),
    };
    assert!(!format!("{a:?}").contains(SECRET));
}
