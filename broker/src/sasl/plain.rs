//! PLAIN (RFC 4616): `authzid NUL authcid NUL passwd`, checked against the user's SCRAM
//! credential, so PLAIN and SCRAM share one user store.

use super::crypto::{ct_eq, ScramHash};
use super::scram::{self, ScramCredential};
use super::{CredentialLookup, Mechanism, SaslError};

/// Longest authzid, authcid or password, in bytes (RFC 4616 allows 255 for each).
pub const MAX_PART: usize = 255;

/// A parsed PLAIN message.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainMessage {
    /// The authorization identity; empty when the client sent none.
    pub authzid: String,
    /// The user.
    pub authcid: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for PlainMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never prints the password.
        f.debug_struct("PlainMessage")
            .field("authzid", &self.authzid)
            .field("authcid", &self.authcid)
            .finish_non_exhaustive()
    }
}

/// Parses a PLAIN message: three UTF-8 parts split by NUL, each at most [`MAX_PART`] bytes,
/// user and password not empty, authzid empty or equal to the user.
pub fn parse(bytes: &[u8]) -> Result<PlainMessage, SaslError> {
    let mut parts = bytes.split(|&b| b == 0);
    let (Some(authzid), Some(authcid), Some(password), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(SaslError::BadFrame {
            field: "message",
            reason: "expected authzid NUL authcid NUL passwd".to_string(),
        });
    };
    let authzid = part("authzid", authzid)?;
    let authcid = part("authcid", authcid)?;
    let password = part("passwd", password)?;
    if authcid.is_empty() {
        return Err(SaslError::BadFrame {
            field: "authcid",
            reason: "empty".to_string(),
        });
    }
    if password.is_empty() {
        return Err(SaslError::BadFrame {
            field: "passwd",
            reason: "empty".to_string(),
        });
    }
    if !authzid.is_empty() && authzid != authcid {
        return Err(SaslError::AuthzidMismatch { authzid, user: authcid });
    }
    Ok(PlainMessage {
        authzid,
        authcid,
        password,
    })
}

/// One part: bounded and UTF-8.
fn part(field: &'static str, bytes: &[u8]) -> Result<String, SaslError> {
    if bytes.len() > MAX_PART {
        return Err(SaslError::BadFrame {
            field,
            reason: format!("{} bytes, over {MAX_PART}", bytes.len()),
        });
    }
    String::from_utf8(bytes.to_vec()).map_err(|_| SaslError::BadFrame {
        field,
        reason: "not UTF-8".to_string(),
    })
}

/// Whether `password` matches `credential`: Hi(password) with the credential's salt and
/// iterations, then H(HMAC(salted, "Client Key")) against its stored key, in constant time.
pub fn verify_password(mechanism: Mechanism, credential: &ScramCredential, password: &str) -> Result<bool, SaslError> {
    let hash = ScramHash::of(mechanism)?;
    scram::check_iterations(credential.iterations)?;
    let salted = hash.salted_password(password.as_bytes(), &credential.salt, credential.iterations);
    let stored_key = hash.digest(&hash.hmac(&salted, scram::CLIENT_KEY));
    Ok(ct_eq(&stored_key, &credential.stored_key))
}

/// Runs a PLAIN exchange: parses the message and checks the password against the user's
/// SCRAM-SHA-256 credential, else their SCRAM-SHA-512 one. Returns the user.
pub fn authenticate(bytes: &[u8], creds: &dyn CredentialLookup) -> Result<String, SaslError> {
    let msg = parse(bytes)?;
    let found = [Mechanism::ScramSha256, Mechanism::ScramSha512]
        .into_iter()
        .find_map(|m| creds.scram(&msg.authcid, m).map(|c| (m, c)));
    let Some((mechanism, credential)) = found else {
        // Spend the same PBKDF2 as for a known user, so timing does not tell them apart.
        let fake = scram::unknown_user_credential(Mechanism::ScramSha256, &msg.authcid, creds)?;
        let _ = verify_password(Mechanism::ScramSha256, &fake, &msg.password)?;
        return Err(SaslError::UnknownUser { user: msg.authcid });
    };
    if verify_password(mechanism, &credential, &msg.password)? {
        Ok(msg.authcid)
    } else {
        Err(SaslError::WrongPassword { user: msg.authcid })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::tests::{user_store, Store};

    fn msg(authzid: &str, authcid: &str, password: &str) -> Vec<u8> {
        format!("{authzid}\0{authcid}\0{password}").into_bytes()
    }

    fn store() -> Store {
        user_store(&[
            ("alice", Mechanism::ScramSha256, "secret"),
            ("bob", Mechanism::ScramSha512, "hunter2"),
        ])
    }

    #[test]
    fn good_password_authenticates() {
        let s = store();
        assert_eq!(authenticate(&msg("", "alice", "secret"), &s), Ok("alice".to_string()));
        assert_eq!(
            authenticate(&msg("alice", "alice", "secret"), &s),
            Ok("alice".to_string())
        );
        // A user with only a SCRAM-SHA-512 credential.
        assert_eq!(authenticate(&msg("", "bob", "hunter2"), &s), Ok("bob".to_string()));
    }

    #[test]
    fn bad_password_and_unknown_user_fail_alike() {
        let s = store();
        let wrong = authenticate(&msg("", "alice", "Secret"), &s).unwrap_err();
        assert_eq!(
            wrong,
            SaslError::WrongPassword {
                user: "alice".to_string()
            }
        );
        let unknown = authenticate(&msg("", "carol", "secret"), &s).unwrap_err();
        assert_eq!(
            unknown,
            SaslError::UnknownUser {
                user: "carol".to_string()
            }
        );
        assert_eq!(wrong.to_string(), unknown.to_string());
        assert!(wrong.to_string().contains("authentication failed"));
        assert!(wrong.is_credential_failure() && unknown.is_credential_failure());
    }

    #[test]
    fn authzid_must_be_empty_or_the_user() {
        let err = authenticate(&msg("admin", "alice", "secret"), &store()).unwrap_err();
        assert_eq!(
            err,
            SaslError::AuthzidMismatch {
                authzid: "admin".to_string(),
                user: "alice".to_string()
            }
        );
    }

    #[test]
    fn oversized_parts_are_refused_with_their_field() {
        let long = "x".repeat(MAX_PART + 1);
        let at_limit = "x".repeat(MAX_PART);
        for (bytes, field) in [
            (msg(&long, "alice", "secret"), "authzid"),
            (msg("", &long, "secret"), "authcid"),
            (msg("", "alice", &long), "passwd"),
        ] {
            match parse(&bytes) {
                Err(SaslError::BadFrame { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        // At the limit is fine (and just a wrong password).
        assert!(parse(&msg("", &at_limit, &at_limit)).is_ok());
    }

    #[test]
    fn malformed_messages_are_refused() {
        let field_of = |bytes: &[u8]| match parse(bytes) {
            Err(SaslError::BadFrame { field, .. }) => field,
            other => panic!("{bytes:?}: {other:?}"),
        };
        assert_eq!(field_of(b""), "message");
        assert_eq!(field_of(b"alice\0secret"), "message");
        assert_eq!(field_of(b"\0alice\0secret\0"), "message");
        assert_eq!(field_of(b"\0\0secret"), "authcid");
        assert_eq!(field_of(b"\0alice\0"), "passwd");
        assert_eq!(field_of(b"\0al\xffce\0secret"), "authcid");
    }

    #[test]
    fn debug_hides_the_password() {
        let m = parse(&msg("", "alice", "secret")).unwrap();
        assert!(!format!("{m:?}").contains("secret"));
    }
}
