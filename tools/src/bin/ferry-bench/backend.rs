//! The stores ferry-bench drives, behind one trait.

use std::future::Future;

use anyhow::bail;
use bytes::Bytes;
use metastore::Client;
use proto::metastore as pb;

/// What every store offers the workloads. One value per client connection.
pub trait Backend: Send + Sync + Sized + 'static {
    /// Connects client number `i` (spread over the members).
    fn connect(endpoints: &[String], i: usize) -> impl Future<Output = anyhow::Result<Self>> + Send;
    /// Writes one key.
    fn put(&self, key: &str, value: Bytes) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// Writes several keys atomically.
    fn put_all(&self, kvs: Vec<(String, Bytes)>) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// Reads one key linearizably.
    fn get(&self, key: &str) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// Creates the keys the workloads use, with `value`.
    fn preload(&self, keys: &[String], value: Bytes) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// Writes a Kafka-style reassignment of `n` partitions in one atomic request.
    fn write_reassignment(&self, n: usize, round: usize) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// Writes the keys with `value` in transactions of `per_txn` keys.
async fn preload_in_txns<B: Backend>(b: &B, keys: &[String], value: Bytes, per_txn: usize) -> anyhow::Result<()> {
    for chunk in keys.chunks(per_txn) {
        b.put_all(chunk.iter().map(|k| (k.clone(), value.clone())).collect())
            .await?;
    }
    Ok(())
}

/// The reassignment JSON a ZooKeeper-era controller keeps in one value.
fn reassignment_json(n: usize) -> Vec<u8> {
    let mut out = String::from("{\"version\":1,\"partitions\":[");
    for p in 0..n {
        if p > 0 {
            out.push(',');
        }
        out.push_str(std::str::from_utf8(&reassignment_value(p)).unwrap_or_default());
    }
    out.push_str("]}");
    out.into_bytes()
}

/// Ferry's metastore, through its client library.
pub struct FerryBackend {
    client: Client,
}

impl Backend for FerryBackend {
    async fn connect(endpoints: &[String], i: usize) -> anyhow::Result<Self> {
        Ok(Self {
            client: Client::new(endpoints)?.starting_at(i),
        })
    }

    async fn put(&self, key: &str, value: Bytes) -> anyhow::Result<()> {
        self.client.put(key, value).await?;
        Ok(())
    }

    async fn put_all(&self, kvs: Vec<(String, Bytes)>) -> anyhow::Result<()> {
        let ops = kvs
            .into_iter()
            .map(|(key, value)| pb::Op {
                op: Some(pb::op::Op::Put(pb::PutOp { key, value, lease: 0 })),
            })
            .collect();
        let r = self
            .client
            .txn(pb::TxnRequest {
                guards: vec![],
                ops,
                request_id: String::new(),
            })
            .await?;
        if !r.succeeded {
            bail!("transaction failed: {}", r.failed_reason);
        }
        Ok(())
    }

    async fn get(&self, key: &str) -> anyhow::Result<()> {
        self.client.get(key).await?;
        Ok(())
    }

    async fn preload(&self, keys: &[String], value: Bytes) -> anyhow::Result<()> {
        preload_in_txns(self, keys, value, 1000).await
    }

    async fn write_reassignment(&self, n: usize, round: usize) -> anyhow::Result<()> {
        // One key per partition, as the controller stores it.
        let kvs = (0..n)
            .map(|p| {
                (
                    format!("/bench/reassign/{round}/topic-{}/{p}", p / 1000),
                    reassignment_value(p),
                )
            })
            .collect();
        self.put_all(kvs).await
    }
}

/// ZooKeeper, through zookeeper-client.
pub struct ZkBackend {
    client: zookeeper_client::Client,
}

impl Backend for ZkBackend {
    async fn connect(endpoints: &[String], i: usize) -> anyhow::Result<Self> {
        let member = &endpoints[i % endpoints.len()];
        Ok(Self {
            client: zookeeper_client::Client::connect(member).await?,
        })
    }

    async fn put(&self, key: &str, value: Bytes) -> anyhow::Result<()> {
        self.client.set_data(key, &value, None).await?;
        Ok(())
    }

    async fn put_all(&self, kvs: Vec<(String, Bytes)>) -> anyhow::Result<()> {
        let mut w = self.client.new_multi_writer();
        for (k, v) in &kvs {
            w.add_set_data(k, v, None)?;
        }
        w.commit().await?;
        Ok(())
    }

    async fn get(&self, key: &str) -> anyhow::Result<()> {
        self.client.sync(key).await?;
        self.client.get_data(key).await?;
        Ok(())
    }

    async fn preload(&self, keys: &[String], value: Bytes) -> anyhow::Result<()> {
        let opts = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        for parent in ["/bench", "/admin"] {
            match self.client.create(parent, &[], &opts).await {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
                Err(e) => return Err(e.into()),
            }
        }
        for k in keys {
            match self.client.create(k, &value, &opts).await {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    async fn write_reassignment(&self, n: usize, _round: usize) -> anyhow::Result<()> {
        let path = "/admin/reassign_partitions";
        let data = reassignment_json(n);
        let opts = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        match self.client.set_data(path, &data, None).await {
            Ok(_) => Ok(()),
            Err(zookeeper_client::Error::NoNode) => {
                self.client.create(path, &data, &opts).await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// etcd, through etcd-client.
#[cfg(feature = "etcd")]
pub struct EtcdBackend {
    client: etcd_client::Client,
}

#[cfg(feature = "etcd")]
impl Backend for EtcdBackend {
    async fn connect(endpoints: &[String], i: usize) -> anyhow::Result<Self> {
        let member = endpoints[i % endpoints.len()].clone();
        Ok(Self {
            client: etcd_client::Client::connect([member], None).await?,
        })
    }

    async fn put(&self, key: &str, value: Bytes) -> anyhow::Result<()> {
        self.client.kv_client().put(key, value.to_vec(), None).await?;
        Ok(())
    }

    async fn put_all(&self, kvs: Vec<(String, Bytes)>) -> anyhow::Result<()> {
        let ops: Vec<etcd_client::TxnOp> = kvs
            .into_iter()
            .map(|(k, v)| etcd_client::TxnOp::put(k, v.to_vec(), None))
            .collect();
        self.client
            .kv_client()
            .txn(etcd_client::Txn::new().and_then(ops))
            .await?;
        Ok(())
    }

    async fn get(&self, key: &str) -> anyhow::Result<()> {
        self.client.kv_client().get(key, None).await?;
        Ok(())
    }

    async fn preload(&self, keys: &[String], value: Bytes) -> anyhow::Result<()> {
        // etcd refuses transactions of more than 128 operations by default.
        preload_in_txns(self, keys, value, 100).await
    }

    async fn write_reassignment(&self, n: usize, _round: usize) -> anyhow::Result<()> {
        self.client
            .kv_client()
            .put("/admin/reassign_partitions", reassignment_json(n), None)
            .await?;
        Ok(())
    }
}

/// A reassignment entry as Kafka's JSON has it, one per partition key.
fn reassignment_value(p: usize) -> Bytes {
    let r = |k: usize| (p + k) % 100;
    Bytes::from(format!(
        "{{\"topic\":\"topic-{t}\",\"partition\":{p},\"replicas\":[{},{},{}],\"original_replicas\":[{},{},{}]}}",
        r(1),
        r(2),
        r(3),
        r(0),
        r(1),
        r(2),
        t = p / 1000
    ))
}
