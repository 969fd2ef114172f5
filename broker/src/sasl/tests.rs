//! The SCRAM exchange end to end: RFC 7677's example, a client written here (on the hash crates
//! directly, not on this module's helpers), each way a login fails, and a fuzz of `step`.

use std::collections::HashMap;
use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::digest::core_api::BlockSizeUser;
use hmac::digest::{Digest, KeyInit};
use hmac::{Mac, SimpleHmac};
use proptest::prelude::*;
use sha2::{Sha256, Sha512};

use super::*;

/// An in-memory user store with a fixed unknown-user key.
#[derive(Default)]
pub(crate) struct Store(HashMap<(String, Mechanism), ScramCredential>);

impl CredentialLookup for Store {
    fn scram(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential> {
        self.0.get(&(user.to_string(), mechanism)).cloned()
    }
    fn unknown_user_key(&self) -> [u8; 32] {
        [7; 32]
    }
}

/// RFC 7677's salt.
const RFC_SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";

/// A store of `(user, mechanism, password)`, all with RFC 7677's salt and 4096 iterations.
pub(crate) fn user_store(users: &[(&str, Mechanism, &str)]) -> Store {
    let salt = B64.decode(RFC_SALT).unwrap();
    let mut store = Store::default();
    for &(user, mechanism, password) in users {
        let credential = ScramCredential::derive(mechanism, password, &salt, 4096).unwrap();
        store.0.insert((user.to_string(), mechanism), credential);
    }
    store
}

/// "user"/"pencil" under both SCRAM mechanisms, made once (PBKDF2 is slow unoptimised).
fn pencil_store() -> &'static Store {
    static STORE: OnceLock<Store> = OnceLock::new();
    STORE.get_or_init(|| {
        user_store(&[
            ("user", Mechanism::ScramSha256, "pencil"),
            ("user", Mechanism::ScramSha512, "pencil"),
        ])
    })
}

fn fixed_nonce(nonce: &'static str) -> Box<dyn NonceSource> {
    Box::new(move || nonce.to_string())
}

const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";

fn continue_bytes(step: Result<Step, SaslError>) -> String {
    match step {
        Ok(Step::Continue(bytes)) => String::from_utf8(bytes).unwrap(),
        other => panic!("expected Continue, got {other:?}"),
    }
}

#[test]
fn rfc7677_example_exchange() {
    let mut auth = Authenticator::new(Mechanism::ScramSha256, fixed_nonce(SERVER_NONCE));
    let server_first = continue_bytes(auth.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", pencil_store()));
    assert_eq!(
        server_first,
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let client_final = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                        p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    let done = auth.step(client_final.as_bytes(), pencil_store()).unwrap();
    assert_eq!(
        done,
        Step::Done {
            principal_user: "user".to_string(),
            reply: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec(),
        }
    );
    assert!(auth.is_done());
    assert_eq!(auth.step(b"more", pencil_store()), Err(SaslError::AlreadyDone));
}

fn mac<D: Digest + BlockSizeUser + Clone>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = <SimpleHmac<D> as KeyInit>::new_from_slice(key).unwrap();
    Mac::update(&mut m, data);
    m.finalize().into_bytes().to_vec()
}

/// A SCRAM client's side of client-final: (client-final, expected server-final).
fn client_final_for<D: Digest + BlockSizeUser + Clone + Sync>(
    password: &str,
    gs2: &str,
    client_first_bare: &str,
    server_first: &str,
) -> (String, String) {
    let attr = |name: &str| {
        server_first
            .split(',')
            .find_map(|a| a.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} in {server_first}"))
    };
    let salt = B64.decode(attr("s=")).unwrap();
    let iterations: u32 = attr("i=").parse().unwrap();
    let mut salted = vec![0u8; <D as Digest>::output_size()];
    pbkdf2::pbkdf2::<SimpleHmac<D>>(password.as_bytes(), &salt, iterations, &mut salted).unwrap();
    let client_key = mac::<D>(&salted, b"Client Key");
    let stored_key = D::digest(&client_key).to_vec();
    let without_proof = format!("c={},r={}", B64.encode(gs2), attr("r="));
    let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
    let signature = mac::<D>(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
    let server_signature = mac::<D>(&mac::<D>(&salted, b"Server Key"), auth_message.as_bytes());
    (
        format!("{without_proof},p={}", B64.encode(proof)),
        format!("v={}", B64.encode(server_signature)),
    )
}

/// Runs client-first and returns (server-first, client-final, expected server-final) for a
/// SHA-512 client of `user`/`password`.
fn sha512_exchange(auth: &mut Authenticator, store: &Store, user: &str, password: &str) -> (String, String, String) {
    let bare = format!("n={user},r=fyko+d2lbbFgONRv9qkxdawL");
    let server_first = continue_bytes(auth.step(format!("n,,{bare}").as_bytes(), store));
    let (client_final, server_final) = client_final_for::<Sha512>(password, "n,,", &bare, &server_first);
    (server_first, client_final, server_final)
}

fn sha512_auth() -> Authenticator {
    Authenticator::new(Mechanism::ScramSha512, fixed_nonce("3rfcNHYJY1ZVvWVs7j"))
}

#[test]
fn sha512_round_trip_with_a_test_client() {
    let mut auth = sha512_auth();
    let (server_first, client_final, server_final) = sha512_exchange(&mut auth, pencil_store(), "user", "pencil");
    assert!(server_first.starts_with("r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"));
    let done = auth.step(client_final.as_bytes(), pencil_store()).unwrap();
    assert_eq!(
        done,
        Step::Done {
            principal_user: "user".to_string(),
            reply: server_final.into_bytes()
        }
    );
}

#[test]
fn sha256_test_client_agrees_with_the_rfc() {
    let bare = "n=user,r=rOprNGfwEbeRWgbNEkqO";
    let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    let (client_final, server_final) = client_final_for::<Sha256>("pencil", "n,,", bare, server_first);
    assert!(client_final.ends_with(",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="));
    assert_eq!(server_final, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
}

#[test]
fn wrong_password_fails_at_the_proof() {
    let mut auth = sha512_auth();
    let (_, client_final, _) = sha512_exchange(&mut auth, pencil_store(), "user", "pencil!");
    let err = auth.step(client_final.as_bytes(), pencil_store()).unwrap_err();
    assert_eq!(
        err,
        SaslError::BadProof {
            user: "user".to_string()
        }
    );
    assert!(err.to_string().contains("authentication failed"));
    assert_eq!(
        auth.step(client_final.as_bytes(), pencil_store()),
        Err(SaslError::AlreadyFailed)
    );
}

#[test]
fn unknown_user_fails_like_a_wrong_password() {
    let store = pencil_store();
    let mut auth = sha512_auth();
    let (server_first, client_final, _) = sha512_exchange(&mut auth, store, "nobody", "pencil");
    // Same shape as a real user's server-first; the fake salt is stable per name.
    assert!(server_first.ends_with(",i=4096"));
    let (again, _, _) = sha512_exchange(&mut sha512_auth(), store, "nobody", "pencil");
    assert_eq!(server_first, again);
    let (other, _, _) = sha512_exchange(&mut sha512_auth(), store, "somebody", "pencil");
    assert_ne!(server_first, other);

    let unknown = auth.step(client_final.as_bytes(), store).unwrap_err();
    assert_eq!(
        unknown,
        SaslError::UnknownUser {
            user: "nobody".to_string()
        }
    );
    let mut auth = sha512_auth();
    let (_, client_final, _) = sha512_exchange(&mut auth, store, "user", "wrong");
    let wrong = auth.step(client_final.as_bytes(), store).unwrap_err();
    assert_eq!(unknown.to_string(), wrong.to_string());
    assert!(unknown.to_string().contains("authentication failed"));
}

/// The RFC 7677 exchange up to server-first, then `client_final` instead of the RFC's.
fn rfc_final(client_final: &str) -> Result<Step, SaslError> {
    let mut auth = Authenticator::new(Mechanism::ScramSha256, fixed_nonce(SERVER_NONCE));
    continue_bytes(auth.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", pencil_store()));
    auth.step(client_final.as_bytes(), pencil_store())
}

const RFC_NONCE: &str = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const RFC_PROOF: &str = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";

#[test]
fn bad_nonce_is_refused() {
    let short = &RFC_NONCE[..RFC_NONCE.len() - 1];
    assert_eq!(
        rfc_final(&format!("c=biws,r={short},p={RFC_PROOF}")),
        Err(SaslError::BadNonce)
    );
    assert_eq!(
        rfc_final(&format!("c=biws,r=rOprNGfwEbeRWgbNEkqO,p={RFC_PROOF}")),
        Err(SaslError::BadNonce)
    );
    // librdkafka sends its client nonce again before server-first's nonce; Kafka takes a nonce
    // that ends with server-first's, so the exchange goes on to the proof.
    let doubled = format!("rOprNGfwEbeRWgbNEkqO{RFC_NONCE}");
    assert!(matches!(
        rfc_final(&format!("c=biws,r={doubled},p={RFC_PROOF}")),
        Err(SaslError::BadProof { .. })
    ));
}

#[test]
fn tampered_proof_is_refused() {
    let mut proof = B64.decode(RFC_PROOF).unwrap();
    proof[5] ^= 1;
    let err = rfc_final(&format!("c=biws,r={RFC_NONCE},p={}", B64.encode(proof))).unwrap_err();
    assert_eq!(
        err,
        SaslError::BadProof {
            user: "user".to_string()
        }
    );
    // A proof of the wrong length is a malformed message.
    let err = rfc_final(&format!("c=biws,r={RFC_NONCE},p={}", B64.encode([1u8; 16]))).unwrap_err();
    assert!(matches!(err, SaslError::BadFrame { field: "p", .. }), "{err:?}");
}

#[test]
fn channel_binding_value_must_match_the_gs2_header() {
    // "eSws" is base64 of "y,,", but the client sent "n,,".
    assert_eq!(
        rfc_final(&format!("c=eSws,r={RFC_NONCE},p={RFC_PROOF}")),
        Err(SaslError::ChannelBindingMismatch)
    );
    let err = rfc_final(&format!("c=b!ws,r={RFC_NONCE},p={RFC_PROOF}")).unwrap_err();
    assert!(matches!(err, SaslError::BadFrame { field: "c", .. }), "{err:?}");
}

#[test]
fn client_final_layout_is_checked() {
    let field = |msg: &str| match rfc_final(msg) {
        Err(SaslError::BadFrame { field, .. }) => field,
        other => panic!("{msg}: {other:?}"),
    };
    assert_eq!(field(&format!("r={RFC_NONCE},c=biws,p={RFC_PROOF}")), "c");
    assert_eq!(field("c=biws"), "r");
    assert_eq!(field(&format!("c=biws,r={RFC_NONCE}")), "p");
    assert_eq!(field(&format!("c=biws,r={RFC_NONCE},p={RFC_PROOF},x=y")), "p");
    assert_eq!(field(&format!("c=biws,r={RFC_NONCE},p=%%%")), "p");
    assert_eq!(
        rfc_final(&format!("c=biws,r={RFC_NONCE},m=x,p={RFC_PROOF}")),
        Err(SaslError::MandatoryExtension)
    );
}

fn first(msg: &str) -> Result<Step, SaslError> {
    Authenticator::new(Mechanism::ScramSha256, fixed_nonce(SERVER_NONCE)).step(msg.as_bytes(), pencil_store())
}

#[test]
fn channel_binding_is_refused() {
    assert_eq!(
        first("p=tls-unique,,n=user,r=abc"),
        Err(SaslError::ChannelBindingUnsupported("tls-unique".to_string()))
    );
    // "y": the client could bind but thinks the server cannot; accepted.
    assert!(first("y,,n=user,r=abc").is_ok());
}

#[test]
fn client_first_is_checked() {
    let authz = |a: &str, u: &str| SaslError::AuthzidMismatch {
        authzid: a.to_string(),
        user: u.to_string(),
    };
    assert_eq!(first("n,a=admin,n=user,r=abc"), Err(authz("admin", "user")));
    assert!(first("n,a=user,n=user,r=abc").is_ok());
    assert_eq!(
        first("n,,n=user,r=abc,tokenauth=true"),
        Err(SaslError::TokenAuthUnsupported)
    );
    assert_eq!(first("n,,m=x,n=user,r=abc"), Err(SaslError::MandatoryExtension));
    // Unknown extensions are ignored.
    assert!(first("n,,n=user,r=abc,foo=bar,baz=").is_ok());
    let field = |msg: &str| match first(msg) {
        Err(SaslError::BadFrame { field, .. }) => field,
        other => panic!("{msg}: {other:?}"),
    };
    assert_eq!(field(""), "gs2-header");
    assert_eq!(field("x,,n=user,r=abc"), "gs2-header");
    assert_eq!(field("n,n=user,r=abc"), "a");
    assert_eq!(field("n,,user,r=abc"), "n");
    assert_eq!(field("n,,n=,r=abc"), "n");
    assert_eq!(field("n,,n=us=3er,r=abc"), "n");
    assert_eq!(field("n,,n=user"), "r");
    assert_eq!(field("n,,n=user,r="), "r");
    assert_eq!(field("n,,n=user,r=a\u{e9}"), "r");
    assert_eq!(field("n,,n=user,r=abc,9=x"), "extensions");
    assert_eq!(field("n,,n=user,r=abc,r=x"), "extensions");
    assert_eq!(field("n,,n=user,r=abc,noequals"), "extensions");
    assert_eq!(field("n,,n=us\u{0}er,r=abc"), "n");
}

#[test]
fn usernames_are_unescaped() {
    let parsed = scram::parse_client_first(b"n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=xyz").unwrap();
    assert_eq!(parsed.user, "a,b=c");
    assert_eq!(parsed.gs2_header, "n,a=a=2Cb=3Dc,");
    assert_eq!(parsed.bare, "n=a=2Cb=3Dc,r=xyz");
    // The escaped name is the one looked up.
    let store = user_store(&[("a,b=c", Mechanism::ScramSha512, "pw")]);
    let mut auth = sha512_auth();
    let (_, client_final, server_final) = sha512_exchange(&mut auth, &store, "a=2Cb=3Dc", "pw");
    let done = auth.step(client_final.as_bytes(), &store).unwrap();
    assert_eq!(
        done,
        Step::Done {
            principal_user: "a,b=c".to_string(),
            reply: server_final.into_bytes()
        }
    );
}

#[test]
fn oversized_message_and_bad_server_nonce_are_refused() {
    let long = vec![b'a'; MAX_CLIENT_MESSAGE + 1];
    assert_eq!(
        first(std::str::from_utf8(&long).unwrap()),
        Err(SaslError::MessageTooLong {
            len: long.len(),
            max: 4096
        })
    );
    let mut auth = Authenticator::new(Mechanism::ScramSha256, fixed_nonce("has,comma"));
    assert_eq!(
        auth.step(b"n,,n=user,r=abc", pencil_store()),
        Err(SaslError::BadServerNonce("has,comma".into()))
    );
}

#[test]
fn stored_iterations_out_of_range_are_refused() {
    let mut store = Store::default();
    let mut credential = pencil_store().scram("user", Mechanism::ScramSha256).unwrap();
    credential.iterations = 100;
    store.0.insert(("weak".to_string(), Mechanism::ScramSha256), credential);
    assert_eq!(
        first_with(&store, "n,,n=weak,r=abc"),
        Err(SaslError::IterationsOutOfRange { iterations: 100 })
    );
}

fn first_with(store: &Store, msg: &str) -> Result<Step, SaslError> {
    Authenticator::new(Mechanism::ScramSha256, fixed_nonce(SERVER_NONCE)).step(msg.as_bytes(), store)
}

#[test]
fn mechanism_names() {
    for m in Mechanism::ALL {
        assert_eq!(Mechanism::parse(m.name()), Ok(m));
    }
    assert_eq!(Mechanism::ScramSha512.to_string(), "SCRAM-SHA-512");
    assert_eq!(
        Mechanism::parse("scram-sha-256"),
        Err(SaslError::UnsupportedMechanism("scram-sha-256".into()))
    );
    assert_eq!(
        Mechanism::parse("GSSAPI"),
        Err(SaslError::UnsupportedMechanism("GSSAPI".into()))
    );
}

#[test]
fn authenticator_can_move_between_tasks() {
    fn is_send<T: Send>() {}
    is_send::<Authenticator>();
}

#[test]
fn random_nonces_are_32_printable_chars() {
    let a = RandomNonce.server_nonce();
    assert_eq!(a.len(), RANDOM_NONCE_LEN);
    assert!(a.bytes().all(|b| b.is_ascii_alphanumeric()));
    assert_ne!(a, RandomNonce.server_nonce());
}

/// An authenticator of `mechanism` at `stage`: 0 fresh, 1 after a good first message, 2 done,
/// 3 failed.
fn at_stage(mechanism: Mechanism, stage: usize) -> Authenticator {
    match stage {
        0 => Authenticator::new(mechanism, fixed_nonce(SERVER_NONCE)),
        1 if mechanism.is_scram() => {
            let mut auth = Authenticator::new(mechanism, fixed_nonce(SERVER_NONCE));
            continue_bytes(auth.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", pencil_store()));
            auth
        }
        1 | 2 => Authenticator::Done,
        _ => Authenticator::Failed,
    }
}

fn scramish() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300),
        "(n|y|p=[a-z-]{0,5}|[a-z]?),(a=[a-z=23CD]{0,6})?,(m=x,)?(n=[a-z=23CD]{0,6})?(,r=[!-~]{0,8})?(,[a-z]{0,3}=[a-z]{0,3}){0,3}"
            .prop_map(String::into_bytes),
        "(c=(biws|eSws|[A-Za-z0-9+/=]{0,8}))?(,r=rOprNGfwEbeRWgbNEkqO(%hvYDpWUa2RaTCAfuxFIlj\\)hNlF\\$k0)?)?(,[a-z]{0,2}=[a-z]{0,2}){0,2}(,p=[A-Za-z0-9+/=]{0,90})?"
            .prop_map(String::into_bytes),
        "[a-z]{0,4}\u{0}[a-z]{0,4}\u{0}[a-z]{0,8}".prop_map(String::into_bytes),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn step_never_panics(mechanism in 0..3usize, stage in 0..4usize, bytes in scramish()) {
        let mechanism = Mechanism::ALL[mechanism];
        let mut auth = at_stage(mechanism, stage);
        let result = auth.step(&bytes, pencil_store());
        // An error always ends the exchange.
        if result.is_err() {
            prop_assert!(!auth.is_done() || result == Err(SaslError::AlreadyDone));
        }
    }
}
