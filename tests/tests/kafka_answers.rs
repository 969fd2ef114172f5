//! Kafka's clients get Kafka's answers. The cluster's id, as they read it: a new cluster gets one when it first forms
//! (`/cluster/id`, 16 random bytes in Kafka's text form), Metadata and DescribeCluster answer
//! it, librdkafka's `describe_cluster()` reads it (it crashed the Python process when Metadata
//! carried none), and `kafka-cluster cluster-id` prints it. `kafka-features describe` prints
//! the features Ferry finalizes.

use std::process::Command;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_read_the_cluster_id_the_metastore_holds_and_the_finalized_features() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let meta = four.meta.clone();
    tests::wait_until(Duration::from_secs(30), "the cluster id written", || {
        let meta = meta.clone();
        async move { meta.get(proto::keys::CLUSTER_ID).await.is_ok_and(|kv| kv.is_some()) }
    })
    .await;
    let kv = four.meta.get(proto::keys::CLUSTER_ID).await.unwrap().unwrap();
    let id = <proto::ferry::ClusterIdRecord as prost::Message>::decode(kv.value.as_ref())
        .unwrap()
        .id;
    assert_eq!(id.len(), 22, "Kafka's text form of 16 bytes: {id}");
    assert!(proto::kafka_uuid::decode(&id).is_some(), "{id}");
    let script = format!(
        "from confluent_kafka.admin import AdminClient\n\
         a = AdminClient({{'bootstrap.servers': '{}'}})\n\
         d = a.describe_cluster().result(timeout=30)\n\
         print(d.cluster_id, len(d.nodes))\n",
        k.bootstrap()
    );
    // Brokers read the id once it is written; until then they name none, so ask until they do.
    let mut last = String::new();
    for _ in 0..60 {
        let out = Command::new("timeout")
            .args(["60", "python3", "-c", &script])
            .output()
            .unwrap();
        assert!(
            out.status.code().is_some(),
            "the client process died of a signal: {out:?}"
        );
        last = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if last == format!("{id} 4") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(last, format!("{id} 4"));
    let (ok, out) = tests::kafka::tool(
        "kafka-cluster",
        &["cluster-id", "--bootstrap-server", &k.bootstrap()],
        "",
    );
    assert!(ok && out.contains(&format!("Cluster ID: {id}")), "{out}");
}

/// CreateTopics with a 100,000-character name is refused by Kafka's rule, with
/// INVALID_TOPIC_EXCEPTION (17), as Kafka refuses it; it once timed out on the metastore's key
/// limit instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_topic_name_gets_invalid_topic_exception() {
    let dir = tempfile::tempdir().unwrap();
    let (_four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let script = format!(
        "from kafka.admin import KafkaAdminClient, NewTopic\n\
         from kafka.errors import InvalidTopicError\n\
         a = KafkaAdminClient(bootstrap_servers='{}')\n\
         try:\n    a.create_topics([NewTopic('x' * 100000, 1, 1)])\n    print('created')\n\
         except InvalidTopicError as e:\n    print('invalid', 'maximum is 249' in str(e))\n",
        k.bootstrap()
    );
    let out = Command::new("timeout")
        .args(["60", "python3", "-c", &script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.trim(),
        "invalid True",
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Producer ids come in blocks of the cluster's, taken with a guarded write: two brokers (ids 1
/// and 1025 handed out the same ids when an id held the broker id's low 10 bits) taking ids at
/// once never hand out the same one, and a broker started again does not reuse its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_ids_are_unique_across_brokers_and_restarts() {
    use broker::kafka::producer_ids::ProducerIds;
    let cluster = tests::Cluster::start(3).await;
    let client = cluster.trusted_client().await;
    let (one, other) = (ProducerIds::new(client.clone()), ProducerIds::new(client.clone()));
    let take = |ids: ProducerIds| async move {
        let mut out = Vec::new();
        for _ in 0..2500 {
            out.push(ids.allocate().await.unwrap());
        }
        out
    };
    let (a, b) = tokio::join!(take(one), take(other));
    // Broker 1 starts again: a fresh allocator, as after a restart.
    let again = take(ProducerIds::new(client.clone())).await;
    let mut all: Vec<i64> = a.into_iter().chain(b).chain(again).collect();
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "every id handed out once");
    assert!(all[0] >= 0);
    cluster.shutdown().await;
}
