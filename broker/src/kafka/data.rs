//! The data APIs of the Kafka listener: Produce, Fetch, ListOffsets and OffsetForLeaderEpoch.
//! Produce goes through the one produce path (`crate::produce`); Fetch serves the stored batch
//! bytes as they are on disk, without decoding them.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use proto::cluster_view::ClusterView;
use proto::errors::ErrorCode;
use uuid::Uuid;

use super::apis::wire;
use crate::replica::{Replica, ReplicaError};
use crate::replica_manager::BrokerCore;
use crate::{fetch, produce};

/// A partition index from the wire: negative ones do not exist.
fn replica(core: &BrokerCore, topic: &str, partition: i32) -> Result<Arc<Replica>, ReplicaError> {
    let p = u32::try_from(partition).map_err(|_| {
        ReplicaError::new(
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            format!("{topic}-{partition}: no such partition"),
        )
    })?;
    core.replica(topic, p)
}

/// The replica, if this broker leads it at the epoch the client knows (-1: any).
fn led(core: &BrokerCore, topic: &str, partition: i32, client_epoch: i32) -> Result<(Arc<Replica>, u32), ReplicaError> {
    let r = replica(core, topic, partition)?;
    let epoch = r.leader_epoch()?;
    if client_epoch >= 0 {
        let client = client_epoch as u32;
        if client < epoch {
            return Err(ReplicaError::new(
                ErrorCode::FENCED_LEADER_EPOCH,
                format!("{}: leader epoch {client} is older than {epoch}", r.name()),
            ));
        }
        if client > epoch {
            return Err(ReplicaError::new(
                ErrorCode::UNKNOWN_LEADER_EPOCH,
                format!("{}: leader epoch {client} is newer than {epoch}", r.name()),
            ));
        }
    }
    Ok((r, epoch))
}

fn message(e: &ReplicaError) -> Option<StrBytes> {
    Some(StrBytes::from_string(e.message.clone()))
}

/// Answers a Produce request; `None` for acks 0, which Kafka does not answer.
pub async fn produce(core: &BrokerCore, req: ProduceRequest, version: i16) -> Option<ProduceResponse> {
    let acks = i32::from(req.acks);
    let timeout = u32::try_from(req.timeout_ms).unwrap_or(0);
    // Every partition is appended, then all wait for their in-sync replicas together.
    let topics = req.topic_data.into_iter().map(|t| async move {
        let name = t.name.0.to_string();
        let parts = t.partition_data.into_iter().map(|p| {
            let name = name.clone();
            async move {
                let mut out = PartitionProduceResponse::default();
                out.index = p.index;
                out.log_append_time_ms = -1;
                match produce_partition(core, &name, p.index, p.records, acks, timeout).await {
                    Ok((base, start)) => {
                        out.base_offset = base;
                        // Fields a version lacks must keep their defaults, or encoding fails.
                        if version >= 5 {
                            out.log_start_offset = start;
                        }
                    }
                    Err(e) => {
                        out.error_code = wire(e.code);
                        if version >= 8 {
                            out.error_message = message(&e);
                        }
                        out.base_offset = -1;
                    }
                }
                out
            }
        });
        let mut t_out = TopicProduceResponse::default();
        t_out.name = t.name;
        t_out.partition_responses = futures::future::join_all(parts).await;
        t_out
    });
    let responses = futures::future::join_all(topics).await;
    if acks == 0 {
        return None;
    }
    let mut r = ProduceResponse::default();
    r.responses = responses;
    Some(r)
}

async fn produce_partition(
    core: &BrokerCore,
    topic: &str,
    partition: i32,
    records: Option<Bytes>,
    acks: i32,
    timeout: u32,
) -> Result<(i64, i64), ReplicaError> {
    produce::check_acks(acks)?;
    let r = replica(core, topic, partition)?;
    let records = records.unwrap_or_default();
    produce::check_produced(&r.name(), &records)?;
    let base = produce::append(core, &r, records.to_vec(), acks, timeout).await?;
    let start = r.log().log_start_offset();
    Ok((base, start))
}

/// Bytes a Fetch answer carries when the request names no limit.
const DEFAULT_FETCH_MAX_BYTES: usize = 50 << 20;

/// One partition's part of a Fetch.
struct Wanted {
    topic: usize,
    partition: i32,
    offset: i64,
    max_bytes: usize,
    epoch: i32,
}

/// A topic a Fetch names: its name (`None`: an id no topic has) and its id (nil before v13).
pub(super) type FetchedTopic = (Option<TopicName>, Uuid);

/// The topics a Fetch names, in its order: by name up to v12, by id from v13 (topic ids came
/// with v13), each id looked up among the topics of `view` that are not being deleted.
pub(super) fn fetch_topics(view: &ClusterView, topics: &[FetchTopic], version: i16) -> Vec<FetchedTopic> {
    if version < 13 {
        return topics.iter().map(|t| (Some(t.topic.clone()), Uuid::nil())).collect();
    }
    let wanted: HashSet<Uuid> = topics.iter().map(|t| t.topic_id).collect();
    let mut names: HashMap<Uuid, &str> = HashMap::with_capacity(wanted.len());
    for (name, e) in &view.topics {
        let id = e
            .record
            .as_ref()
            .filter(|r| !r.deleting)
            .and_then(|r| Uuid::from_str(&r.topic_id).ok());
        if let Some(id) = id.filter(|id| wanted.contains(id)) {
            names.insert(id, name);
        }
    }
    topics
        .iter()
        .map(|t| {
            let name = names
                .get(&t.topic_id)
                .map(|n| TopicName(StrBytes::from_string(n.to_string())));
            (name, t.topic_id)
        })
        .collect()
}

/// Answers a Fetch request through the fetch engine: waits up to its `max_wait_ms` for
/// `min_bytes` of data over every partition asked, and serves the stored batches up to the
/// high watermark (the last stable offset for `read_committed`, the same without transactions).
pub async fn fetch(core: &BrokerCore, req: FetchRequest, version: i16) -> FetchResponse {
    let names = fetch_topics(&core.view.read(), &req.topics, version);
    let wanted: Vec<Wanted> = req
        .topics
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            t.partitions.iter().map(move |p| Wanted {
                topic: i,
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
                epoch: p.current_leader_epoch,
            })
        })
        .collect();
    let limits = fetch::Limits::of_request(
        req.min_bytes.into(),
        req.max_bytes.into(),
        req.max_wait_ms.into(),
        DEFAULT_FETCH_MAX_BYTES,
    );
    let asked = KafkaFetch {
        core,
        names: &names,
        wanted,
        isolation: fetch::Isolation::of_consumer(req.isolation_level),
        level: req.isolation_level,
        version,
    };
    let parts = fetch::long_poll(&asked, &limits).await;
    let topics = asked.wanted.iter().map(|w| w.topic);
    answer(&names, topics.zip(parts).collect(), version)
}

/// A Kafka Fetch's partitions, as the fetch engine reads them.
struct KafkaFetch<'a> {
    core: &'a BrokerCore,
    names: &'a [FetchedTopic],
    wanted: Vec<Wanted>,
    /// `None`: the request's isolation level is neither of Kafka's two.
    isolation: Option<fetch::Isolation>,
    level: i8,
    version: i16,
}

impl KafkaFetch<'_> {
    /// One partition's high watermark, log start and batches, from its leader at the epoch the
    /// client knows.
    fn read_partition(&self, w: &Wanted, limit: fetch::ReadLimit) -> Result<fetch::LogRead, ReplicaError> {
        let isolation = self.isolation.ok_or_else(|| {
            ReplicaError::new(
                ErrorCode::INVALID_REQUEST,
                format!(
                    "isolation_level: {} is neither 0 (read_uncommitted) nor 1 (read_committed)",
                    self.level
                ),
            )
        })?;
        let name = match &self.names[w.topic] {
            (Some(name), _) => name,
            (None, id) => {
                return Err(ReplicaError::new(
                    ErrorCode::UNKNOWN_TOPIC_ID,
                    format!("topic id {id}: no such topic"),
                ))
            }
        };
        let (r, _) = led(self.core, &name.0, w.partition, w.epoch)?;
        fetch::read_log(self.core, &r, w.offset, isolation, limit)
    }
}

impl fetch::Partitions for KafkaFetch<'_> {
    type Part = PartitionData;

    fn count(&self) -> usize {
        self.wanted.len()
    }

    fn max_bytes(&self, i: usize) -> usize {
        self.wanted[i].max_bytes
    }

    fn replica(&self, i: usize) -> Option<Arc<Replica>> {
        let w = &self.wanted[i];
        replica(self.core, &self.names[w.topic].0.as_ref()?.0, w.partition).ok()
    }

    fn read(&self, i: usize, limit: fetch::ReadLimit) -> (PartitionData, fetch::Found) {
        let w = &self.wanted[i];
        let mut p = PartitionData::default();
        p.partition_index = w.partition;
        if self.version >= 11 {
            p.preferred_read_replica = BrokerId(-1);
        }
        // librdkafka refuses a null record set, so an empty one is empty bytes.
        p.records = Some(Bytes::new());
        match self.read_partition(w, limit) {
            Ok(read) => {
                let found = read.found();
                p.high_watermark = read.high_watermark;
                p.last_stable_offset = read.high_watermark;
                if self.version >= 5 {
                    p.log_start_offset = read.log_start;
                }
                p.records = Some(read.batches);
                (p, found)
            }
            Err(e) => {
                p.error_code = wire(e.code);
                p.high_watermark = -1;
                p.last_stable_offset = -1;
                (p, fetch::Found::Error)
            }
        }
    }
}

fn answer(names: &[FetchedTopic], parts: Vec<(usize, PartitionData)>, version: i16) -> FetchResponse {
    let mut topics: Vec<FetchableTopicResponse> = names
        .iter()
        .map(|(name, id)| {
            let mut t = FetchableTopicResponse::default();
            // Each version carries one of the two; the other must keep its default.
            if version >= 13 {
                t.topic_id = *id;
            } else {
                t.topic = name.clone().unwrap_or_default();
            }
            t
        })
        .collect();
    for (i, p) in parts {
        topics[i].partitions.push(p);
    }
    let mut r = FetchResponse::default();
    r.responses = topics;
    r
}

/// ListOffsets' special timestamps: the latest and earliest offsets, the record with the largest
/// timestamp (v7), the earliest offset on local disk (v8) and the latest one in tiered storage
/// (v9).
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// Answers ListOffsets: the latest offset is the high watermark, the earliest the log start
/// (all of it is local: there is no tiered storage, so the latest tiered offset is -1, as Kafka
/// answers without it), the largest timestamp its first record below the high watermark, and a
/// timestamp finds the first batch at or after it.
pub fn list_offsets(core: &BrokerCore, req: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let mut resp = ListOffsetsResponse::default();
    resp.topics = req
        .topics
        .into_iter()
        .map(|t| {
            let mut out = ListOffsetsTopicResponse::default();
            out.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut o = ListOffsetsPartitionResponse::default();
                    o.partition_index = p.partition_index;
                    match list_offset(core, &t.name.0, p.partition_index, p.current_leader_epoch, p.timestamp) {
                        Ok((offset, timestamp, epoch)) => {
                            o.offset = offset;
                            o.timestamp = timestamp;
                            if version >= 4 {
                                o.leader_epoch = epoch;
                            }
                        }
                        Err(e) => {
                            o.error_code = wire(e.code);
                            o.offset = -1;
                            o.timestamp = -1;
                        }
                    }
                    o
                })
                .collect();
            out.name = t.name;
            out
        })
        .collect();
    resp
}

fn list_offset(
    core: &BrokerCore,
    topic: &str,
    partition: i32,
    client_epoch: i32,
    timestamp: i64,
) -> Result<(i64, i64, i32), ReplicaError> {
    let (r, epoch) = led(core, topic, partition, client_epoch)?;
    // As Kafka: while a new leader has not learnt its high watermark, the latest offset, and a
    // time found at or past it, are not answered yet.
    let known = r.known_high_watermark();
    let hw = r.state().high_watermark;
    let log = r.log();
    let epoch = epoch as i32;
    match timestamp {
        LATEST => Ok((known?, -1, epoch)),
        EARLIEST | EARLIEST_LOCAL => Ok((log.log_start_offset(), -1, epoch)),
        LATEST_TIERED => Ok((-1, -1, -1)),
        MAX_TIMESTAMP => match log
            .max_timestamp_before(hw)
            .map_err(|e| produce::storage_error(core, &r, e))?
        {
            Some((offset, ts)) => Ok((offset, ts, epoch)),
            None => Ok((-1, -1, -1)),
        },
        t if t >= 0 => match log
            .offset_for_timestamp(t)
            .map_err(|e| produce::storage_error(core, &r, e))?
        {
            Some((offset, ts)) if offset < hw => Ok((offset, ts, epoch)),
            _ => known.map(|_| (-1, -1, -1)),
        },
        t => Err(ReplicaError::new(
            ErrorCode::INVALID_REQUEST,
            format!("{}: timestamp {t} is not served (only -1 to -5 or a time)", r.name()),
        )),
    }
}

/// Answers OffsetForLeaderEpoch: where each asked epoch ended in this leader's log, or -1 and
/// -1 when the log holds nothing of it.
pub fn offset_for_leader_epoch(core: &BrokerCore, req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse {
    let mut resp = OffsetForLeaderEpochResponse::default();
    resp.topics = req
        .topics
        .into_iter()
        .map(|t| {
            let mut out = OffsetForLeaderTopicResult::default();
            out.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut o = EpochEndOffset::default();
                    o.partition = p.partition;
                    let found = led(core, &t.topic.0, p.partition, p.current_leader_epoch).map(|(r, _)| {
                        u32::try_from(p.leader_epoch)
                            .ok()
                            .and_then(|e| r.log().end_offset_for_epoch(e))
                    });
                    match found {
                        Ok(Some((epoch, end))) => {
                            o.leader_epoch = epoch as i32;
                            o.end_offset = end;
                        }
                        Ok(None) => {
                            o.leader_epoch = -1;
                            o.end_offset = -1;
                        }
                        Err(e) => {
                            o.error_code = wire(e.code);
                            o.leader_epoch = -1;
                            o.end_offset = -1;
                        }
                    }
                    o
                })
                .collect();
            out.topic = t.topic;
            out
        })
        .collect();
    resp
}
