//! AlterUserScramCredentials and DescribeUserScramCredentials, what `kafka-configs
//! --entity-type users --alter --add-config 'SCRAM-SHA-256=[password=...]'` and `--describe`
//! send. The client sends a salted password; this broker turns it into the stored and server
//! keys (`sasl::scram`) before it leaves, so only the keys reach the controller and the
//! metastore (`controller::scram_admin`).

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use proto::errors::ErrorCode;
use proto::ferry as pb;

use super::admin::{call_security, text};
use super::apis::wire;
use crate::controller_channels::ControllerChannels;
use crate::sasl::{Mechanism, ScramCredential};

/// Kafka's ScramMechanism code of a mechanism.
pub fn mechanism_code(m: Mechanism) -> Option<i32> {
    match m {
        Mechanism::ScramSha256 => Some(1),
        Mechanism::ScramSha512 => Some(2),
        Mechanism::Plain => None,
    }
}

/// The mechanism of a ScramMechanism code.
pub fn mechanism_of(code: i32) -> Option<Mechanism> {
    match code {
        1 => Some(Mechanism::ScramSha256),
        2 => Some(Mechanism::ScramSha512),
        _ => None,
    }
}

/// An upsertion's stored form, or the refusal of its salted password.
fn upserted(
    user: &str,
    mechanism: i8,
    iterations: i32,
    salt: &[u8],
    salted: &[u8],
) -> Result<pb::ScramCredential, (ErrorCode, String)> {
    let m = mechanism_of(mechanism.into()).ok_or_else(|| {
        (
            ErrorCode::UNSUPPORTED_SASL_MECHANISM,
            format!("Unknown SCRAM mechanism {mechanism} for user {user}"),
        )
    })?;
    let iterations_u = u32::try_from(iterations).unwrap_or(0);
    let c = ScramCredential::from_salted_password(m, salt, salted, iterations_u)
        .map_err(|e| (ErrorCode::UNACCEPTABLE_CREDENTIAL, format!("{user} {m}: {e}")))?;
    Ok(pb::ScramCredential {
        mechanism: mechanism.into(),
        salt: c.salt.into(),
        stored_key: c.stored_key.into(),
        server_key: c.server_key.into(),
        iterations,
    })
}

/// AlterUserScramCredentials: one result per user.
pub async fn alter(
    ch: &ControllerChannels,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // A user whose salted password cannot make a credential is refused here, whole.
    let mut refused: Vec<(String, ErrorCode, String)> = Vec::new();
    let mut upsertions = Vec::new();
    for u in &req.upsertions {
        let user = u.name.to_string();
        match upserted(&user, u.mechanism, u.iterations, &u.salt, &u.salted_password) {
            Ok(c) => upsertions.push(pb::ScramUpsertion {
                user,
                credential: Some(c),
            }),
            Err((code, message)) => {
                if !refused.iter().any(|(r, _, _)| *r == user) {
                    refused.push((user, code, message));
                }
            }
        }
    }
    let is_refused = |u: &str| refused.iter().any(|(r, _, _)| r == u);
    let grpc = pb::AlterUserScramCredentialsRequest {
        deletions: req
            .deletions
            .iter()
            .filter(|d| !is_refused(d.name.as_str()))
            .map(|d| pb::ScramDeletion {
                user: d.name.to_string(),
                mechanism: d.mechanism.into(),
            })
            .collect(),
        upsertions: upsertions.into_iter().filter(|u| !is_refused(&u.user)).collect(),
    };
    let users: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for n in req
            .deletions
            .iter()
            .map(|d| &d.name)
            .chain(req.upsertions.iter().map(|u| &u.name))
        {
            if !v.iter().any(|x| x == n.as_str()) {
                v.push(n.to_string());
            }
        }
        v
    };
    let answered: Vec<pb::ScramUserResult> = if grpc.deletions.is_empty() && grpc.upsertions.is_empty() {
        Vec::new()
    } else {
        match call_security(ch, |mut a| async move { a.alter_user_scram_credentials(grpc).await }).await {
            Ok(r) => r.results,
            Err((code, message)) => users
                .iter()
                .filter(|u| !is_refused(u))
                .map(|u| pb::ScramUserResult {
                    user: u.clone(),
                    error_code: code.into(),
                    error_message: message.clone(),
                })
                .collect(),
        }
    };
    let mut resp = AlterUserScramCredentialsResponse::default();
    resp.results = users
        .iter()
        .map(|u| {
            let mut r = AlterUserScramCredentialsResult::default();
            r.user = StrBytes::from_string(u.clone());
            if let Some((_, code, message)) = refused.iter().find(|(x, _, _)| x == u) {
                r.error_code = wire(*code);
                r.error_message = text(message);
            } else if let Some(a) = answered.iter().find(|a| a.user == *u) {
                r.error_code = a.error_code as i16;
                r.error_message = text(&a.error_message);
            }
            r
        })
        .collect();
    resp
}

/// DescribeUserScramCredentials: each user's mechanisms and iterations (never a key).
pub async fn describe(
    ch: &ControllerChannels,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let grpc = pb::DescribeUserScramCredentialsRequest {
        all: req.users.is_none(),
        users: req
            .users
            .unwrap_or_default()
            .into_iter()
            .map(|u| u.name.to_string())
            .collect(),
    };
    let mut resp = DescribeUserScramCredentialsResponse::default();
    match call_security(ch, |mut a| async move { a.describe_user_scram_credentials(grpc).await }).await {
        Ok(r) => {
            resp.error_code = r.error_code as i16;
            resp.error_message = text(&r.error_message);
            resp.results = r
                .results
                .into_iter()
                .map(|u| {
                    let mut d = DescribeUserScramCredentialsResult::default();
                    d.user = StrBytes::from_string(u.user);
                    d.error_code = u.error_code as i16;
                    d.error_message = text(&u.error_message);
                    d.credential_infos = u
                        .credentials
                        .into_iter()
                        .map(|c| {
                            let mut i = CredentialInfo::default();
                            i.mechanism = c.mechanism as i8;
                            i.iterations = c.iterations;
                            i
                        })
                        .collect();
                    d
                })
                .collect();
        }
        Err((code, message)) => {
            resp.error_code = code;
            resp.error_message = text(&message);
        }
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_salted_password_becomes_keys_and_a_bad_one_is_refused_naming_the_user() {
        let salted = [7u8; 32];
        let c = upserted("alice", 1, 4096, b"salt", &salted).expect("a SHA-256 credential");
        assert_eq!((c.mechanism, c.iterations), (1, 4096));
        assert_eq!(c.stored_key.len(), 32);
        let (code, msg) = upserted("alice", 2, 4096, b"salt", &salted).unwrap_err();
        assert_eq!(
            code,
            ErrorCode::UNACCEPTABLE_CREDENTIAL,
            "SHA-512 needs 64 bytes: {msg}"
        );
        assert!(msg.contains("alice"));
        let (code, _) = upserted("bob", 9, 4096, b"salt", &salted).unwrap_err();
        assert_eq!(code, ErrorCode::UNSUPPORTED_SASL_MECHANISM);
        let (code, _) = upserted("bob", 1, 100, b"salt", &salted).unwrap_err();
        assert_eq!(code, ErrorCode::UNACCEPTABLE_CREDENTIAL);
    }
}
