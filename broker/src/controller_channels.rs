//! Channels from a broker to the quorum nodes, for its requests to the controller.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use proto::ferry::admin_client::AdminClient;

/// Channels to the quorum nodes for the broker's requests to the controller (any node answers),
/// moving on to the next node after a failure.
#[derive(Clone)]
pub struct ControllerChannels {
    channels: Arc<Vec<tonic::transport::Channel>>,
    next: Arc<AtomicUsize>,
}

impl ControllerChannels {
    /// Channels to `quorum`; `None` when no address parses.
    pub fn new(quorum: &[String]) -> Option<Self> {
        let channels: Vec<_> = quorum
            .iter()
            .filter_map(|q| metastore::peers::channel(q).ok())
            .collect();
        (!channels.is_empty()).then(|| Self {
            channels: Arc::new(channels),
            next: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// A client of the node to ask next.
    pub fn admin(&self) -> AdminClient<tonic::transport::Channel> {
        AdminClient::new(self.channels[self.next.load(Ordering::Relaxed) % self.channels.len()].clone())
    }

    /// The last call failed: the next goes to another node.
    pub fn failed(&self) {
        self.next.fetch_add(1, Ordering::Relaxed);
    }
}
