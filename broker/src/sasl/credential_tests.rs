//! `ScramCredential`: derivation, iteration bounds, and Kafka's text form.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use super::scram::{MAX_ITERATIONS, MIN_ITERATIONS};
use super::*;

fn rfc_salt() -> Vec<u8> {
    B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap()
}

#[test]
fn derive_matches_from_salted_password() {
    let derived = ScramCredential::derive(Mechanism::ScramSha256, "pencil", &rfc_salt(), 4096).unwrap();
    let salted = crypto::ScramHash::Sha256.salted_password(b"pencil", &rfc_salt(), 4096);
    let from_salted =
        ScramCredential::from_salted_password(Mechanism::ScramSha256, &rfc_salt(), &salted, 4096).unwrap();
    assert_eq!(derived, from_salted);
    assert_eq!(derived.stored_key.len(), 32);
    let sha512 = ScramCredential::derive(Mechanism::ScramSha512, "pencil", &rfc_salt(), 4096).unwrap();
    assert_eq!((sha512.stored_key.len(), sha512.server_key.len()), (64, 64));
    // A salted password of the other hash's length is refused with the field named.
    let err = ScramCredential::from_salted_password(Mechanism::ScramSha512, &rfc_salt(), &salted, 4096).unwrap_err();
    assert!(
        matches!(err, SaslError::BadCredential { ref field, .. } if field == "salted_password"),
        "{err:?}"
    );
    let err = ScramCredential::from_salted_password(Mechanism::ScramSha256, &[], &salted, 4096).unwrap_err();
    assert!(
        matches!(err, SaslError::BadCredential { ref field, .. } if field == "salt"),
        "{err:?}"
    );
    assert_eq!(
        ScramCredential::derive(Mechanism::Plain, "pencil", &rfc_salt(), 4096),
        Err(SaslError::NotScram(Mechanism::Plain))
    );
}

#[test]
fn iterations_out_of_range_are_refused_with_the_value() {
    let salted = [0u8; 32];
    for bad in [0, 1, MIN_ITERATIONS - 1, MAX_ITERATIONS + 1, u32::MAX] {
        let err = ScramCredential::from_salted_password(Mechanism::ScramSha256, b"salt", &salted, bad).unwrap_err();
        assert_eq!(err, SaslError::IterationsOutOfRange { iterations: bad });
        assert!(err.to_string().contains(&bad.to_string()), "{err}");
        assert_eq!(
            ScramCredential::derive(Mechanism::ScramSha256, "pw", b"salt", bad),
            Err(SaslError::IterationsOutOfRange { iterations: bad })
        );
    }
    for good in [MIN_ITERATIONS, 8192, MAX_ITERATIONS] {
        assert!(ScramCredential::from_salted_password(Mechanism::ScramSha256, b"salt", &salted, good).is_ok());
    }
}

#[test]
fn kafka_text_round_trips() {
    for mechanism in [Mechanism::ScramSha256, Mechanism::ScramSha512] {
        let credential = ScramCredential::derive(mechanism, "pencil", &rfc_salt(), 4096).unwrap();
        let text = credential.to_kafka_text();
        assert!(text.starts_with("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key="), "{text}");
        assert!(text.ends_with(",iterations=4096"), "{text}");
        assert_eq!(ScramCredential::from_kafka_text(&text), Ok(credential.clone()));
        // Field order does not matter.
        let mut fields: Vec<&str> = text.split(',').collect();
        fields.reverse();
        assert_eq!(ScramCredential::from_kafka_text(&fields.join(",")), Ok(credential));
    }
}

#[test]
fn kafka_text_errors_name_the_field() {
    let key32 = B64.encode([1u8; 32]);
    let key64 = B64.encode([1u8; 64]);
    let text = |salt: &str, stored: &str, server: &str, iterations: &str| {
        format!("salt={salt},stored_key={stored},server_key={server},iterations={iterations}")
    };
    let good = text("c2FsdA==", &key32, &key32, "4096");
    assert!(ScramCredential::from_kafka_text(&good).is_ok());
    let cases = [
        (text("c2FsdA", &key32, &key32, "4096"), "salt"),
        (text("", &key32, &key32, "4096"), "salt"),
        (text("c2FsdA==", "!!", &key32, "4096"), "stored_key"),
        (text("c2FsdA==", &B64.encode([1u8; 20]), &key32, "4096"), "stored_key"),
        (text("c2FsdA==", &key32, &key64, "4096"), "server_key"),
        (text("c2FsdA==", &key32, "", "4096"), "server_key"),
        (text("c2FsdA==", &key32, &key32, "+4096"), "iterations"),
        (text("c2FsdA==", &key32, &key32, ""), "iterations"),
        (text("c2FsdA==", &key32, &key32, "4096 "), "iterations"),
        (text("c2FsdA==", &key32, &key32, "99999999999"), "iterations"),
        (format!("{good},extra=1"), "extra"),
        (format!("{good},salt=c2FsdA=="), "salt"),
        (format!("stored_key={key32},server_key={key32},iterations=4096"), "salt"),
        (
            format!("salt=c2FsdA==,server_key={key32},iterations=4096"),
            "stored_key",
        ),
        (
            format!("salt=c2FsdA==,stored_key={key32},server_key={key32}"),
            "iterations",
        ),
        (format!("{good},"), ""),
        (String::new(), ""),
    ];
    for (bad, field) in cases {
        match ScramCredential::from_kafka_text(&bad) {
            Err(SaslError::BadCredential { field: f, .. }) => assert_eq!(f, field, "{bad}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
    assert_eq!(
        ScramCredential::from_kafka_text(&text("c2FsdA==", &key32, &key32, "100")),
        Err(SaslError::IterationsOutOfRange { iterations: 100 })
    );
}

#[test]
fn debug_hides_the_keys() {
    let credential = ScramCredential::derive(Mechanism::ScramSha256, "pencil", &rfc_salt(), 4096).unwrap();
    let shown = format!("{credential:?}");
    assert!(!shown.contains(&B64.encode(&credential.server_key)), "{shown}");
    assert!(!shown.contains(&format!("{:?}", credential.server_key)), "{shown}");
}
