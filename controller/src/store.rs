//! The metastore reads and writes every controller module shares: the cluster view, guarded
//! transactions and their parts. A leaf: it uses no other module of this crate, so the admin
//! service and the modules it calls can all use it without import cycles.

use metastore::Client;
use prost::Message;
use proto::cluster_view::ClusterView;
use proto::keys;
use proto::metastore as pb;

/// Reads everything under `/brokers/` linearizably.
pub async fn load_view(client: &Client) -> Result<ClusterView, metastore::ClientError> {
    let resp = client
        .range_req(pb::RangeRequest {
            prefix: "/brokers/".into(),
            ..Default::default()
        })
        .await?;
    Ok(view_of(vec![resp.kvs]).await)
}

/// A view of read keys, built off the runtime (a whole cluster's keys take a while to decode).
async fn view_of(reads: Vec<Vec<pb::KeyValue>>) -> ClusterView {
    crate::off_runtime(move || {
        let mut view = ClusterView::default();
        view.apply_all(
            true,
            reads
                .iter()
                .flatten()
                .map(|kv| (kv.key.as_str(), Some(kv.value.as_ref()), kv.mod_revision)),
        );
        view
    })
    .await
}

/// Reads one partition and the broker registrations: the view an ISR change or a dir report
/// needs, small enough to read for each of them.
pub async fn load_partition_view(client: &Client, topic: &str, p: u32) -> Result<ClusterView, metastore::ClientError> {
    let key = keys::partition(topic, p);
    let mut view = ClusterView::default();
    if let Some(kv) = client.get(&key).await? {
        view.apply(&key, Some(kv.value.as_ref()), kv.mod_revision);
    }
    apply_kvs(&mut view, &client.range_req(brokers_range()).await?.kvs);
    Ok(view)
}

/// A view of the broker registrations only (which brokers are up), read at once.
pub async fn load_brokers_view(client: &Client) -> Result<ClusterView, metastore::ClientError> {
    let mut view = ClusterView::default();
    apply_kvs(&mut view, &client.range_req(brokers_range()).await?.kvs);
    Ok(view)
}

/// The read of every broker registration.
fn brokers_range() -> pb::RangeRequest {
    pb::RangeRequest {
        prefix: keys::BROKER_IDS.into(),
        ..Default::default()
    }
}

/// Applies read keys to `view`.
pub fn apply_kvs<'a>(view: &mut ClusterView, kvs: impl IntoIterator<Item = &'a pb::KeyValue>) {
    for kv in kvs {
        view.apply(&kv.key, Some(kv.value.as_ref()), kv.mod_revision);
    }
}

/// Most topics read one by one; a request naming more reads the whole view at once.
const TOPICS_READ_ALONE: usize = 32;

/// `topics` when few enough to read one by one ([`TOPICS_READ_ALONE`]); `None` when the whole
/// cluster is read instead. Every reader of a request's topics decides by this, so that its
/// reads cover the same topics.
pub fn read_alone(topics: &[String]) -> Option<&[String]> {
    (topics.len() <= TOPICS_READ_ALONE).then_some(topics)
}

/// How much of each topic [`load_topics_view`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicDepth {
    /// Its record and first partition key (a topic whose record is gone while its partitions
    /// are not still exists): what a new topic is planned on.
    FirstPartition,
    /// Its record and every partition: what moves of its partitions are planned on.
    AllPartitions,
}

/// The brokers and, of each topic in `topics`, what `depth` names; not the rest of the cluster,
/// which a large cluster's requests waited for. Many topics read the whole view instead
/// ([`read_alone`]).
pub async fn load_topics_view(
    client: &Client,
    topics: &[String],
    depth: TopicDepth,
) -> Result<ClusterView, metastore::ClientError> {
    let Some(topics) = read_alone(topics) else {
        return load_view(client).await;
    };
    let limit = match depth {
        TopicDepth::FirstPartition => 1,
        TopicDepth::AllPartitions => 0,
    };
    let brokers = client.range_req(brokers_range());
    let named = futures::future::try_join_all(topics.iter().map(|t| async move {
        let children = pb::RangeRequest {
            prefix: keys::topic_children(t),
            limit,
            ..Default::default()
        };
        let record = keys::topic(t);
        tokio::try_join!(client.get(&record), client.range_req(children))
    }));
    let (brokers, named) = tokio::try_join!(brokers, named)?;
    let mut reads = vec![brokers.kvs];
    for (record, children) in named {
        reads.push(record.into_iter().chain(children.kvs).collect());
    }
    Ok(view_of(reads).await)
}

/// A put of a protobuf value.
pub fn put_op(key: String, value: &impl Message) -> pb::Op {
    pb::Op {
        op: Some(pb::op::Op::Put(pb::PutOp {
            key,
            value: value.encode_to_vec().into(),
            lease: 0,
        })),
    }
}

/// A guard that the key is still at `rev` (0: still absent).
pub fn at_revision(key: String, rev: u64) -> pb::Guard {
    pb::Guard {
        key,
        check: Some(pb::guard::Check::ModRevision(rev)),
    }
}

/// Writes a transaction; `Ok(false)` when a guard failed (someone changed the metadata first).
/// Writers go through the write runner (`write_runner::Runner`), which calls this.
pub async fn write(client: &Client, guards: Vec<pb::Guard>, ops: Vec<pb::Op>) -> Result<bool, metastore::ClientError> {
    let resp = client
        .txn(pb::TxnRequest {
            guards,
            ops,
            request_id: String::new(),
        })
        .await?;
    Ok(resp.succeeded)
}
