//! Consumer groups are not served yet. FindCoordinator is answered, so that a client asking for
//! a group coordinator gets a clear, final error instead of retrying forever (and so that
//! librdkafka, which reads FindCoordinator's presence as a sign of a broker new enough for lz4,
//! keeps lz4 on).

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use proto::errors::ErrorCode;

use super::apis::wire;

/// Why no coordinator is named.
const NOT_SERVED: &str = "consumer groups and transactions are not served by Ferry yet: \
                          assign partitions to the consumer instead of subscribing with a group";

/// Answers FindCoordinator with INVALID_REQUEST, which clients do not retry, for every key.
pub fn find_coordinator(req: FindCoordinatorRequest, version: i16) -> FindCoordinatorResponse {
    let mut r = FindCoordinatorResponse::default();
    let code = wire(ErrorCode::INVALID_REQUEST);
    if version >= 4 {
        r.coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let mut c = Coordinator::default();
                c.key = key;
                c.node_id = BrokerId(-1);
                c.port = -1;
                c.error_code = code;
                c.error_message = Some(StrBytes::from_static_str(NOT_SERVED));
                c
            })
            .collect();
    } else {
        r.error_code = code;
        r.node_id = BrokerId(-1);
        r.port = -1;
        if version >= 1 {
            r.error_message = Some(StrBytes::from_static_str(NOT_SERVED));
        }
    }
    r
}
