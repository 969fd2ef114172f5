//! A client of a Ferry cluster's data: finds partition leaders through the `Admin` service of
//! any quorum node, produces to and fetches from them, and follows leadership when it moves.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use proto::errors::ErrorCode;
use proto::ferry::admin_client::AdminClient;
use proto::ferry::broker_client::BrokerClient;
use proto::ferry::*;
use tonic::codegen::InterceptedService;
use tonic::transport::Channel;

use crate::auth::call_identity::CallIdentity;
use metastore::peers::{admin_channel, Peers};

/// An admin client whose calls carry the client's identity.
pub type AdminConn = AdminClient<InterceptedService<Channel, CallIdentity>>;
/// A broker client whose calls carry the client's identity.
pub type BrokerConn = BrokerClient<InterceptedService<Channel, CallIdentity>>;

/// What a data call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The cluster answered with a Kafka error.
    #[error("{code}: {message}")]
    Kafka {
        /// Kafka's code.
        code: ErrorCode,
        /// For people.
        message: String,
    },
    /// Nobody answered.
    #[error("unreachable: {0}")]
    Unreachable(String),
}

impl DataError {
    /// The Kafka code, when the cluster answered.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            DataError::Kafka { code, .. } => Some(*code),
            DataError::Unreachable(_) => None,
        }
    }
}

fn kafka(code: i32, message: String) -> DataError {
    DataError::Kafka {
        code: ErrorCode(code),
        message,
    }
}

/// Errors after which the partition's leader is looked up again, as Kafka's clients do (a
/// replica in a failed log dir answers KAFKA_STORAGE_ERROR until leadership moves).
fn refreshes_leader(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION | ErrorCode::KAFKA_STORAGE_ERROR
    )
}

/// How long a bootstrap server that failed a call is not chosen by a leader hint.
const HINT_IGNORED_AFTER_FAILURE: Duration = Duration::from_secs(30);

/// Talks to the quorum (admin) and the brokers (data).
#[derive(Clone)]
pub struct ClusterClient {
    admin: Vec<Channel>,
    /// The bootstrap addresses, in `admin`'s order, to follow a leader hint.
    admin_addrs: Arc<Vec<String>>,
    /// When each bootstrap server last failed a call: a hint does not send calls back to one
    /// that failed lately (a leader this client cannot reach would be named again and again).
    admin_failed: Arc<Mutex<HashMap<usize, std::time::Instant>>>,
    next_admin: Arc<Mutex<usize>>,
    leaders: Arc<Mutex<HashMap<(String, u32), i32>>>,
    endpoints: Arc<Mutex<HashMap<i32, String>>>,
    channels: Peers,
    timeout: Duration,
    identity: CallIdentity,
}

impl ClusterClient {
    /// A client of the quorum nodes at `bootstrap` (HOST:PORT each).
    pub fn new(bootstrap: &[String]) -> Result<Self, DataError> {
        let admin: Vec<Channel> = bootstrap.iter().filter_map(|b| admin_channel(b).ok()).collect();
        if admin.is_empty() || admin.len() != bootstrap.len() {
            return Err(DataError::Unreachable(format!(
                "invalid bootstrap server list {bootstrap:?}"
            )));
        }
        Ok(Self {
            admin,
            admin_addrs: Arc::new(bootstrap.to_vec()),
            admin_failed: Default::default(),
            next_admin: Arc::new(Mutex::new(0)),
            leaders: Default::default(),
            endpoints: Default::default(),
            channels: Default::default(),
            timeout: Duration::from_secs(40),
            identity: CallIdentity::default(),
        })
    }

    /// Gives up on one call after `timeout` (a hung node answers nothing at all), added to any
    /// wait the call itself asks for.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sends `identity` with every admin call (a node under an authorizer checks it).
    pub fn with_identity(mut self, identity: CallIdentity) -> Self {
        self.identity = identity;
        self
    }

    /// An admin client of one of the quorum nodes.
    pub fn admin(&self) -> AdminConn {
        let i = *self.next_admin.lock() % self.admin.len();
        AdminClient::with_interceptor(self.admin[i].clone(), self.identity.clone())
            .max_decoding_message_size(1 << 30)
            .max_encoding_message_size(1 << 30)
    }

    fn rotate_admin(&self) {
        *self.next_admin.lock() += 1;
    }

    /// Sends the next admin calls to the node an answer named as the leader, when it is one of
    /// the bootstrap servers (compared as written) and has not failed a call lately.
    fn follow_leader_hint(&self, meta: &tonic::metadata::MetadataMap) {
        let Some(i) = crate::controller_channels::hinted(meta, &self.admin_addrs) else {
            return;
        };
        let failed_lately = self
            .admin_failed
            .lock()
            .get(&i)
            .is_some_and(|t| t.elapsed() < HINT_IGNORED_AFTER_FAILURE);
        if !failed_lately {
            *self.next_admin.lock() = i;
        }
    }

    /// Calls the admin service, moving to another quorum node while one is unreachable.
    pub async fn admin_call<T, F, Fut>(&self, mut f: F) -> Result<T, DataError>
    where
        F: FnMut(AdminConn) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let mut last = String::new();
        for _ in 0..(self.admin.len() * 10) {
            match tokio::time::timeout(self.timeout, f(self.admin()))
                .await
                .unwrap_or_else(|_| Err(tonic::Status::deadline_exceeded("no answer in time")))
            {
                Ok(r) => {
                    self.follow_leader_hint(r.metadata());
                    return Ok(r.into_inner());
                }
                // A refused login or operation is refused by every node alike: not retried.
                Err(s) if s.code() == tonic::Code::Unauthenticated => {
                    return Err(kafka(ErrorCode::SASL_AUTHENTICATION_FAILED.0, s.message().to_string()));
                }
                Err(s) if s.code() == tonic::Code::PermissionDenied => {
                    return Err(kafka(
                        ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0,
                        s.message().to_string(),
                    ));
                }
                // A request over the node's size limit fails the same way everywhere: not retried.
                Err(s) if s.code() == tonic::Code::OutOfRange => {
                    return Err(kafka(
                        ErrorCode::INVALID_REQUEST.0,
                        format!("{} (socket.request.max.bytes)", s.message()),
                    ));
                }
                Err(s) => {
                    last = s.message().to_string();
                    let failed = *self.next_admin.lock() % self.admin.len();
                    tracing::debug!(node = %self.admin_addrs[failed], code = ?s.code(), error = %s.message(), "admin call failed; trying another quorum node");
                    self.admin_failed.lock().insert(failed, std::time::Instant::now());
                    self.rotate_admin();
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        Err(DataError::Unreachable(last))
    }

    /// Refreshes leaders and broker endpoints for a topic.
    pub async fn refresh(&self, topic: &str) -> Result<TopicDescription, DataError> {
        self.brokers().await?;
        let req = DescribeTopicsRequest {
            topics: vec![topic.to_string()],
        };
        let resp = self
            .admin_call(|mut a| {
                let req = req.clone();
                async move { a.describe_topics(req).await }
            })
            .await?;
        let t = resp.topics.into_iter().next().ok_or_else(|| {
            kafka(
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0,
                format!("no answer for {topic}"),
            )
        })?;
        if t.error_code != 0 {
            return Err(kafka(t.error_code, t.error_message));
        }
        let mut leaders = self.leaders.lock();
        for p in &t.partitions {
            if let Some(s) = &p.state {
                leaders.insert((topic.to_string(), p.partition), s.leader);
            }
        }
        Ok(t)
    }

    async fn leader_client(&self, topic: &str, partition: u32) -> Result<BrokerConn, DataError> {
        let key = (topic.to_string(), partition);
        let cached = self.leaders.lock().get(&key).copied();
        let leader = match cached {
            Some(l) if l >= 0 => l,
            _ => {
                let t = self.refresh(topic).await?;
                if !t.partitions.iter().any(|p| p.partition == partition) {
                    return Err(kafka(
                        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0,
                        format!("partition {topic}-{partition} does not exist"),
                    ));
                }
                self.leaders.lock().get(&key).copied().unwrap_or(-1)
            }
        };
        if leader < 0 {
            return Err(kafka(
                ErrorCode::LEADER_NOT_AVAILABLE.0,
                format!("{topic}-{partition} has no leader right now"),
            ));
        }
        let endpoint = self.endpoints.lock().get(&leader).cloned().ok_or_else(|| {
            kafka(
                ErrorCode::LEADER_NOT_AVAILABLE.0,
                format!("leader {leader} is not registered"),
            )
        })?;
        self.connect(&endpoint)
    }

    /// A client of the broker at `endpoint`, over the shared connection to it.
    fn connect(&self, endpoint: &str) -> Result<BrokerConn, DataError> {
        let ch = self
            .channels
            .channel(endpoint)
            .map_err(|e| DataError::Unreachable(format!("{endpoint}: {e}")))?;
        Ok(BrokerClient::with_interceptor(ch, self.identity.clone())
            .max_decoding_message_size(1 << 30)
            .max_encoding_message_size(1 << 30))
    }

    /// One call to a broker, within this client's timeout.
    async fn broker_call<T>(
        &self,
        broker: i32,
        call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, DataError> {
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| DataError::Unreachable(format!("broker {broker}: timed out")))?
            .map(tonic::Response::into_inner)
            .map_err(|s| DataError::Unreachable(format!("broker {broker}: {}", s.message())))
    }

    /// The registered brokers, from the cluster's metadata.
    pub async fn brokers(&self) -> Result<Vec<BrokerRegistration>, DataError> {
        let cluster = self
            .admin_call(|mut a| async move { a.describe_cluster(DescribeClusterRequest {}).await })
            .await?;
        let mut eps = self.endpoints.lock();
        for b in &cluster.brokers {
            eps.insert(b.id, b.endpoint.clone());
        }
        Ok(cluster.brokers)
    }

    /// A client of one registered broker.
    pub async fn broker(&self, id: i32) -> Result<BrokerConn, DataError> {
        let mut endpoint = self.endpoints.lock().get(&id).cloned();
        if endpoint.is_none() {
            self.brokers().await?;
            endpoint = self.endpoints.lock().get(&id).cloned();
        }
        let endpoint = endpoint.ok_or_else(|| {
            kafka(
                ErrorCode::BROKER_NOT_AVAILABLE.0,
                format!("broker {id} is not registered"),
            )
        })?;
        self.connect(&endpoint)
    }

    /// DescribeLogDirs on the given brokers (every registered one when empty), all at once.
    pub async fn describe_log_dirs(
        &self,
        brokers: &[i32],
        topics: &[String],
    ) -> Result<Vec<DescribeLogDirsResponse>, DataError> {
        let ids: Vec<i32> = if brokers.is_empty() {
            let mut ids: Vec<i32> = self.brokers().await?.iter().map(|b| b.id).collect();
            ids.sort_unstable();
            ids
        } else {
            brokers.to_vec()
        };
        let calls = ids.into_iter().map(|id| async move {
            let mut b = self.broker(id).await?;
            let req = DescribeLogDirsRequest {
                topics: topics.to_vec(),
            };
            self.broker_call(id, b.describe_log_dirs(req)).await
        });
        futures::future::try_join_all(calls).await
    }

    /// AlterReplicaLogDirs on one broker.
    pub async fn alter_replica_log_dirs(
        &self,
        broker: i32,
        moves: Vec<ReplicaLogDirMove>,
    ) -> Result<AlterReplicaLogDirsResponse, DataError> {
        let mut b = self.broker(broker).await?;
        self.broker_call(broker, b.alter_replica_log_dirs(AlterReplicaLogDirsRequest { moves }))
            .await
    }

    fn forget_leader(&self, topic: &str, partition: u32) {
        self.leaders.lock().remove(&(topic.to_string(), partition));
    }

    /// Produces one batch to the partition's leader, once (no retry); returns the base offset.
    pub async fn produce_once(
        &self,
        topic: &str,
        partition: u32,
        records: Vec<bytes::Bytes>,
        acks: i32,
    ) -> Result<i64, DataError> {
        let mut c = self.leader_client(topic, partition).await?;
        let req = ProduceRequest {
            topic: topic.to_string(),
            partition,
            acks,
            records,
            timeout_ms: 0,
        };
        let resp = tokio::time::timeout(self.timeout, c.produce(req)).await;
        match resp.unwrap_or_else(|_| Err(tonic::Status::deadline_exceeded("no answer in time"))) {
            Ok(r) => {
                let r = r.into_inner();
                if r.error_code != 0 {
                    if refreshes_leader(ErrorCode(r.error_code)) {
                        self.forget_leader(topic, partition);
                    }
                    return Err(kafka(r.error_code, r.error_message));
                }
                Ok(r.base_offset)
            }
            Err(s) => {
                self.forget_leader(topic, partition);
                Err(DataError::Unreachable(s.message().to_string()))
            }
        }
    }

    /// Fetches committed records from `offset`. A leader that has not yet learnt its high
    /// watermark (OFFSET_NOT_AVAILABLE) is asked again until the client's timeout, as Kafka's
    /// clients retry it.
    pub async fn fetch(
        &self,
        topic: &str,
        partition: u32,
        offset: i64,
        max_bytes: u32,
        max_wait_ms: u32,
    ) -> Result<FetchResponse, DataError> {
        let req = FetchRequest {
            topic: topic.to_string(),
            partition,
            offset,
            max_bytes,
            max_wait_ms,
        };
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            match self.fetch_once(&req).await {
                Err(e)
                    if e.code() == Some(ErrorCode::OFFSET_NOT_AVAILABLE) && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                r => return r,
            }
        }
    }

    /// One fetch from the partition's leader.
    async fn fetch_once(&self, req: &FetchRequest) -> Result<FetchResponse, DataError> {
        let (topic, partition) = (req.topic.as_str(), req.partition);
        let mut c = self.leader_client(topic, partition).await?;
        let limit = self.timeout + Duration::from_millis(req.max_wait_ms as u64);
        let resp = tokio::time::timeout(limit, c.fetch(req.clone())).await;
        match resp.unwrap_or_else(|_| Err(tonic::Status::deadline_exceeded("no answer in time"))) {
            Ok(r) => {
                let r = r.into_inner();
                if r.error_code != 0 {
                    if refreshes_leader(ErrorCode(r.error_code)) {
                        self.forget_leader(topic, partition);
                    }
                    return Err(kafka(r.error_code, r.error_message));
                }
                Ok(r)
            }
            Err(s) => {
                self.forget_leader(topic, partition);
                Err(DataError::Unreachable(s.message().to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(addr: &str) -> tonic::metadata::MetadataMap {
        let mut m = tonic::metadata::MetadataMap::new();
        m.insert(proto::LEADER_HINT, addr.parse().unwrap());
        m
    }

    #[tokio::test]
    async fn admin_calls_follow_a_leader_hint_to_a_known_server_only() {
        let c = ClusterClient::new(&["127.0.0.1:1".to_string(), "127.0.0.1:2".to_string()]).unwrap();
        assert_eq!(*c.next_admin.lock(), 0);
        c.follow_leader_hint(&hint("127.0.0.1:2"));
        assert_eq!(*c.next_admin.lock(), 1);
        // Not a bootstrap server: the client keeps to the one it uses.
        c.follow_leader_hint(&hint("10.0.0.9:7701"));
        assert_eq!(*c.next_admin.lock(), 1);
        c.follow_leader_hint(&tonic::metadata::MetadataMap::new());
        assert_eq!(*c.next_admin.lock(), 1);
        // A server that failed a call lately is not chosen by a hint.
        c.admin_failed.lock().insert(0, std::time::Instant::now());
        c.follow_leader_hint(&hint("127.0.0.1:1"));
        assert_eq!(*c.next_admin.lock(), 1);
    }
}
