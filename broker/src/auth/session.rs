//! One connection's SASL session, as a Kafka broker runs it: ApiVersions and SaslHandshake
//! first, then SaslAuthenticate until the exchange ends, then requests as the principal it
//! proved. A session that expires (`connections.max.reauth.ms`, KIP-368) must authenticate
//! again, as the same principal, before its next request. Pure: the caller reads and writes
//! the frames, and closes the connection when told.

use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use proto::errors::ErrorCode;

use super::{ListenerSecurity, SecurityProtocol, ANONYMOUS};
use crate::sasl::{Authenticator, CredentialLookup, Mechanism, NonceSource, RandomNonce, SaslError, Step};

/// Where a session stands.
#[derive(Debug)]
enum State {
    /// A listener without SASL: every request is served as `User:ANONYMOUS`.
    Open,
    /// Waiting for SaslHandshake (first login, or a re-authentication).
    AwaitHandshake,
    /// The handshake chose a mechanism: SaslAuthenticate messages feed the exchange.
    Exchange(Authenticator),
    /// Authenticated.
    Authenticated,
    /// A login failed: nothing more is served.
    Failed,
}

/// What the connection must do with a request, before serving it.
#[derive(Debug, PartialEq, Eq)]
pub enum Gate {
    /// Serve it.
    Serve,
    /// Close the connection without an answer (a request out of turn, an expired session).
    Close(String),
}

/// The answer to a SaslHandshake.
#[derive(Debug, PartialEq, Eq)]
pub struct Handshake {
    /// NONE, UNSUPPORTED_SASL_MECHANISM or ILLEGAL_SASL_STATE.
    pub error: ErrorCode,
    /// The mechanisms the listener offers.
    pub mechanisms: Vec<&'static str>,
    /// Whether the connection closes once the answer is sent.
    pub close: bool,
}

/// The answer to a SaslAuthenticate.
#[derive(Debug, PartialEq, Eq)]
pub struct Authenticate {
    /// NONE, SASL_AUTHENTICATION_FAILED or ILLEGAL_SASL_STATE.
    pub error: ErrorCode,
    /// For the client: why it failed.
    pub message: Option<String>,
    /// The bytes of the exchange for the client.
    pub bytes: Vec<u8>,
    /// The session's lifetime once authenticated (0: no limit), as v1 answers carry it.
    pub session_lifetime_ms: i64,
    /// Whether the connection closes once the answer is sent (after the failed-login delay).
    pub close: bool,
}

/// One connection's session.
#[derive(Debug)]
pub struct Session {
    state: State,
    mechanisms: Vec<Mechanism>,
    max_reauth: Option<Duration>,
    /// The principal proved (`User:<name>`), kept across re-authentications.
    principal: String,
    /// The mechanism of the first login: a re-authentication must use it again.
    mechanism: Option<Mechanism>,
    /// When the session must authenticate again.
    expires: Option<Instant>,
}

impl Session {
    /// A new connection's session on the listener `name` of `protocol`, with `settings`.
    pub fn new(settings: &ListenerSecurity, name: &str, protocol: SecurityProtocol) -> Self {
        Self {
            state: if protocol.sasl() {
                State::AwaitHandshake
            } else {
                State::Open
            },
            mechanisms: settings.mechanisms_of(name).to_vec(),
            max_reauth: settings.max_reauth,
            principal: ANONYMOUS.to_string(),
            mechanism: None,
            expires: None,
        }
    }

    /// A session whose client certificate named `principal` (an SSL listener without SASL;
    /// with SASL the login names it).
    pub fn with_certificate(mut self, principal: Option<String>) -> Self {
        if let (State::Open, Some(p)) = (&self.state, principal) {
            self.principal = p;
        }
        self
    }

    /// The principal requests are served as.
    pub fn principal(&self) -> &str {
        &self.principal
    }

    /// Whether the connection must close once the last answer is sent (a failed login).
    pub fn closing(&self) -> bool {
        matches!(self.state, State::Failed)
    }

    /// Whether the request may be served now.
    pub fn gate(&self, api: ApiKey, now: Instant) -> Gate {
        let sasl_api = matches!(api, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate);
        match &self.state {
            State::Open => Gate::Serve,
            State::Failed => Gate::Close("authentication failed".into()),
            _ if api == ApiKey::ApiVersions => Gate::Serve,
            State::Authenticated if sasl_api => Gate::Serve,
            State::Authenticated => match self.expires {
                Some(t) if now >= t => Gate::Close(format!(
                    "the session of {} expired; it must authenticate again (connections.max.reauth.ms)",
                    self.principal
                )),
                _ => Gate::Serve,
            },
            _ if sasl_api => Gate::Serve,
            _ => Gate::Close(format!("{api:?} before SASL authentication completed")),
        }
    }

    fn offered(&self) -> Vec<&'static str> {
        self.mechanisms.iter().map(|m| m.name()).collect()
    }

    /// SaslHandshake naming `mechanism`.
    pub fn handshake(&mut self, mechanism: &str) -> Handshake {
        let mechanisms = self.offered();
        let illegal = |close| Handshake {
            error: ErrorCode::ILLEGAL_SASL_STATE,
            mechanisms: mechanisms.clone(),
            close,
        };
        match self.state {
            // Kafka answers a handshake its API layer sees (a listener without SASL) so.
            State::Open => return illegal(false),
            State::AwaitHandshake | State::Authenticated => {}
            State::Exchange(_) | State::Failed => {
                self.state = State::Failed;
                return illegal(true);
            }
        }
        let chosen = Mechanism::parse(mechanism).ok().filter(|m| self.mechanisms.contains(m));
        let Some(m) = chosen else {
            self.state = State::Failed;
            return Handshake {
                error: ErrorCode::UNSUPPORTED_SASL_MECHANISM,
                mechanisms,
                close: true,
            };
        };
        if self.mechanism.is_some_and(|first| first != m) {
            // A re-authentication must use the mechanism of the first login (KIP-368).
            self.state = State::Failed;
            return illegal(true);
        }
        let nonces: Box<dyn NonceSource> = Box::new(RandomNonce);
        self.state = State::Exchange(Authenticator::new(m, nonces));
        self.mechanism = Some(m);
        Handshake {
            error: ErrorCode::NONE,
            mechanisms,
            close: false,
        }
    }

    /// SaslAuthenticate carrying `bytes`.
    pub fn authenticate(&mut self, bytes: &[u8], creds: &dyn CredentialLookup, now: Instant) -> Authenticate {
        let State::Exchange(auth) = &mut self.state else {
            self.state = State::Failed;
            return failed(
                ErrorCode::ILLEGAL_SASL_STATE,
                "SaslAuthenticate without a SaslHandshake first",
            );
        };
        match auth.step(bytes, creds) {
            Ok(Step::Continue(reply)) => Authenticate {
                error: ErrorCode::NONE,
                message: None,
                bytes: reply,
                session_lifetime_ms: 0,
                close: false,
            },
            Ok(Step::Done { principal_user, reply }) => {
                let principal = format!("User:{principal_user}");
                let reauth = self.principal != ANONYMOUS;
                if reauth && principal != self.principal {
                    self.state = State::Failed;
                    return failed(
                        ErrorCode::SASL_AUTHENTICATION_FAILED,
                        "a re-authentication must prove the same principal",
                    );
                }
                self.principal = principal;
                self.state = State::Authenticated;
                self.expires = self.max_reauth.map(|d| now + d);
                Authenticate {
                    error: ErrorCode::NONE,
                    message: None,
                    bytes: reply,
                    session_lifetime_ms: self.max_reauth.map_or(0, |d| d.as_millis() as i64),
                    close: false,
                }
            }
            Err(e) => {
                self.state = State::Failed;
                failed(ErrorCode::SASL_AUTHENTICATION_FAILED, &message(&e))
            }
        }
    }
}

/// The message a failed login gets: the same for a wrong password and an unknown user.
fn message(e: &SaslError) -> String {
    if e.is_credential_failure() {
        "Authentication failed: Invalid username or password".into()
    } else {
        format!("Authentication failed: {e}")
    }
}

fn failed(error: ErrorCode, message: &str) -> Authenticate {
    Authenticate {
        error,
        message: Some(message.to_string()),
        bytes: Vec::new(),
        session_lifetime_ms: 0,
        close: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::ScramCredential;

    struct One(ScramCredential);

    impl CredentialLookup for One {
        fn scram(&self, user: &str, m: Mechanism) -> Option<ScramCredential> {
            (user == "alice" && m == Mechanism::ScramSha256).then(|| self.0.clone())
        }
    }

    fn sasl(max_reauth: Option<Duration>) -> Session {
        Session::new(
            &ListenerSecurity {
                max_reauth,
                ..Default::default()
            },
            "SASL_PLAINTEXT",
            SecurityProtocol::SaslPlaintext,
        )
    }

    fn alice() -> One {
        One(ScramCredential::derive(Mechanism::ScramSha256, "secret", b"salt-of-alice", 4096).unwrap())
    }

    #[test]
    fn only_api_versions_and_the_handshake_come_before_a_login() {
        let s = sasl(None);
        let now = Instant::now();
        assert_eq!(s.gate(ApiKey::ApiVersions, now), Gate::Serve);
        assert_eq!(s.gate(ApiKey::SaslHandshake, now), Gate::Serve);
        assert!(matches!(s.gate(ApiKey::Metadata, now), Gate::Close(m) if m.contains("Metadata")));
        let open = Session::new(&ListenerSecurity::default(), "PLAINTEXT", SecurityProtocol::Plaintext);
        assert_eq!(open.gate(ApiKey::Produce, now), Gate::Serve);
        assert_eq!(open.principal(), ANONYMOUS);
    }

    #[test]
    fn plain_login_proves_the_principal_and_a_wrong_password_closes_the_connection() {
        let now = Instant::now();
        let mut s = sasl(Some(Duration::from_secs(60)));
        assert_eq!(s.handshake("PLAIN").error, ErrorCode::NONE);
        let ok = s.authenticate(b"\0alice\0secret", &alice(), now);
        assert_eq!(
            (ok.error, ok.session_lifetime_ms, ok.close),
            (ErrorCode::NONE, 60_000, false)
        );
        assert_eq!(s.principal(), "User:alice");
        assert_eq!(s.gate(ApiKey::Produce, now), Gate::Serve);
        assert!(matches!(
            s.gate(ApiKey::Produce, now + Duration::from_secs(61)),
            Gate::Close(_)
        ));

        let mut bad = sasl(None);
        bad.handshake("PLAIN");
        let no = bad.authenticate(b"\0alice\0wrong", &alice(), now);
        assert_eq!((no.error, no.close), (ErrorCode::SASL_AUTHENTICATION_FAILED, true));
        let unknown = {
            let mut s = sasl(None);
            s.handshake("PLAIN");
            s.authenticate(b"\0mallory\0secret", &alice(), now)
        };
        assert_eq!(
            no.message, unknown.message,
            "an unknown user fails as a wrong password does"
        );
        assert!(matches!(bad.gate(ApiKey::Metadata, now), Gate::Close(_)));
    }

    #[test]
    fn a_mechanism_not_offered_or_a_message_out_of_turn_is_refused() {
        let mut s = sasl(None);
        let h = s.handshake("GSSAPI");
        assert_eq!((h.error, h.close), (ErrorCode::UNSUPPORTED_SASL_MECHANISM, true));
        assert!(h.mechanisms.contains(&"SCRAM-SHA-512"));
        let mut s = sasl(None);
        let a = s.authenticate(b"n,,n=alice,r=abc", &alice(), Instant::now());
        assert_eq!((a.error, a.close), (ErrorCode::ILLEGAL_SASL_STATE, true));
        let mut open = Session::new(&ListenerSecurity::default(), "PLAINTEXT", SecurityProtocol::Plaintext);
        assert_eq!(open.handshake("PLAIN").error, ErrorCode::ILLEGAL_SASL_STATE);
    }

    #[test]
    fn a_reauthentication_keeps_the_mechanism_and_the_principal() {
        let now = Instant::now();
        let mut s = sasl(Some(Duration::from_secs(1)));
        s.handshake("PLAIN");
        s.authenticate(b"\0alice\0secret", &alice(), now);
        let h = s.handshake("SCRAM-SHA-256");
        assert_eq!((h.error, h.close), (ErrorCode::ILLEGAL_SASL_STATE, true));

        let mut s = sasl(Some(Duration::from_secs(1)));
        s.handshake("PLAIN");
        s.authenticate(b"\0alice\0secret", &alice(), now);
        assert_eq!(s.handshake("PLAIN").error, ErrorCode::NONE);
        let later = now + Duration::from_secs(5);
        assert_eq!(
            s.authenticate(b"\0alice\0secret", &alice(), later).error,
            ErrorCode::NONE
        );
        assert_eq!(
            s.gate(ApiKey::Produce, later),
            Gate::Serve,
            "the new session runs from its login"
        );
    }
}
