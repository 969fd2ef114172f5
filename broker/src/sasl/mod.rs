//! SASL for the Kafka listener, as a pure core: PLAIN (RFC 4616) and SCRAM-SHA-256/512
//! (RFC 5802, RFC 7677), server side. No networking: the connection hands each client message to
//! an [`Authenticator`] and sends back what it returns.
//!
//! One user store serves both: SCRAM reads a user's SCRAM credential, and PLAIN checks the
//! password against it (a deliberate choice; Kafka's PLAIN reads passwords from JAAS files).
//! Every error that hinges on a user's credentials prints the same "authentication failed"
//! text, so a client cannot learn which users exist; the variant tells the broker's log why.

pub mod plain;
pub mod scram;

mod crypto;

#[cfg(test)]
mod credential_tests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::OnceLock;

use rand::distr::{Alphanumeric, SampleString};

pub use scram::ScramCredential;

/// Longest client message taken; Kafka's clients send a few hundred bytes at most.
pub const MAX_CLIENT_MESSAGE: usize = 4096;

/// A SASL mechanism the listener offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// `PLAIN`: user and password in the clear (over TLS).
    Plain,
    /// `SCRAM-SHA-256`.
    ScramSha256,
    /// `SCRAM-SHA-512`.
    ScramSha512,
}

impl Mechanism {
    /// Every mechanism, in the order a SaslHandshake answer lists them.
    pub const ALL: [Mechanism; 3] = [Mechanism::Plain, Mechanism::ScramSha256, Mechanism::ScramSha512];

    /// Kafka's name, as in SaslHandshake and `sasl.enabled.mechanisms`.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism of a Kafka name (exact, case-sensitive as Kafka matches it).
    pub fn parse(name: &str) -> Result<Mechanism, SaslError> {
        Mechanism::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| SaslError::UnsupportedMechanism(name.to_string()))
    }

    /// Whether this is one of the SCRAM mechanisms.
    pub fn is_scram(self) -> bool {
        self != Mechanism::Plain
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a SASL exchange, or a credential, was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// The client asked for a mechanism Ferry does not offer.
    #[error("unsupported SASL mechanism {0:?}")]
    UnsupportedMechanism(String),
    /// A SCRAM operation was asked of PLAIN.
    #[error("{0} is not a SCRAM mechanism")]
    NotScram(Mechanism),
    /// A client message longer than [`MAX_CLIENT_MESSAGE`].
    #[error("SASL message of {len} bytes is over the limit of {max}")]
    MessageTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A client message that does not parse; `field` names the part at fault.
    #[error("malformed SASL message: {field}: {reason}")]
    BadFrame {
        /// The field: a SCRAM attribute (`n`, `r`, `c`, `p`, ...) or a PLAIN part.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// No credential for this user (the text is the same as for a wrong password on purpose).
    #[error("authentication failed: invalid credentials")]
    UnknownUser {
        /// The user the client named.
        user: String,
    },
    /// PLAIN: the password does not match the user's credential.
    #[error("authentication failed: invalid credentials")]
    WrongPassword {
        /// The user.
        user: String,
    },
    /// SCRAM: the client proof does not match the stored key (a wrong password or a forged proof).
    #[error("authentication failed: invalid credentials")]
    BadProof {
        /// The user.
        user: String,
    },
    /// SCRAM: the nonce of client-final is not the one server-first sent.
    #[error("SCRAM nonce of client-final does not match the server's")]
    BadNonce,
    /// SCRAM: `c=` of client-final is not the base64 of client-first's GS2 header.
    #[error("SCRAM channel binding c= does not match the GS2 header of client-first")]
    ChannelBindingMismatch,
    /// SCRAM: the client asked for channel binding (`p=`), which Ferry does not offer.
    #[error("SCRAM channel binding {0:?} is not supported")]
    ChannelBindingUnsupported(String),
    /// The authorization identity differs from the authenticated user.
    #[error("authorization id {authzid:?} differs from user {user:?}")]
    AuthzidMismatch {
        /// The authzid the client sent.
        authzid: String,
        /// The user it authenticated as.
        user: String,
    },
    /// SCRAM: the client sent the `tokenauth` extension; delegation tokens are not served.
    #[error("SCRAM delegation token authentication (tokenauth) is not supported")]
    TokenAuthUnsupported,
    /// SCRAM: the client sent the reserved mandatory extension `m=`.
    #[error("SCRAM mandatory extension m= is not supported")]
    MandatoryExtension,
    /// An iteration count outside Kafka's bounds.
    #[error("SCRAM iterations {iterations} out of range {min}..={max}", min = scram::MIN_ITERATIONS, max = scram::MAX_ITERATIONS)]
    IterationsOutOfRange {
        /// The count refused.
        iterations: u32,
    },
    /// A credential (its text form, or a part given to a constructor) that is not valid.
    #[error("bad SCRAM credential: {field}: {reason}")]
    BadCredential {
        /// The field at fault (`salt`, `stored_key`, `server_key`, `iterations`, ...).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The nonce source gave a nonce SCRAM cannot carry (a bug of the source, not the client).
    #[error("server nonce {0:?} is not printable ASCII without ','")]
    BadServerNonce(String),
    /// `step` after the exchange succeeded.
    #[error("SASL exchange already completed")]
    AlreadyDone,
    /// `step` after the exchange failed.
    #[error("SASL exchange already failed")]
    AlreadyFailed,
}

impl SaslError {
    /// Whether this failure hinges on the user's credentials (unknown user, wrong password,
    /// bad proof); these all print the same text.
    pub fn is_credential_failure(&self) -> bool {
        matches!(
            self,
            SaslError::UnknownUser { .. } | SaslError::WrongPassword { .. } | SaslError::BadProof { .. }
        )
    }
}

/// Where SCRAM's server nonces come from: random in production, fixed in tests.
pub trait NonceSource: Send {
    /// A fresh server nonce: printable ASCII (0x21..=0x7e) without ','.
    fn server_nonce(&mut self) -> String;
}

impl<F: FnMut() -> String + Send> NonceSource for F {
    fn server_nonce(&mut self) -> String {
        self()
    }
}

/// Length of a [`RandomNonce`].
pub const RANDOM_NONCE_LEN: usize = 32;

/// Production nonces: [`RANDOM_NONCE_LEN`] random letters and digits.
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomNonce;

impl NonceSource for RandomNonce {
    fn server_nonce(&mut self) -> String {
        Alphanumeric.sample_string(&mut rand::rng(), RANDOM_NONCE_LEN)
    }
}

/// The user store the exchange reads.
pub trait CredentialLookup {
    /// The user's credential for a SCRAM mechanism, if there is one.
    fn scram(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential>;

    /// Key of the fake salts that unknown users get, so the same name gets the same salt each
    /// time. Default: random once per process. A store shared by brokers may give one key to all.
    fn unknown_user_key(&self) -> [u8; 32] {
        static KEY: OnceLock<[u8; 32]> = OnceLock::new();
        *KEY.get_or_init(rand::random)
    }
}

/// What one step of the exchange gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The exchange goes on: send these bytes, then feed the client's answer to `step`.
    Continue(Vec<u8>),
    /// Authenticated: send `reply` (SCRAM's server-final; empty for PLAIN).
    Done {
        /// The user now authenticated (Kafka's principal `User:<name>`).
        principal_user: String,
        /// Bytes for the client.
        reply: Vec<u8>,
    },
}

/// One connection's SASL exchange, a state machine fed the client's messages in order.
pub enum Authenticator {
    /// PLAIN: one message, one answer.
    Plain,
    /// SCRAM, waiting for client-first.
    ScramClientFirst {
        /// SCRAM-SHA-256 or -512.
        mechanism: Mechanism,
        /// Where the server nonce comes from.
        nonces: Box<dyn NonceSource>,
    },
    /// SCRAM, server-first sent, waiting for client-final.
    ScramClientFinal(Box<scram::AwaitingProof>),
    /// Authenticated; nothing more is taken.
    Done,
    /// Refused; nothing more is taken.
    Failed,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Names the state only: the states hold keys and nonces.
        let state = match self {
            Authenticator::Plain => "Plain",
            Authenticator::ScramClientFirst { .. } => "ScramClientFirst",
            Authenticator::ScramClientFinal(_) => "ScramClientFinal",
            Authenticator::Done => "Done",
            Authenticator::Failed => "Failed",
        };
        f.debug_tuple("Authenticator").field(&state).finish()
    }
}

impl Authenticator {
    /// A new exchange for `mechanism`; `nonce_source` serves SCRAM (PLAIN never asks it).
    pub fn new(mechanism: Mechanism, nonce_source: Box<dyn NonceSource>) -> Self {
        match mechanism {
            Mechanism::Plain => Authenticator::Plain,
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => Authenticator::ScramClientFirst {
                mechanism,
                nonces: nonce_source,
            },
        }
    }

    /// Takes the client's next message. Any error ends the exchange: later steps answer
    /// [`SaslError::AlreadyFailed`].
    pub fn step(&mut self, client_bytes: &[u8], creds: &dyn CredentialLookup) -> Result<Step, SaslError> {
        // Failed until this step proves otherwise, so every early return leaves it failed.
        let state = std::mem::replace(self, Authenticator::Failed);
        if matches!(state, Authenticator::Done) {
            *self = Authenticator::Done;
            return Err(SaslError::AlreadyDone);
        }
        if matches!(state, Authenticator::Failed) {
            return Err(SaslError::AlreadyFailed);
        }
        if client_bytes.len() > MAX_CLIENT_MESSAGE {
            return Err(SaslError::MessageTooLong {
                len: client_bytes.len(),
                max: MAX_CLIENT_MESSAGE,
            });
        }
        match state {
            Authenticator::Plain => {
                let user = plain::authenticate(client_bytes, creds)?;
                *self = Authenticator::Done;
                Ok(Step::Done {
                    principal_user: user,
                    reply: Vec::new(),
                })
            }
            Authenticator::ScramClientFirst { mechanism, mut nonces } => {
                let server_nonce = nonces.server_nonce();
                let (awaiting, server_first) = scram::server_first(mechanism, client_bytes, &server_nonce, creds)?;
                *self = Authenticator::ScramClientFinal(Box::new(awaiting));
                Ok(Step::Continue(server_first))
            }
            Authenticator::ScramClientFinal(awaiting) => {
                let (user, server_final) = scram::server_final(&awaiting, client_bytes)?;
                *self = Authenticator::Done;
                Ok(Step::Done {
                    principal_user: user,
                    reply: server_final,
                })
            }
            // Both answered above.
            Authenticator::Done | Authenticator::Failed => Err(SaslError::AlreadyFailed),
        }
    }

    /// Whether the exchange has authenticated the client.
    pub fn is_done(&self) -> bool {
        matches!(self, Authenticator::Done)
    }
}
