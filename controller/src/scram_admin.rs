//! Users' SCRAM credentials (`/config/scram/<user>`): AlterUserScramCredentials and
//! DescribeUserScramCredentials, checked and answered as Kafka's controller does. A broker
//! derives the stored and server keys from the salted password the client sent, so neither
//! the password nor the salted password reaches the metastore.

use std::collections::BTreeMap;

use metastore::Client;
use prost::Message;
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse, DescribedScramUser, ScramCredential, ScramCredentialInfo, ScramUserRecord,
    ScramUserResult,
};
use proto::keys;
use proto::metastore as pb;

use crate::limits::RequestLimits;
use crate::store::{at_revision, put_op};
use crate::write_runner::{Plan, Runner};

/// Kafka's ScramMechanism codes served: SCRAM-SHA-256 and SCRAM-SHA-512.
pub const MECHANISMS: [(i32, &str); 2] = [(1, "SCRAM-SHA-256"), (2, "SCRAM-SHA-512")];
/// Kafka's bounds on a credential's iterations.
pub const MIN_ITERATIONS: i32 = 4096;
/// See [`MIN_ITERATIONS`].
pub const MAX_ITERATIONS: i32 = 16384;

fn mechanism_name(m: i32) -> Option<&'static str> {
    MECHANISMS.iter().find(|(c, _)| *c == m).map(|(_, n)| *n)
}

/// A user's credentials as read: the revision (0: absent) and the record, or why it cannot be
/// read.
pub type Stored = BTreeMap<String, (u64, Result<ScramUserRecord, Refusal>)>;

/// One change to a user's credentials.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    Delete(i32),
    Upsert(ScramCredential),
}

/// The users a request names, in the order first named, each with its changes.
fn by_user(req: &AlterUserScramCredentialsRequest) -> Vec<(String, Vec<Change>)> {
    let mut out: Vec<(String, Vec<Change>)> = Vec::new();
    let changes = req
        .deletions
        .iter()
        .map(|d| (&d.user, Change::Delete(d.mechanism)))
        .chain(req.upsertions.iter().map(|u| {
            let c = u.credential.clone().unwrap_or_default();
            (&u.user, Change::Upsert(c))
        }));
    for (user, change) in changes {
        match out.iter_mut().find(|(u, _)| u == user) {
            Some((_, v)) => v.push(change),
            None => out.push((user.clone(), vec![change])),
        }
    }
    out
}

/// Checks one user's changes before anything is read: Kafka's codes and messages.
fn check(user: &str, changes: &[Change]) -> Result<(), Refusal> {
    if user.is_empty() {
        return Err(Refusal::new(
            ErrorCode::UNACCEPTABLE_CREDENTIAL,
            "Username must not be empty",
        ));
    }
    let mut seen = Vec::new();
    for c in changes {
        let m = match c {
            Change::Delete(m) => *m,
            Change::Upsert(cred) => cred.mechanism,
        };
        let Some(name) = mechanism_name(m) else {
            return Err(Refusal::new(
                ErrorCode::UNSUPPORTED_SASL_MECHANISM,
                format!("Unknown SCRAM mechanism {m} for user {user}"),
            ));
        };
        if seen.contains(&m) {
            return Err(Refusal::new(
                ErrorCode::DUPLICATE_RESOURCE,
                format!("A user credential cannot be altered twice in the same request: {user} {name}"),
            ));
        }
        seen.push(m);
        if let Change::Upsert(cred) = c {
            if cred.iterations < MIN_ITERATIONS {
                return Err(Refusal::new(
                    ErrorCode::UNACCEPTABLE_CREDENTIAL,
                    format!(
                        "Too few iterations for {user} {name}: {} (at least {MIN_ITERATIONS})",
                        cred.iterations
                    ),
                ));
            }
            if cred.iterations > MAX_ITERATIONS {
                return Err(Refusal::new(
                    ErrorCode::UNACCEPTABLE_CREDENTIAL,
                    format!(
                        "Too many iterations for {user} {name}: {} (at most {MAX_ITERATIONS})",
                        cred.iterations
                    ),
                ));
            }
            if cred.salt.is_empty() || cred.stored_key.is_empty() || cred.server_key.is_empty() {
                return Err(Refusal::new(
                    ErrorCode::UNACCEPTABLE_CREDENTIAL,
                    format!("The credential of {user} {name} has an empty salt or key"),
                ));
            }
        }
    }
    Ok(())
}

/// AlterUserScramCredentials' plan: one result per user; a user whose changes are all valid
/// has them written together, guarded by the revision read; a user left with none is deleted.
pub fn plan_alter(req: &AlterUserScramCredentialsRequest, stored: &Stored) -> Plan<Vec<ScramUserResult>> {
    let mut results = Vec::new();
    let (mut guards, mut ops) = (Vec::new(), Vec::new());
    for (user, changes) in by_user(req) {
        let outcome = check(&user, &changes).and_then(|()| apply(&user, &changes, stored));
        let r = match outcome {
            Ok(Some((key, rev, record))) => {
                guards.push(at_revision(key.clone(), rev));
                ops.push(if record.credentials.is_empty() {
                    pb::Op {
                        op: Some(pb::op::Op::Delete(pb::DeleteOp { key })),
                    }
                } else {
                    put_op(key, &record)
                });
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(r) => Err(r),
        };
        results.push(ScramUserResult {
            user,
            error_code: r.as_ref().err().map_or(0, |r| r.code.0),
            error_message: r.err().map(|r| r.message).unwrap_or_default(),
        });
    }
    if ops.is_empty() {
        return Plan::answer(results);
    }
    Plan::write(guards, ops, results)
}

/// A user's record after its changes: the key, the revision read and the new record.
fn apply(user: &str, changes: &[Change], stored: &Stored) -> Result<Option<(String, u64, ScramUserRecord)>, Refusal> {
    let key = keys::scram_user(user);
    let (rev, mut record) = match stored.get(user) {
        Some((_, Err(r))) => return Err(r.clone()),
        Some((rev, Ok(r))) => (*rev, r.clone()),
        None => (0, ScramUserRecord::default()),
    };
    let before = record.clone();
    for c in changes {
        match c {
            Change::Delete(m) => {
                let had = record.credentials.len();
                record.credentials.retain(|x| x.mechanism != *m);
                if record.credentials.len() == had {
                    return Err(Refusal::new(
                        ErrorCode::RESOURCE_NOT_FOUND,
                        format!(
                            "Attempt to delete a user credential that does not exist: {user} {}",
                            mechanism_name(*m).unwrap_or("?")
                        ),
                    ));
                }
            }
            Change::Upsert(cred) => {
                record.credentials.retain(|x| x.mechanism != cred.mechanism);
                record.credentials.push(cred.clone());
                record.credentials.sort_by_key(|x| x.mechanism);
            }
        }
    }
    Ok((record != before).then_some((key, rev, record)))
}

fn damaged(user: &str, e: &prost::DecodeError) -> Refusal {
    Refusal::new(
        ErrorCode::KAFKA_STORAGE_ERROR,
        format!("the SCRAM credentials of {user} cannot be read ({e}); nothing was changed"),
    )
}

/// Reads the stored credentials of `users`, or of every user when `None`.
async fn read(client: &Client, users: Option<&[String]>) -> Result<Stored, metastore::ClientError> {
    let kvs = match users {
        Some(users) => {
            let keys: Vec<String> = users.iter().map(|u| keys::scram_user(u)).collect();
            let got = futures::future::try_join_all(keys.iter().map(|k| client.get(k))).await?;
            got.into_iter().flatten().collect::<Vec<_>>()
        }
        None => {
            client
                .range_req(pb::RangeRequest {
                    prefix: keys::SCRAM_USERS.into(),
                    ..Default::default()
                })
                .await?
                .kvs
        }
    };
    Ok(kvs
        .into_iter()
        .filter_map(|kv| {
            let user = keys::parse_scram_user(&kv.key)?;
            let rec = ScramUserRecord::decode(kv.value.as_ref()).map_err(|e| damaged(&user, &e));
            Some((user, (kv.mod_revision, rec)))
        })
        .collect())
}

/// AlterUserScramCredentials: checked per user, then written in one guarded transaction
/// (planned again when a guard fails).
pub async fn alter(
    client: &Client,
    limits: &RequestLimits,
    req: AlterUserScramCredentialsRequest,
) -> Result<AlterUserScramCredentialsResponse, metastore::ClientError> {
    if let Err(r) = limits.items("credential alterations", req.deletions.len() + req.upsertions.len()) {
        let results = by_user(&req)
            .into_iter()
            .map(|(user, _)| ScramUserResult {
                user,
                error_code: r.code.0,
                error_message: r.message.clone(),
            })
            .collect();
        return Ok(AlterUserScramCredentialsResponse { results });
    }
    let users: Vec<String> = by_user(&req)
        .into_iter()
        .map(|(u, _)| u)
        .filter(|u| !u.is_empty())
        .collect();
    let kept_changing = Refusal::new(
        ErrorCode::INVALID_UPDATE_VERSION,
        "the SCRAM credentials kept changing; retry",
    );
    let outcome = Runner::new(client, "scram credentials", kept_changing)
        .run(|| read(client, Some(&users)), |stored| Ok(plan_alter(&req, &stored)))
        .await?;
    let results = match outcome {
        Ok(r) => r,
        Err(r) => by_user(&req)
            .into_iter()
            .map(|(user, _)| ScramUserResult {
                user,
                error_code: r.code.0,
                error_message: r.message.clone(),
            })
            .collect(),
    };
    Ok(AlterUserScramCredentialsResponse { results })
}

/// DescribeUserScramCredentials' answer over what was read: the mechanisms and iterations of
/// each user (never a key); a user named twice or unknown gets Kafka's error.
pub fn describe_answer(
    req: &DescribeUserScramCredentialsRequest,
    stored: &Stored,
) -> DescribeUserScramCredentialsResponse {
    let info = |user: &str, rec: &Result<ScramUserRecord, Refusal>| match rec {
        Ok(r) => DescribedScramUser {
            user: user.to_string(),
            credentials: r
                .credentials
                .iter()
                .map(|c| ScramCredentialInfo {
                    mechanism: c.mechanism,
                    iterations: c.iterations,
                })
                .collect(),
            ..Default::default()
        },
        Err(r) => DescribedScramUser {
            user: user.to_string(),
            error_code: r.code.0,
            error_message: r.message.clone(),
            ..Default::default()
        },
    };
    let results = if req.all {
        stored.iter().map(|(u, (_, rec))| info(u, rec)).collect()
    } else {
        req.users
            .iter()
            .enumerate()
            .map(|(i, u)| {
                if req.users[..i].contains(u) {
                    return DescribedScramUser {
                        user: u.clone(),
                        error_code: ErrorCode::DUPLICATE_RESOURCE.0,
                        error_message: format!("Cannot describe SCRAM credentials for the same user twice: {u}"),
                        ..Default::default()
                    };
                }
                match stored.get(u) {
                    Some((_, rec)) => info(u, rec),
                    None => DescribedScramUser {
                        user: u.clone(),
                        error_code: ErrorCode::RESOURCE_NOT_FOUND.0,
                        error_message: format!("Attempt to describe a user credential that does not exist: {u}"),
                        ..Default::default()
                    },
                }
            })
            .collect()
    };
    DescribeUserScramCredentialsResponse {
        results,
        ..Default::default()
    }
}

/// DescribeUserScramCredentials.
pub async fn describe(
    client: &Client,
    limits: &RequestLimits,
    req: DescribeUserScramCredentialsRequest,
) -> Result<DescribeUserScramCredentialsResponse, metastore::ClientError> {
    if let Err(r) = limits.items("users", req.users.len()) {
        return Ok(DescribeUserScramCredentialsResponse {
            error_code: r.code.0,
            error_message: r.message,
            results: vec![],
        });
    }
    let stored = read(client, (!req.all).then_some(req.users.as_slice())).await?;
    Ok(describe_answer(&req, &stored))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::ferry::{ScramDeletion, ScramUpsertion};

    fn cred(m: i32, iterations: i32) -> ScramCredential {
        ScramCredential {
            mechanism: m,
            salt: b"salt".to_vec().into(),
            stored_key: b"stored".to_vec().into(),
            server_key: b"server".to_vec().into(),
            iterations,
        }
    }

    fn upsert(user: &str, c: ScramCredential) -> ScramUpsertion {
        ScramUpsertion {
            user: user.into(),
            credential: Some(c),
        }
    }

    #[test]
    fn each_user_is_checked_alone_and_the_valid_ones_are_written() {
        let req = AlterUserScramCredentialsRequest {
            deletions: vec![ScramDeletion {
                user: "bob".into(),
                mechanism: 1,
            }],
            upsertions: vec![
                upsert("alice", cred(2, 8192)),
                upsert("carol", cred(1, 100)),
                upsert("dave", cred(7, 4096)),
                upsert("", cred(1, 4096)),
                upsert("erin", cred(1, 4096)),
                upsert("erin", cred(1, 5000)),
            ],
        };
        let plan = plan_alter(&req, &Stored::new());
        let codes: Vec<(&str, i32)> = plan.answer.iter().map(|r| (r.user.as_str(), r.error_code)).collect();
        assert_eq!(
            codes,
            vec![
                ("bob", ErrorCode::RESOURCE_NOT_FOUND.0),
                ("alice", 0),
                ("carol", ErrorCode::UNACCEPTABLE_CREDENTIAL.0),
                ("dave", ErrorCode::UNSUPPORTED_SASL_MECHANISM.0),
                ("", ErrorCode::UNACCEPTABLE_CREDENTIAL.0),
                ("erin", ErrorCode::DUPLICATE_RESOURCE.0),
            ]
        );
        assert!(plan.answer[2].error_message.contains("Too few iterations"));
        assert_eq!(plan.ops.len(), 1, "only alice is written");
        assert_eq!(plan.guards.len(), 1);
    }

    #[test]
    fn deleting_the_last_credential_deletes_the_user_key() {
        let mut stored = Stored::new();
        stored.insert(
            "alice".into(),
            (
                7,
                Ok(ScramUserRecord {
                    credentials: vec![cred(1, 4096)],
                }),
            ),
        );
        let req = AlterUserScramCredentialsRequest {
            deletions: vec![ScramDeletion {
                user: "alice".into(),
                mechanism: 1,
            }],
            upsertions: vec![],
        };
        let plan = plan_alter(&req, &stored);
        assert_eq!(plan.answer[0].error_code, 0);
        assert!(matches!(plan.ops[0].op, Some(pb::op::Op::Delete(_))));
        assert_eq!(plan.guards, vec![at_revision(keys::scram_user("alice"), 7)]);
    }

    #[test]
    fn describe_names_mechanisms_and_iterations_and_refuses_unknown_and_repeated_users() {
        let mut stored = Stored::new();
        stored.insert(
            "alice".into(),
            (
                3,
                Ok(ScramUserRecord {
                    credentials: vec![cred(1, 4096), cred(2, 8192)],
                }),
            ),
        );
        let req = DescribeUserScramCredentialsRequest {
            users: vec!["alice".into(), "nobody".into(), "alice".into()],
            all: false,
        };
        let r = describe_answer(&req, &stored);
        assert_eq!(r.results[0].credentials.len(), 2);
        assert_eq!(r.results[0].credentials[1].iterations, 8192);
        assert_eq!(r.results[1].error_code, ErrorCode::RESOURCE_NOT_FOUND.0);
        assert_eq!(r.results[2].error_code, ErrorCode::DUPLICATE_RESOURCE.0);
        let all = describe_answer(
            &DescribeUserScramCredentialsRequest {
                users: vec![],
                all: true,
            },
            &stored,
        );
        assert_eq!(all.results.len(), 1);
    }
}
