//! Who calls a gRPC method and what the call needs: the pure part of the gRPC guard
//! (`grpc_guard.rs`). A caller names itself in the request's headers: the cluster credential
//! (another node, or an operator holding the credential file), or a user and password checked
//! against the user's SCRAM credentials (`authorization: Basic`, over the same users Kafka's
//! SASL logins use). Each method needs an operation on the cluster or on its topic, as Kafka's
//! handlers check the matching Kafka API.

use base64::Engine;
use proto::acl::Operation;

/// The request header that carries a user's name and password (HTTP Basic).
pub const AUTHORIZATION: &str = "authorization";

/// Who a call says it is, read from its headers before anything is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The cluster credential's bytes (compared by the guard).
    Credential(Vec<u8>),
    /// A user and the password to check.
    User {
        /// The user's name.
        name: String,
        /// The password given.
        password: String,
    },
    /// Nothing: `User:ANONYMOUS`.
    Anonymous,
}

/// Reads the claim of a call from its credential and authorization headers; an authorization
/// header that is not `Basic base64(user:password)` is refused with the reason.
pub fn claim(credential: Option<&[u8]>, authorization: Option<&[u8]>) -> Result<Claim, String> {
    if let Some(c) = credential {
        return Ok(Claim::Credential(c.to_vec()));
    }
    let Some(a) = authorization else {
        return Ok(Claim::Anonymous);
    };
    let text = std::str::from_utf8(a).map_err(|_| "authorization: not ASCII".to_string())?;
    let Some(b64) = text.strip_prefix("Basic ") else {
        return Err("authorization: only Basic (a user and password) is accepted".into());
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|_| "authorization: Basic credentials that are not base64".to_string())?;
    let raw = String::from_utf8(raw).map_err(|_| "authorization: a user or password that is not UTF-8".to_string())?;
    match raw.split_once(':') {
        Some((name, password)) if !name.is_empty() => Ok(Claim::User {
            name: name.to_string(),
            password: password.to_string(),
        }),
        _ => Err("authorization: Basic credentials are user:password with a non-empty user".into()),
    }
}

/// The header value a client sends for `user` and `password`.
pub fn basic(user: &str, password: &str) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {b64}")
}

/// What a method needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The operation on the cluster, checked before the call is served.
    Cluster(Operation),
    /// The operation on each topic the request names, checked by the method itself (the guard
    /// only authenticates).
    Topic(Operation),
}

/// What a method (`/package.Service/Method`) needs, after the Kafka API it matches; `None` for a
/// method this guard does not cover (answered by its own checks).
///
/// Where Kafka checks a topic for an admin API (DeleteTopics, CreatePartitions, topic configs),
/// the gRPC admin API checks the cluster: it is the operator's API, and its requests may name
/// thousands of topics. A topic-scoped grant acts through the Kafka API. Produce and fetch check
/// their topic, as Kafka's do.
pub fn need(path: &str) -> Option<Need> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    use Operation::*;
    match service {
        "ferry.v1.Admin" => Some(Need::Cluster(match method {
            "DescribeTopics" | "DescribeCluster" | "ListPartitionReassignments" | "DescribeLogDirs" | "ListPlans" => {
                Describe
            }
            "DescribeConfigs" | "DescribeClientQuotas" => DescribeConfigs,
            "CreateTopics" => Create,
            "AlterConfigs" | "AlterClientQuotas" => AlterConfigs,
            // Replicas report to the controller, as Kafka's brokers do with CLUSTER_ACTION.
            "AlterPartition" | "AlterPartitions" | "AssignReplicaDir" | "AssignReplicaDirs" => ClusterAction,
            // Reassignments, cancels, throttles, elections, plans, deletes and every method
            // added later: what changes the cluster needs ALTER.
            _ => Alter,
        })),
        "ferry.v1.Broker" => Some(match method {
            "Produce" => Need::Topic(Write),
            "Fetch" => Need::Topic(Read),
            "DescribeLogDirs" => Need::Cluster(Describe),
            // Replication between brokers.
            "ReplicaFetchSession" | "EpochEndOffset" => Need::Cluster(ClusterAction),
            _ => Need::Cluster(Alter),
        }),
        _ => None,
    }
}

/// Whether a method changes the cluster (its accepted calls are audited too).
pub fn changes(op: Operation) -> bool {
    !matches!(op, Operation::Describe | Operation::DescribeConfigs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_the_credential_a_user_or_nobody() {
        assert_eq!(
            claim(Some(b"tok"), Some(b"Basic x")),
            Ok(Claim::Credential(b"tok".to_vec()))
        );
        assert_eq!(claim(None, None), Ok(Claim::Anonymous));
        let header = basic("alice", "pa:ss");
        assert_eq!(
            claim(None, Some(header.as_bytes())),
            Ok(Claim::User {
                name: "alice".into(),
                password: "pa:ss".into()
            })
        );
        assert!(claim(None, Some(b"Bearer abc")).unwrap_err().contains("only Basic"));
        assert!(claim(None, Some(b"Basic !!!")).unwrap_err().contains("base64"));
        let no_user = basic("", "pw");
        assert!(claim(None, Some(no_user.as_bytes()))
            .unwrap_err()
            .contains("non-empty user"));
    }

    #[test]
    fn reassignments_throttles_and_cancels_need_alter_reads_describe_and_data_its_topic() {
        for m in [
            "AlterPartitionReassignments",
            "CancelAllReassignments",
            "RemoveCancel",
            "AlterThrottles",
            "ElectLeaders",
            "CreatePlan",
            "AlterPlan",
            "Undrain",
            "DeleteTopics",
            "CreatePartitions",
            "SomethingNew",
        ] {
            assert_eq!(
                need(&format!("/ferry.v1.Admin/{m}")),
                Some(Need::Cluster(Operation::Alter)),
                "{m}"
            );
        }
        let cluster = |p: &str| match need(p) {
            Some(Need::Cluster(op)) => Some(op),
            _ => None,
        };
        assert_eq!(cluster("/ferry.v1.Admin/DescribeTopics"), Some(Operation::Describe));
        assert_eq!(cluster("/ferry.v1.Admin/CreateTopics"), Some(Operation::Create));
        assert_eq!(cluster("/ferry.v1.Admin/AlterConfigs"), Some(Operation::AlterConfigs));
        assert_eq!(
            cluster("/ferry.v1.Admin/AlterPartition"),
            Some(Operation::ClusterAction)
        );
        assert_eq!(
            cluster("/ferry.v1.Admin/AlterPartitions"),
            Some(Operation::ClusterAction)
        );
        assert_eq!(
            cluster("/ferry.v1.Admin/AssignReplicaDirs"),
            Some(Operation::ClusterAction)
        );
        assert_eq!(
            cluster("/ferry.v1.Broker/ReplicaFetchSession"),
            Some(Operation::ClusterAction)
        );
        assert_eq!(cluster("/ferry.v1.Broker/AlterReplicaLogDirs"), Some(Operation::Alter));
        assert_eq!(need("/ferry.v1.Broker/Produce"), Some(Need::Topic(Operation::Write)));
        assert_eq!(need("/ferry.v1.Broker/Fetch"), Some(Need::Topic(Operation::Read)));
        assert_eq!(need("/ferry.v1.Metastore/Put"), None);
        assert_eq!(need("nonsense"), None);
        assert!(changes(Operation::Alter) && !changes(Operation::Describe));
    }
}
