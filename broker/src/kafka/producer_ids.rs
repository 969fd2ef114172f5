//! InitProducerId for idempotent producers: each gets an id no other producer of the cluster
//! holds, at epoch 0, as Kafka answers a request with no transactional id (a producer that names
//! its old id after a fatal error gets a new one too). Ids come in blocks of
//! [`BLOCK`] taken from the metastore (`/cluster/producer_ids`) with a guarded write, so no two
//! brokers, whatever their ids, and no restart, hand out the same id. Transactions are not
//! served yet.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use metastore::Client;
use prost::Message;
use proto::errors::ErrorCode;
use proto::ferry::ProducerIdBlockRecord;
use proto::keys;
use proto::metastore as pb;

use super::apis::wire;

/// Ids per block: Kafka's `PRODUCER_ID_BLOCK_SIZE`.
pub const BLOCK: u64 = 1000;

/// The ids of the block in hand: `next..end`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    next: u64,
    end: u64,
}

impl Block {
    /// The block `start..start + BLOCK`.
    pub fn starting(start: u64) -> Self {
        Self {
            next: start,
            end: start + BLOCK,
        }
    }

    /// The next id, or `None` when the block is used up.
    pub fn take(&mut self) -> Option<i64> {
        if self.next >= self.end {
            return None;
        }
        let id = self.next;
        self.next += 1;
        i64::try_from(id).ok()
    }
}

/// Hands out producer ids from blocks of the cluster's.
pub struct ProducerIds {
    block: tokio::sync::Mutex<Block>,
    client: Client,
}

impl ProducerIds {
    /// Ids taken through `client`.
    pub fn new(client: Client) -> Self {
        Self {
            block: tokio::sync::Mutex::new(Block::default()),
            client,
        }
    }

    /// A new id, taking a new block when this one is used up.
    pub async fn allocate(&self) -> Result<i64, metastore::ClientError> {
        let mut block = self.block.lock().await;
        loop {
            if let Some(id) = block.take() {
                return Ok(id);
            }
            *block = Block::starting(take_block(&self.client).await?);
        }
    }
}

/// Takes the next block from the metastore: reads where the cluster is, writes it a block on,
/// guarded by the revision read, again if another broker took one first.
pub async fn take_block(client: &Client) -> Result<u64, metastore::ClientError> {
    loop {
        let kv = client.get(keys::PRODUCER_IDS).await?;
        let (start, rev) = match &kv {
            // An unreadable record is skipped past rather than reused: ids stay unique.
            Some(kv) => (
                ProducerIdBlockRecord::decode(kv.value.as_ref()).map_or(u64::MAX / 2, |r| r.next),
                kv.mod_revision,
            ),
            None => (0, 0),
        };
        let next = ProducerIdBlockRecord { next: start + BLOCK };
        let resp = client
            .txn(pb::TxnRequest {
                guards: vec![pb::Guard {
                    key: keys::PRODUCER_IDS.into(),
                    check: Some(pb::guard::Check::ModRevision(rev)),
                }],
                ops: vec![pb::Op {
                    op: Some(pb::op::Op::Put(pb::PutOp {
                        key: keys::PRODUCER_IDS.into(),
                        value: next.encode_to_vec().into(),
                        lease: 0,
                    })),
                }],
                request_id: String::new(),
            })
            .await?;
        if resp.succeeded {
            return Ok(start);
        }
    }
}

/// Answers InitProducerId: a new id at epoch 0.
pub async fn init_producer_id(ids: &ProducerIds, req: &InitProducerIdRequest) -> InitProducerIdResponse {
    let mut r = InitProducerIdResponse::default();
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    if req.transactional_id.is_some() {
        r.error_code = wire(ErrorCode::INVALID_REQUEST);
        return r;
    }
    match ids.allocate().await {
        Ok(id) => {
            r.producer_id = ProducerId(id);
            r.producer_epoch = 0;
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot take a producer id block");
            r.error_code = wire(ErrorCode::COORDINATOR_NOT_AVAILABLE);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_hands_out_its_ids_once_each_then_asks_for_another() {
        let mut b = Block::starting(2000);
        let ids: Vec<i64> = std::iter::from_fn(|| b.take()).collect();
        assert_eq!(ids.len(), BLOCK as usize);
        assert_eq!((ids[0], ids[999]), (2000, 2999));
        assert_eq!(b.take(), None);
        assert_eq!(Block::default().take(), None, "no block in hand: take one first");
    }
}
