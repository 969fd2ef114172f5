//! Every node serves the standard gRPC health service and server reflection.

use tests::Cluster;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::ServerReflectionRequest;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_reflection_are_served() {
    let c = Cluster::start(3).await;
    for addr in &c.addrs {
        let channel = metastore::peers::channel(addr).unwrap();
        let mut health = HealthClient::new(channel.clone());
        let status = health
            .check(HealthCheckRequest {
                service: "ferry.metastore.v1.Metastore".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32);

        let mut reflection = ServerReflectionClient::new(channel);
        let req = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut stream = reflection
            .server_reflection_info(futures::stream::iter(vec![req]))
            .await
            .unwrap()
            .into_inner();
        let resp = stream.message().await.unwrap().unwrap();
        let Some(MessageResponse::ListServicesResponse(list)) = resp.message_response else {
            panic!("unexpected reflection answer {resp:?}");
        };
        let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
        for want in ["ferry.metastore.v1.Metastore", "ferry.raft.v1.Raft"] {
            assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
        }
    }
    c.shutdown().await;
}
