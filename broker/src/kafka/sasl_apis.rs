//! SaslHandshake and SaslAuthenticate: the frames of a login, decoded and answered from the
//! connection's session (`auth::session`). SaslHandshake v0 is served as v1 is: librdkafka
//! enables its handshake only when v0 is advertised, then sends v1 and SaslAuthenticate; a
//! client that follows a v0 handshake with raw tokens (before Kafka 1.0) is not served.
//! A failed login's answer waits
//! `connection.failed.authentication.delay.ms`, so that guessing passwords is slow, and the
//! connection then closes.

use std::time::Instant;

use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::apis::wire;
use crate::auth::session::Session;
use crate::auth::view::SecurityView;
use crate::replica_manager::BrokerCore;

/// SaslHandshake's answer.
pub fn handshake(session: &parking_lot::Mutex<Session>, req: &SaslHandshakeRequest) -> SaslHandshakeResponse {
    let h = session.lock().handshake(req.mechanism.as_str());
    let mut r = SaslHandshakeResponse::default();
    r.error_code = wire(h.error);
    r.mechanisms = h.mechanisms.into_iter().map(StrBytes::from_static_str).collect();
    r
}

/// SaslAuthenticate's answer, after the failed-login delay when the login failed.
pub async fn authenticate(
    core: &BrokerCore,
    session: &parking_lot::Mutex<Session>,
    view: &SecurityView,
    req: &SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    let a = session.lock().authenticate(&req.auth_bytes, view, Instant::now());
    if a.close {
        core.metrics.authentication_failures.inc();
        tracing::info!(error = a.message.as_deref().unwrap_or(""), "kafka login refused");
        tokio::time::sleep(view.settings().failed_authentication_delay).await;
    }
    let mut r = SaslAuthenticateResponse::default();
    r.error_code = wire(a.error);
    r.error_message = a.message.map(StrBytes::from_string);
    r.auth_bytes = a.bytes.into();
    r.session_lifetime_ms = a.session_lifetime_ms;
    r
}
