//! Leader hints: every answer from a node that does not lead names the leader's address in a
//! response header ([`proto::LEADER_HINT`]), so that a client sends its next requests there and a
//! large request crosses the network once instead of being forwarded (Kafka's clients learn the
//! controller from metadata answers the same way).

use tonic::body::Body;
use tower::util::MapResponseLayer;

use crate::types::{NodeId, Raft};

type HttpResponse = http::Response<Body>;

/// The leader's address when another node leads, as a header value.
fn hint(
    raft_metrics: &tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, crate::types::Node>>,
    id: NodeId,
) -> Option<http::HeaderValue> {
    let m = raft_metrics.borrow();
    let leader = m.current_leader.filter(|l| *l != id)?;
    let node = m.membership_config.membership().get_node(&leader)?;
    http::HeaderValue::from_str(&node.addr).ok()
}

/// A server layer adding the hint to every answer of node `id` while another node leads.
pub fn layer(raft: &Raft, id: NodeId) -> MapResponseLayer<impl Fn(HttpResponse) -> HttpResponse + Clone> {
    let metrics = raft.metrics();
    MapResponseLayer::new(move |mut r: HttpResponse| {
        if let Some(v) = hint(&metrics, id) {
            r.headers_mut().insert(proto::LEADER_HINT, v);
        }
        r
    })
}
