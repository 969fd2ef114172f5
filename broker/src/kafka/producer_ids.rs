//! InitProducerId for idempotent producers: each gets an id no other producer of the cluster
//! holds, at epoch 0. Transactions are not served yet.

use std::sync::atomic::{AtomicI64, Ordering};

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use proto::errors::ErrorCode;

use super::apis::wire;

/// Hands out producer ids: the broker id in the top bits, then the wall-clock millisecond the
/// listener started, then a counter. Ids stay unique across brokers, and across restarts of
/// one broker unless it handed out more than 256 ids per millisecond of its previous run.
#[derive(Debug)]
pub struct ProducerIds {
    next: AtomicI64,
}

impl ProducerIds {
    /// Ids for broker `broker_id`, starting now (`wall_ms`).
    pub fn new(broker_id: i32, wall_ms: u64) -> Self {
        let broker = i64::from(broker_id) & 0x3ff;
        let ms = (wall_ms as i64) & ((1 << 44) - 1);
        Self {
            next: AtomicI64::new((broker << 52) | (ms << 8)),
        }
    }

    fn allocate(&self) -> i64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

/// Answers InitProducerId: a new id at epoch 0, or, for a producer that names its id and epoch
/// (KIP-360, after a fatal sequence error), the same id at the next epoch.
pub fn init_producer_id(ids: &ProducerIds, req: &InitProducerIdRequest) -> InitProducerIdResponse {
    let mut r = InitProducerIdResponse::default();
    if req.transactional_id.is_some() {
        r.error_code = wire(ErrorCode::INVALID_REQUEST);
        r.producer_id = ProducerId(-1);
        r.producer_epoch = -1;
        return r;
    }
    if req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX {
        r.producer_id = req.producer_id;
        r.producer_epoch = req.producer_epoch + 1;
    } else {
        r.producer_id = ProducerId(ids.allocate());
        r.producer_epoch = 0;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_differ_across_brokers_calls_and_restarts_and_an_epoch_bump_keeps_the_id() {
        let a = ProducerIds::new(1, 1_700_000_000_000);
        let b = ProducerIds::new(2, 1_700_000_000_000);
        let later = ProducerIds::new(1, 1_700_000_000_001);
        let (a1, a2, b1, l1) = (a.allocate(), a.allocate(), b.allocate(), later.allocate());
        assert!(a1 >= 0 && a1 != a2 && a1 != b1 && a2 < l1, "{a1} {a2} {b1} {l1}");
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = None;
        req.producer_id = ProducerId(-1);
        req.producer_epoch = -1;
        let first = init_producer_id(&a, &req);
        assert_eq!((first.error_code, first.producer_epoch), (0, 0));
        req.producer_id = first.producer_id;
        req.producer_epoch = 0;
        let bumped = init_producer_id(&a, &req);
        assert_eq!((bumped.producer_id, bumped.producer_epoch), (first.producer_id, 1));
        req.transactional_id = Some(kafka_protocol::messages::TransactionalId(
            kafka_protocol::protocol::StrBytes::from_static_str("tx"),
        ));
        assert_eq!(init_producer_id(&a, &req).error_code, wire(ErrorCode::INVALID_REQUEST));
    }
}
