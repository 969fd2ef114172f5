//! A broker's registration: `/brokers/ids/<id>` under a lease, kept alive, and published again
//! when a log dir fails or its cordoned dirs change.

use std::sync::Arc;
use std::time::Duration;

use metastore::Client;
use prost::Message;
use proto::ferry::BrokerRegistration;
use proto::keys;
use proto::metastore as pb;
use tokio::sync::watch;

use crate::replica_manager::BrokerCore;

/// Keeps `/brokers/ids/<id>` present under a live lease. A previous registration of this id
/// (a broker that died and came back) is waited out, as ZooKeeper-based Kafka waits for the old
/// session to expire, so the controller sees the broker leave and return.
pub(crate) async fn register(
    core: Arc<BrokerCore>,
    client: Client,
    mut reg: BrokerRegistration,
    ttl_ms: u64,
    lease_tx: watch::Sender<u64>,
    stop: watch::Receiver<bool>,
) {
    let key = keys::broker(reg.id);
    let mut waited = false;
    let mut offline = core.offline_published.subscribe();
    let mut cordon = core.levels.cordon_changed.subscribe();
    while !*stop.borrow() {
        publish_offline(&core, &mut reg);
        let lease = match client.lease_grant(ttl_ms).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "broker registration: lease grant failed");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let txn = registration_txn(&key, &reg, lease);
        match client.txn(txn).await {
            Ok(r) if r.succeeded => {
                tracing::info!(broker = reg.id, lease, "registered");
                let _ = lease_tx.send(lease);
            }
            Ok(_) => {
                if !waited {
                    tracing::info!(
                        broker = reg.id,
                        "an earlier registration of this broker id is still live; waiting for it to expire"
                    );
                    waited = true;
                }
                let _ = client.lease_revoke(lease).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            // A broker starting beside its quorum has no cluster credential until the first
            // leader writes it: expected on a clean start, so said quietly.
            Err(e) if e.code() == tonic::Code::PermissionDenied => {
                tracing::debug!(error = %e, "broker registration waits for the cluster credential");
                let _ = client.lease_revoke(lease).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "broker registration failed");
                let _ = client.lease_revoke(lease).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        }
        let changed = Changed {
            offline: &mut offline,
            cordon: &mut cordon,
        };
        if keep_alive(&core, &client, &mut reg, lease, ttl_ms, changed, &stop).await {
            return;
        }
    }
}

/// A put of the registration under its lease, guarded on no other registration being live.
fn registration_txn(key: &str, reg: &BrokerRegistration, lease: u64) -> pb::TxnRequest {
    pb::TxnRequest {
        guards: vec![pb::Guard {
            key: key.to_string(),
            check: Some(pb::guard::Check::Absent(true)),
        }],
        ops: vec![pb::Op {
            op: Some(pb::op::Op::Put(pb::PutOp {
                key: key.to_string(),
                value: reg.encode_to_vec().into(),
                lease,
            })),
        }],
        request_id: String::new(),
    }
}

/// What republishes a registration: a dir gone offline, the cordoned dirs changed.
struct Changed<'a> {
    offline: &'a mut watch::Receiver<u64>,
    cordon: &'a mut watch::Receiver<u64>,
}

/// Keeps a registration's lease alive and republishes it when a dir goes offline or the
/// cordoned dirs change; returns
/// `true` when the broker stops, `false` when the lease was lost and the broker must register
/// again.
async fn keep_alive(
    core: &BrokerCore,
    client: &Client,
    reg: &mut BrokerRegistration,
    lease: u64,
    ttl_ms: u64,
    changed: Changed<'_>,
    stop: &watch::Receiver<bool>,
) -> bool {
    let key = keys::broker(reg.id);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ttl_ms / 4)) => {}
            Ok(()) = changed.offline.changed() => {
                publish_offline(core, reg);
                let put = client.put_with_lease(&key, reg.encode_to_vec(), lease).await;
                match put {
                    Ok(_) => tracing::warn!(broker = reg.id, offline = ?reg.offline_log_dirs, "published offline log dirs"),
                    Err(e) => tracing::warn!(error = %e, "publishing offline log dirs failed"),
                }
                continue;
            }
            Ok(()) = changed.cordon.changed() => {
                publish_offline(core, reg);
                let put = client.put_with_lease(&key, reg.encode_to_vec(), lease).await;
                match put {
                    Ok(_) => tracing::info!(broker = reg.id, cordoned = ?reg.cordoned_log_dirs, "published cordoned log dirs"),
                    Err(e) => tracing::warn!(error = %e, "publishing cordoned log dirs failed"),
                }
                continue;
            }
        }
        if *stop.borrow() {
            return true;
        }
        match client.lease_keep_alive(lease).await {
            Ok(_) => {}
            Err(e) if e.code() == tonic::Code::NotFound => {
                tracing::warn!(broker = reg.id, "registration lease expired; registering again");
                return false;
            }
            Err(e) => tracing::warn!(error = %e, "lease keep-alive failed"),
        }
    }
}

/// Puts the offline dirs and their replicas, and the cordoned dirs, into the registration.
fn publish_offline(core: &BrokerCore, reg: &mut BrokerRegistration) {
    reg.cordoned_log_dirs = core
        .dirs
        .cordoned()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    reg.offline_log_dirs = core
        .dirs
        .offline()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    reg.offline_replicas = core
        .offline_replicas
        .read()
        .iter()
        .map(|(topic, partition)| proto::ferry::TopicPartition {
            topic: topic.clone(),
            partition: *partition,
        })
        .collect();
}
