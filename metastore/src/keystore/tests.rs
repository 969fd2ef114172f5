//! The keystore settings' parsing. Keystores made by `openssl` and `keytool` are read in
//! `tests/tests/kafka_keystores.rs`, which has those tools.

use super::*;

const SECRET: &str = "s3cret-pass";

#[test]
fn store_types_parse_in_kafkas_spelling_and_are_told_by_their_first_bytes() {
    assert_eq!(StoreType::parse("pem"), Ok(StoreType::Pem));
    assert_eq!(StoreType::parse("PKCS12"), Ok(StoreType::Pkcs12));
    assert_eq!(StoreType::parse("jks"), Ok(StoreType::Jks));
    assert!(StoreType::parse("BCFKS")
        .unwrap_err()
        .contains("not one of PEM, PKCS12, JKS"));
    assert_eq!(StoreType::sniff(&[0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]), StoreType::Jks);
    assert_eq!(StoreType::sniff(&[0x30, 0x82, 0x0a, 0x10]), StoreType::Pkcs12);
    assert_eq!(StoreType::sniff(b"-----BEGIN CERTIFICATE-----"), StoreType::Pem);
    assert_eq!(StoreType::sniff(b""), StoreType::Pem);
}

#[test]
fn passwords_never_print() {
    let a = KeystoreAccess {
        kind: StoreType::Pkcs12,
        keystore_password: Some(Password::new(SECRET)),
        key_password: Some(Password::new(SECRET)),
    };
    assert!(!format!("{a:?}").contains(SECRET));
}
