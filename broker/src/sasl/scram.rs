//! SCRAM (RFC 5802) with SHA-256 and SHA-512 (RFC 7677), server side, no channel binding:
//! the stored credential, its Kafka text form, and the two server messages.
//!
//! A user with no credential still gets a server-first (a fake salt, stable per name) and fails
//! only at the proof, with the same text as a wrong password: the exchange does not tell which
//! users exist.

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use super::crypto::{ct_eq, xor, ScramHash};
use super::{CredentialLookup, Mechanism, SaslError};

/// Fewest iterations Kafka accepts for a SCRAM credential.
pub const MIN_ITERATIONS: u32 = 4096;
/// Most iterations Kafka accepts for a SCRAM credential.
pub const MAX_ITERATIONS: u32 = 16384;

/// RFC 5802's key labels: ClientKey = HMAC(SaltedPassword, "Client Key"), ServerKey likewise.
pub(crate) const CLIENT_KEY: &[u8] = b"Client Key";
const SERVER_KEY: &[u8] = b"Server Key";

/// Iterations shown to an unknown user: Kafka's tools' default, the most common real value.
const UNKNOWN_USER_ITERATIONS: u32 = 4096;

/// Refuses an iteration count outside [`MIN_ITERATIONS`]..=[`MAX_ITERATIONS`].
pub fn check_iterations(iterations: u32) -> Result<(), SaslError> {
    if (MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        Ok(())
    } else {
        Err(SaslError::IterationsOutOfRange { iterations })
    }
}

/// What the broker stores for one user and one SCRAM mechanism (never the password).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// The salt the salted password was made with.
    pub salt: Vec<u8>,
    /// H(ClientKey): checks a client proof.
    pub stored_key: Vec<u8>,
    /// HMAC(SaltedPassword, "Server Key"): signs server-final.
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The keys stay out of logs: the server key lets one pose as the broker.
        f.debug_struct("ScramCredential")
            .field("salt", &B64.encode(&self.salt))
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// The credential of `password` under `mechanism`: Hi(password, salt, iterations) (PBKDF2),
    /// then its keys.
    pub fn derive(mechanism: Mechanism, password: &str, salt: &[u8], iterations: u32) -> Result<Self, SaslError> {
        let hash = ScramHash::of(mechanism)?;
        check_iterations(iterations)?;
        let salted = hash.salted_password(password.as_bytes(), salt, iterations);
        Self::from_salted_password(mechanism, salt, &salted, iterations)
    }

    /// The credential of an already salted password, as Kafka's AlterUserScramCredentials
    /// carries it (the client salts; the broker keeps only the keys).
    pub fn from_salted_password(
        mechanism: Mechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: u32,
    ) -> Result<Self, SaslError> {
        let hash = ScramHash::of(mechanism)?;
        check_iterations(iterations)?;
        if salt.is_empty() {
            return Err(bad_credential("salt", "empty"));
        }
        if salted_password.len() != hash.len() {
            return Err(bad_credential(
                "salted_password",
                &format!("{} bytes, {mechanism} needs {}", salted_password.len(), hash.len()),
            ));
        }
        Ok(ScramCredential {
            salt: salt.to_vec(),
            stored_key: hash.digest(&hash.hmac(salted_password, CLIENT_KEY)),
            server_key: hash.hmac(salted_password, SERVER_KEY),
            iterations,
        })
    }

    /// The text ZooKeeper-era Kafka keeps under `/config/users/<user>`:
    /// `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`.
    pub fn to_kafka_text(&self) -> String {
        format!(
            "salt={},stored_key={},server_key={},iterations={}",
            B64.encode(&self.salt),
            B64.encode(&self.stored_key),
            B64.encode(&self.server_key),
            self.iterations
        )
    }

    /// Parses [`to_kafka_text`](Self::to_kafka_text)'s form, strictly: the four fields once
    /// each (any order), nothing else, padded base64, SHA-256 or SHA-512 sized keys of one size,
    /// iterations in range. An error names the field.
    pub fn from_kafka_text(text: &str) -> Result<Self, SaslError> {
        const FIELDS: [&str; 4] = ["salt", "stored_key", "server_key", "iterations"];
        let mut values: HashMap<&str, &str> = HashMap::new();
        for pair in text.split(',') {
            let Some((name, value)) = pair.split_once('=') else {
                return Err(bad_credential(pair, "expected name=value"));
            };
            if !FIELDS.contains(&name) {
                return Err(bad_credential(name, "unknown field"));
            }
            if values.insert(name, value).is_some() {
                return Err(bad_credential(name, "given twice"));
            }
        }
        let field = |name: &'static str| values.get(name).copied().ok_or_else(|| bad_credential(name, "missing"));
        let b64 = |name: &'static str| -> Result<Vec<u8>, SaslError> {
            B64.decode(field(name)?).map_err(|_| bad_credential(name, "not base64"))
        };
        let salt = b64("salt")?;
        if salt.is_empty() {
            return Err(bad_credential("salt", "empty"));
        }
        let stored_key = b64("stored_key")?;
        if stored_key.len() != 32 && stored_key.len() != 64 {
            return Err(bad_credential(
                "stored_key",
                &format!("{} bytes, not 32 or 64", stored_key.len()),
            ));
        }
        let server_key = b64("server_key")?;
        if server_key.len() != stored_key.len() {
            return Err(bad_credential(
                "server_key",
                &format!("{} bytes, stored_key has {}", server_key.len(), stored_key.len()),
            ));
        }
        let iterations = field("iterations")?;
        // Digits only: `u32::from_str` would also take a leading '+'.
        if iterations.is_empty() || !iterations.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad_credential("iterations", "not a number"));
        }
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| bad_credential("iterations", "too large"))?;
        check_iterations(iterations)?;
        Ok(ScramCredential {
            salt,
            stored_key,
            server_key,
            iterations,
        })
    }
}

fn bad_credential(field: &str, reason: &str) -> SaslError {
    SaslError::BadCredential {
        field: field.to_string(),
        reason: reason.to_string(),
    }
}

fn bad_frame(field: &'static str, reason: &str) -> SaslError {
    SaslError::BadFrame {
        field,
        reason: reason.to_string(),
    }
}

/// The fake credential an unknown user meets: salt and keys from a keyed HMAC of the name, so
/// the same name gets the same salt on every try, as a real user does.
pub(crate) fn unknown_user_credential(
    mechanism: Mechanism,
    user: &str,
    creds: &dyn CredentialLookup,
) -> Result<ScramCredential, SaslError> {
    let hash = ScramHash::of(mechanism)?;
    let key = creds.unknown_user_key();
    let tagged = |label: &str| {
        [
            label.as_bytes(),
            b"\0",
            mechanism.name().as_bytes(),
            b"\0",
            user.as_bytes(),
        ]
        .concat()
    };
    let salt = ScramHash::Sha256.hmac(&key, &tagged("salt"));
    let salted = hash.hmac(&key, &tagged("salted password"));
    ScramCredential::from_salted_password(mechanism, &salt, &salted, UNKNOWN_USER_ITERATIONS)
}

/// A parsed client-first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The GS2 header as sent (`n,,`, `y,,`, or with `a=`): client-final's `c=` must be its base64.
    pub gs2_header: String,
    /// The user, unescaped.
    pub user: String,
    /// The client's nonce.
    pub client_nonce: String,
    /// client-first-message-bare: the part after the GS2 header, part of the AuthMessage.
    pub bare: String,
}

/// Parses client-first: GS2 header `n` or `y` (channel binding `p=` refused), an authzid equal
/// to the user if any, `n=`, `r=`, then extensions (`tokenauth` refused, others ignored).
pub fn parse_client_first(bytes: &[u8]) -> Result<ClientFirst, SaslError> {
    let msg = std::str::from_utf8(bytes).map_err(|_| bad_frame("message", "not UTF-8"))?;
    let (flag, rest) = msg.split_once(',').ok_or_else(|| bad_frame("gs2-header", "no ','"))?;
    match flag {
        "n" | "y" => {}
        _ => match flag.strip_prefix("p=") {
            Some(cb_name) => return Err(SaslError::ChannelBindingUnsupported(cb_name.to_string())),
            None => return Err(bad_frame("gs2-header", "channel binding flag must be n, y or p=")),
        },
    }
    let (authzid, bare) = rest
        .split_once(',')
        .ok_or_else(|| bad_frame("gs2-header", "no second ','"))?;
    let authzid = match authzid {
        "" => None,
        a => match a.strip_prefix("a=") {
            Some(name) => Some(decode_saslname("a", name)?),
            None => return Err(bad_frame("a", "authzid must start with a=")),
        },
    };
    let gs2_header = msg[..msg.len() - bare.len()].to_string();

    let mut attrs = bare.split(',');
    let first = attrs.next().unwrap_or_default();
    if first.starts_with("m=") {
        return Err(SaslError::MandatoryExtension);
    }
    let user = decode_saslname(
        "n",
        first
            .strip_prefix("n=")
            .ok_or_else(|| bad_frame("n", "expected n=<user>"))?,
    )?;
    let client_nonce = attrs
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or_else(|| bad_frame("r", "expected r="))?;
    if !printable_nonce(client_nonce) {
        return Err(bad_frame("r", "nonce must be printable ASCII without ','"));
    }
    for extension in attrs {
        check_extension(extension)?;
    }
    if let Some(authzid) = authzid {
        if authzid != user {
            return Err(SaslError::AuthzidMismatch { authzid, user });
        }
    }
    Ok(ClientFirst {
        gs2_header,
        user,
        client_nonce: client_nonce.to_string(),
        bare: bare.to_string(),
    })
}

/// A saslname of RFC 5802: `=2C` is ',', `=3D` is '=', any other '=' is refused.
fn decode_saslname(field: &'static str, name: &str) -> Result<String, SaslError> {
    if name.is_empty() {
        return Err(bad_frame(field, "empty"));
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let escape = &rest[at + 1..];
        if let Some(after) = escape.strip_prefix("2C") {
            out.push(',');
            rest = after;
        } else if let Some(after) = escape.strip_prefix("3D") {
            out.push('=');
            rest = after;
        } else {
            return Err(bad_frame(field, "'=' must be followed by 2C or 3D"));
        }
    }
    out.push_str(rest);
    if out.contains('\0') {
        return Err(bad_frame(field, "contains NUL"));
    }
    Ok(out)
}

/// Nonce characters of RFC 5802: printable ASCII but ','.
fn printable_nonce(nonce: &str) -> bool {
    !nonce.is_empty() && nonce.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// An extension `name=value`: `m` and `tokenauth` refused, SCRAM's own attributes out of
/// place refused, anything else ignored.
fn check_extension(attr: &str) -> Result<(), SaslError> {
    let (name, _) = attr
        .split_once('=')
        .ok_or_else(|| bad_frame("extensions", "expected name=value"))?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(bad_frame("extensions", "name must be letters"));
    }
    match name {
        "m" => Err(SaslError::MandatoryExtension),
        // Kafka's delegation tokens log in this way; Ferry does not serve them.
        "tokenauth" => Err(SaslError::TokenAuthUnsupported),
        "a" | "n" | "r" | "c" | "p" | "s" | "i" | "v" | "e" => {
            Err(bad_frame("extensions", &format!("attribute {name}= out of place")))
        }
        _ => Ok(()),
    }
}

/// The server's state between server-first and client-final.
pub struct AwaitingProof {
    hash: ScramHash,
    user: String,
    /// False for an unknown user: `credential` is then the fake one.
    known: bool,
    credential: ScramCredential,
    gs2_header: String,
    nonce: String,
    /// `client-first-bare,server-first`: the AuthMessage up to client-final.
    auth_prefix: String,
}

/// Answers client-first: looks the user up (a fake credential if unknown) and builds
/// server-first `r=<client nonce><server nonce>,s=<b64 salt>,i=<iterations>`.
pub fn server_first(
    mechanism: Mechanism,
    client_first: &[u8],
    server_nonce: &str,
    creds: &dyn CredentialLookup,
) -> Result<(AwaitingProof, Vec<u8>), SaslError> {
    let hash = ScramHash::of(mechanism)?;
    if !printable_nonce(server_nonce) {
        return Err(SaslError::BadServerNonce(server_nonce.to_string()));
    }
    let first = parse_client_first(client_first)?;
    let (known, credential) = match creds.scram(&first.user, mechanism) {
        Some(credential) => {
            // A stored count out of bounds is the store's fault; Kafka refuses it too.
            check_iterations(credential.iterations)?;
            (true, credential)
        }
        None => (false, unknown_user_credential(mechanism, &first.user, creds)?),
    };
    let nonce = format!("{}{server_nonce}", first.client_nonce);
    let server_first = format!(
        "r={nonce},s={},i={}",
        B64.encode(&credential.salt),
        credential.iterations
    );
    let awaiting = AwaitingProof {
        hash,
        user: first.user,
        known,
        credential,
        gs2_header: first.gs2_header,
        nonce,
        auth_prefix: format!("{},{server_first}", first.bare),
    };
    Ok((awaiting, server_first.into_bytes()))
}

/// Answers client-final `c=<b64 GS2 header>,r=<nonce>[,extensions],p=<b64 proof>`: checks
/// binding, nonce and proof, and gives the user and server-final `v=<b64 server signature>`.
pub fn server_final(awaiting: &AwaitingProof, client_final: &[u8]) -> Result<(String, Vec<u8>), SaslError> {
    let msg = std::str::from_utf8(client_final).map_err(|_| bad_frame("message", "not UTF-8"))?;
    // `split` yields at least one piece, so `attrs[0]` and `attrs.len() - 1` below are in bounds.
    let attrs: Vec<&str> = msg.split(',').collect();
    let binding = attrs[0]
        .strip_prefix("c=")
        .ok_or_else(|| bad_frame("c", "expected c= first"))?;
    let binding = B64.decode(binding).map_err(|_| bad_frame("c", "not base64"))?;
    if binding != awaiting.gs2_header.as_bytes() {
        return Err(SaslError::ChannelBindingMismatch);
    }
    let nonce = attrs
        .get(1)
        .and_then(|a| a.strip_prefix("r="))
        .ok_or_else(|| bad_frame("r", "expected r= second"))?;
    // Kafka's server checks only that the nonce ends with server-first's, and librdkafka (2.0
    // at least) sends its client nonce twice before it: the same check keeps those clients.
    if !nonce.ends_with(awaiting.nonce.as_str()) {
        return Err(SaslError::BadNonce);
    }
    let last = attrs.len() - 1;
    let proof = match attrs[last].strip_prefix("p=") {
        Some(proof) if last >= 2 => proof,
        _ => return Err(bad_frame("p", "expected the proof p= last")),
    };
    for extension in &attrs[2..last] {
        check_extension(extension)?;
    }
    let proof = B64.decode(proof).map_err(|_| bad_frame("p", "not base64"))?;
    let hash = awaiting.hash;
    if proof.len() != hash.len() {
        return Err(bad_frame(
            "p",
            &format!("{} bytes, expected {}", proof.len(), hash.len()),
        ));
    }

    let without_proof = &msg[..msg.len() - attrs[last].len() - 1];
    let auth_message = format!("{},{without_proof}", awaiting.auth_prefix);
    let credential = &awaiting.credential;
    let client_signature = hash.hmac(&credential.stored_key, auth_message.as_bytes());
    let client_key = xor(&proof, &client_signature);
    let proof_ok = ct_eq(&hash.digest(&client_key), &credential.stored_key);
    // An unknown user ran the same computation against the fake credential up to here.
    if !awaiting.known {
        return Err(SaslError::UnknownUser {
            user: awaiting.user.clone(),
        });
    }
    if !proof_ok {
        return Err(SaslError::BadProof {
            user: awaiting.user.clone(),
        });
    }
    let server_signature = hash.hmac(&credential.server_key, auth_message.as_bytes());
    Ok((
        awaiting.user.clone(),
        format!("v={}", B64.encode(server_signature)).into_bytes(),
    ))
}
