//! `ferry consume --group G`: a member of consumer group G by KIP-848's protocol. It heartbeats
//! the group's coordinator over the Kafka protocol at the interval the coordinator names, reads
//! the partitions the coordinator's assignor gives it (over gRPC), commits its positions with its
//! member id and epoch (before it lets a partition go, at each heartbeat and on exit), starts a
//! partition at its committed offset, and leaves the group (epoch -1) when it stops. The
//! decisions are `group_plan`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context};
use broker::ClusterClient;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, GroupId, OffsetCommitRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use proto::errors::ErrorCode;
use tokio::time::Instant;
use uuid::Uuid;

use crate::group_plan::{self, OnError};
use crate::kafka_client::responses::{CONSUMER_GROUP_HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH};
use crate::kafka_client::{check, find_group_coordinator, KafkaConn, KafkaError};

/// How long a member may take to give up partitions (`max.poll.interval.ms`'s role).
const REBALANCE_TIMEOUT_MS: i32 = 60_000;
/// Failed calls in a row to the coordinator before the command gives up (two minutes and more:
/// the first use of groups creates `__consumer_offsets`, whose partitions then load).
const MAX_FAILURES: u32 = 240;
/// The pause after a failed call.
const BACKOFF: Duration = Duration::from_millis(500);

/// What `ferry consume --group` was asked.
pub struct GroupArgs {
    /// The group.
    pub group: String,
    /// The topic subscribed to.
    pub topic: String,
    /// Where a partition without a committed offset starts.
    pub from_beginning: bool,
    /// Stop after this many records.
    pub max_records: Option<u64>,
    /// Stop when no record arrives for this long (ms).
    pub timeout_ms: Option<u64>,
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// One member and what it holds.
struct Member {
    cluster: ClusterClient,
    /// Every broker's Kafka listener, to find the coordinator through.
    kafka: Vec<String>,
    args: GroupArgs,
    topic_id: Uuid,
    coordinator: Option<KafkaConn>,
    member_id: String,
    epoch: i32,
    interval_ms: u64,
    owned: BTreeSet<i32>,
    positions: BTreeMap<i32, i64>,
    committed: BTreeMap<i32, i64>,
    failures: u32,
}

/// Runs the member until a stop condition or a signal; prints records as lines.
pub async fn run(cluster: ClusterClient, args: GroupArgs) -> anyhow::Result<()> {
    let t = cluster.refresh(&args.topic).await?;
    let topic_id =
        Uuid::from_str(&t.topic_id).with_context(|| format!("topic {} has id {:?}", args.topic, t.topic_id))?;
    let kafka: Vec<String> = cluster
        .brokers()
        .await?
        .into_iter()
        .map(|b| broker::kafka::listeners::plain_endpoint(&b).to_string())
        .filter(|e| !e.is_empty())
        .collect();
    if kafka.is_empty() {
        bail!("no broker has a Kafka listener (ferry node --kafka-listen); --group needs one");
    }
    let mut m = Member {
        cluster,
        kafka,
        args,
        topic_id,
        coordinator: None,
        member_id: String::new(),
        epoch: 0,
        interval_ms: group_plan::DEFAULT_INTERVAL_MS,
        owned: BTreeSet::new(),
        positions: BTreeMap::new(),
        committed: BTreeMap::new(),
        failures: 0,
    };
    let result = m.consume().await;
    // Leave even after an error, so that the group rebalances now rather than at the session's end.
    if m.epoch > 0 {
        if let Err(e) = m.commit(&m.owned.clone()).await {
            tracing::warn!(error = %e, "committing on the way out failed");
        }
        if let Err(e) = m.heartbeat(true).await {
            tracing::warn!(error = %e, "leaving the group failed");
        }
    }
    result
}

impl Member {
    async fn consume(&mut self) -> anyhow::Result<()> {
        let clock = Instant::now();
        let now_ms = move || clock.elapsed().as_millis() as u64;
        let mut stop = std::pin::pin!(crate::shutdown_signal());
        let mut next_hb = 0u64;
        let mut printed = 0u64;
        let mut idle_since = Instant::now();
        loop {
            if now_ms() >= next_hb {
                let sent = now_ms();
                let owes_ack = self.heartbeat(false).await?;
                next_hb = group_plan::next_heartbeat(sent, self.interval_ms, owes_ack);
                if !owes_ack {
                    // Kafka's auto-commit, at the heartbeat's pace.
                    if let Err(e) = self.commit(&self.owned.clone()).await {
                        tracing::warn!(error = %e, "committing offsets failed; retried at the next heartbeat");
                    }
                }
            }
            let mut got = false;
            let parts: Vec<i32> = self.owned.iter().copied().collect();
            if parts.is_empty() {
                tokio::select! {
                    _ = &mut stop => return Ok(()),
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
            let wait = if parts.len() == 1 { 500 } else { 20 };
            for p in parts {
                let Some(offset) = self.positions.get(&p).copied() else {
                    continue;
                };
                let fetched = tokio::select! {
                    _ = &mut stop => return Ok(()),
                    r = self.cluster.fetch(&self.args.topic, p as u32, offset, 1 << 20, wait) => r,
                };
                let r = match fetched {
                    Ok(r) => r,
                    Err(e)
                        if matches!(
                            e.code(),
                            None | Some(ErrorCode::NOT_LEADER_OR_FOLLOWER) | Some(ErrorCode::LEADER_NOT_AVAILABLE)
                        ) =>
                    {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                    Err(e) => bail!("{}-{p}: {e}", self.args.topic),
                };
                for rec in r.records {
                    println!("{}", String::from_utf8_lossy(&rec.value));
                    self.positions.insert(p, rec.offset + 1);
                    printed += 1;
                    got = true;
                    if self.args.max_records.is_some_and(|m| printed >= m) {
                        return Ok(());
                    }
                }
            }
            if got {
                idle_since = Instant::now();
            } else if self
                .args
                .timeout_ms
                .is_some_and(|t| idle_since.elapsed() >= Duration::from_millis(t))
            {
                return Ok(());
            }
        }
    }

    /// The coordinator's connection, found through any broker's listener when there is none.
    async fn coordinator(&mut self) -> Result<&mut KafkaConn, KafkaError> {
        if self.coordinator.is_none() {
            let mut last = None;
            for addr in &self.kafka {
                match find_group_coordinator(addr, &self.args.group).await {
                    Ok((_, at)) => match KafkaConn::connect(&at).await {
                        Ok(c) => {
                            self.coordinator = Some(c);
                            break;
                        }
                        Err(e) => last = Some(e),
                    },
                    Err(e) => last = Some(e),
                }
            }
            if self.coordinator.is_none() {
                return Err(last.unwrap_or_else(|| KafkaError::Refused {
                    code: ErrorCode::COORDINATOR_NOT_AVAILABLE,
                    message: format!("no broker answered for group {}", self.args.group),
                }));
            }
        }
        // Set just above when it was empty.
        self.coordinator.as_mut().ok_or_else(|| KafkaError::Refused {
            code: ErrorCode::COORDINATOR_NOT_AVAILABLE,
            message: format!("group {}", self.args.group),
        })
    }

    /// Counts a failed call: the connection is dropped (its answer may still come) and the
    /// command gives up after too many in a row.
    /// Sends `req` to the coordinator: its answer, or `None` after a failed call (counted and
    /// backed off; the caller asks again).
    async fn ask<R: Request>(&mut self, req: &R, version: i16) -> anyhow::Result<Option<R::Response>> {
        let answer = match self.coordinator().await {
            Ok(c) => c.call(req, version).await,
            Err(e) => Err(e),
        };
        match answer {
            Ok(r) => Ok(Some(r)),
            Err(e) => {
                self.failed(&e, false).await?;
                Ok(None)
            }
        }
    }

    async fn failed(&mut self, e: &KafkaError, rediscover: bool) -> anyhow::Result<()> {
        self.failures += 1;
        if self.failures > MAX_FAILURES {
            bail!("group {}: {e} ({MAX_FAILURES} failed calls in a row)", self.args.group);
        }
        tracing::debug!(error = %e, "group call failed; retrying");
        if rediscover || e.code().is_none() {
            self.coordinator = None;
        }
        tokio::time::sleep(BACKOFF).await;
        Ok(())
    }

    /// One heartbeat (a leave with `leaving`); applies a new assignment. Returns whether what
    /// the member owns changed, which the coordinator must hear of at once.
    async fn heartbeat(&mut self, leaving: bool) -> anyhow::Result<bool> {
        loop {
            let mut req = ConsumerGroupHeartbeatRequest::default();
            req.group_id = GroupId(s(&self.args.group));
            req.member_id = s(&self.member_id);
            req.member_epoch = if leaving { -1 } else { self.epoch };
            if self.epoch == 0 && !leaving {
                req.rebalance_timeout_ms = REBALANCE_TIMEOUT_MS;
                req.subscribed_topic_names = Some(vec![TopicName(s(&self.args.topic))]);
            }
            if !leaving {
                let mut tp = TopicPartitions::default();
                tp.topic_id = self.topic_id;
                tp.partitions = self.owned.iter().copied().collect();
                req.topic_partitions = Some(vec![tp]);
            }
            let Some(r) = self.ask(&req, CONSUMER_GROUP_HEARTBEAT).await? else {
                continue;
            };
            let what = format!("group {}", self.args.group);
            if let Err(e) = check(r.error_code, r.error_message.as_ref(), &what) {
                let code = e.code().unwrap_or(ErrorCode::NONE);
                match group_plan::on_heartbeat_error(code) {
                    OnError::Retry { rediscover } => {
                        self.failed(&e, rediscover).await?;
                        continue;
                    }
                    OnError::Rejoin if !leaving => {
                        tracing::warn!(error = %e, "fenced from the group; joining again");
                        self.owned.clear();
                        self.positions.clear();
                        self.committed.clear();
                        self.epoch = 0;
                        continue;
                    }
                    OnError::Rejoin => return Ok(false),
                    OnError::Fail => bail!("{e}"),
                }
            }
            self.failures = 0;
            if leaving {
                return Ok(false);
            }
            if let Some(id) = &r.member_id {
                self.member_id = id.to_string();
            }
            self.epoch = r.member_epoch;
            self.interval_ms = group_plan::interval_ms(r.heartbeat_interval_ms);
            let Some(a) = r.assignment else { return Ok(false) };
            let pairs: Vec<(Uuid, Vec<i32>)> = a
                .topic_partitions
                .into_iter()
                .map(|t| (t.topic_id, t.partitions))
                .collect();
            let assigned = group_plan::partitions_of(&pairs, self.topic_id);
            let change = group_plan::diff(&self.owned, &assigned);
            if change.is_empty() {
                return Ok(false);
            }
            // What goes is committed first, so that its next owner starts where this one stopped.
            if let Err(e) = self.commit(&change.revoked).await {
                tracing::warn!(error = %e, "committing revoked partitions failed; their next owner may read some records again");
            }
            for p in &change.revoked {
                self.owned.remove(p);
                self.positions.remove(p);
                self.committed.remove(p);
            }
            self.start(&change.added).await?;
            return Ok(true);
        }
    }

    /// Commits the positions of `of` that moved, with the member's id and epoch.
    async fn commit(&mut self, of: &BTreeSet<i32>) -> anyhow::Result<()> {
        let offsets = group_plan::to_commit(&self.positions, &self.committed, of);
        if offsets.is_empty() {
            return Ok(());
        }
        let mut topic = OffsetCommitRequestTopic::default();
        topic.name = TopicName(s(&self.args.topic));
        topic.partitions = offsets
            .iter()
            .map(|(p, o)| {
                let mut x = OffsetCommitRequestPartition::default();
                x.partition_index = *p;
                x.committed_offset = *o;
                x.committed_leader_epoch = -1;
                x.committed_metadata = Some(StrBytes::default());
                x
            })
            .collect();
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(s(&self.args.group));
        req.generation_id_or_member_epoch = self.epoch;
        req.member_id = s(&self.member_id);
        req.topics = vec![topic];
        loop {
            let Some(r) = self.ask(&req, OFFSET_COMMIT).await? else {
                continue;
            };
            self.failures = 0;
            let mut retry = None;
            for t in &r.topics {
                for p in &t.partitions {
                    let what = format!("committing {}-{}", self.args.topic, p.partition_index);
                    match check(p.error_code, None, &what) {
                        Ok(()) => {
                            if let Some((_, o)) = offsets.iter().find(|(q, _)| *q == p.partition_index) {
                                self.committed.insert(p.partition_index, *o);
                            }
                        }
                        Err(e) => match group_plan::on_heartbeat_error(e.code().unwrap_or(ErrorCode::NONE)) {
                            OnError::Retry { rediscover } => retry = Some((e, rediscover)),
                            _ => bail!("{e}"),
                        },
                    }
                }
            }
            match retry {
                Some((e, rediscover)) => self.failed(&e, rediscover).await?,
                None => return Ok(()),
            }
        }
    }

    /// Starts reading `added`: at the group's committed offsets, else at the reset end.
    async fn start(&mut self, added: &BTreeSet<i32>) -> anyhow::Result<()> {
        if added.is_empty() {
            return Ok(());
        }
        let committed = self.fetch_committed(added).await?;
        for p in added {
            let c = committed.get(p).copied().unwrap_or(-1);
            let start = if c >= 0 {
                c
            } else {
                let probe = self.cluster.fetch(&self.args.topic, *p as u32, 0, 1, 0).await;
                let (earliest, latest) = match probe {
                    Ok(r) => (r.log_start_offset, r.high_watermark),
                    Err(e) => bail!("{}-{p}: {e}", self.args.topic),
                };
                group_plan::start_offset(c, self.args.from_beginning, earliest, latest)
            };
            self.owned.insert(*p);
            self.positions.insert(*p, start);
            if c >= 0 {
                self.committed.insert(*p, c);
            }
        }
        Ok(())
    }

    /// OffsetFetch for `of`: the committed offset of each, -1 for none.
    async fn fetch_committed(&mut self, of: &BTreeSet<i32>) -> anyhow::Result<BTreeMap<i32, i64>> {
        let mut topic = OffsetFetchRequestTopic::default();
        topic.name = TopicName(s(&self.args.topic));
        topic.partition_indexes = of.iter().copied().collect();
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(s(&self.args.group));
        req.topics = Some(vec![topic]);
        loop {
            let Some(r) = self.ask(&req, OFFSET_FETCH).await? else {
                continue;
            };
            let what = format!("offsets of group {}", self.args.group);
            if let Err(e) = check(r.error_code, None, &what) {
                match group_plan::on_heartbeat_error(e.code().unwrap_or(ErrorCode::NONE)) {
                    OnError::Retry { rediscover } => {
                        self.failed(&e, rediscover).await?;
                        continue;
                    }
                    _ => bail!("{e}"),
                }
            }
            self.failures = 0;
            let mut out = BTreeMap::new();
            for t in r.topics.iter().filter(|t| t.name.0.as_str() == self.args.topic) {
                for p in &t.partitions {
                    check(
                        p.error_code,
                        None,
                        &format!("offset of {}-{}", self.args.topic, p.partition_index),
                    )?;
                    out.insert(p.partition_index, p.committed_offset);
                }
            }
            return Ok(out);
        }
    }
}
