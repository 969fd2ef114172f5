//! The brokers' log dirs seen from the admin service: DescribeLogDirs of many brokers at once
//! (for `Admin.DescribeLogDirs` and the reassignment progress).

use std::time::Duration;

use proto::cluster_view::ClusterView;
use proto::errors::ErrorCode;
use proto::ferry::broker_client::BrokerClient;
use proto::ferry::{BrokerLogDirs, DescribeLogDirsRequest};

/// DescribeLogDirs of `brokers` (every registered one when empty), asked at once; a broker that is
/// not registered or does not answer within 5 s gets BROKER_NOT_AVAILABLE and why.
pub async fn describe_log_dirs(
    view: &ClusterView,
    channels: &metastore::peers::Peers,
    brokers: &[i32],
    topics: &[String],
) -> Vec<BrokerLogDirs> {
    let wanted: Vec<i32> = if brokers.is_empty() {
        view.brokers.keys().copied().collect()
    } else {
        brokers.to_vec()
    };
    let calls = wanted.into_iter().map(|b| {
        let endpoint = view.brokers.get(&b).map(|r| r.endpoint.clone());
        let topics = topics.to_vec();
        async move {
            let failed = |why: String| BrokerLogDirs {
                broker: b,
                error_code: ErrorCode::BROKER_NOT_AVAILABLE.0,
                error_message: format!("broker {b}: {why}"),
                log_dirs: None,
            };
            let Some(endpoint) = endpoint else {
                return failed("not a registered broker".into());
            };
            let channel = match channels.channel(&endpoint) {
                Ok(c) => c,
                Err(e) => return failed(e.to_string()),
            };
            // The cluster credential: a broker under an authorizer admits only it, or a user
            // allowed DESCRIBE on the cluster, which the admin service checked.
            let mut c =
                BrokerClient::with_interceptor(channel, channels.credential()).max_decoding_message_size(1 << 30);
            let call = c.describe_log_dirs(DescribeLogDirsRequest { topics });
            match tokio::time::timeout(Duration::from_secs(5), call).await {
                Ok(Ok(r)) => BrokerLogDirs {
                    broker: b,
                    log_dirs: Some(r.into_inner()),
                    ..Default::default()
                },
                Ok(Err(e)) => failed(e.message().to_string()),
                Err(_) => failed("no answer within 5 s".into()),
            }
        }
    });
    futures::future::join_all(calls).await
}
