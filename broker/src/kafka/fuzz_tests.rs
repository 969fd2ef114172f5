//! Random and mutated input for the decoders that read untrusted bytes: the record batch
//! checks and the Kafka request path (the walk, then the protocol crate's decoders). A bounded
//! number of cases runs with every test run (so in CI), and none may panic.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, FetchRequest, MetadataRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use proptest::prelude::*;

use crate::kafka::{schemas::schema, walk::walk};
use crate::record_batch;

fn produce_frame(version: i16, records: Vec<u8>) -> Vec<u8> {
    let mut p = PartitionProduceData::default();
    p.records = Some(Bytes::from(records));
    let mut t = TopicProduceData::default();
    t.name = TopicName(StrBytes::from_static_str("topic"));
    t.partition_data = vec![p];
    let mut r = ProduceRequest::default();
    r.topic_data = vec![t];
    let mut b = BytesMut::new();
    r.encode(&mut b, version).unwrap();
    b.to_vec()
}

/// Feeds `body` to the request path as the listener does: walk, then decode what passed.
fn request_path(api: ApiKey, version: i16, body: &[u8]) {
    let Some((fields, flexible)) = schema(api, version) else {
        return;
    };
    if walk(body, &fields, flexible).is_err() {
        return;
    }
    let mut b = Bytes::copy_from_slice(body);
    match api {
        ApiKey::Produce => {
            if let Ok(req) = ProduceRequest::decode(&mut b, version) {
                for t in req.topic_data {
                    for p in t.partition_data {
                        let _ = record_batch::split_batches(p.records.as_deref().unwrap_or_default());
                    }
                }
            }
        }
        ApiKey::Fetch => {
            let _ = FetchRequest::decode(&mut b, version);
        }
        _ => {
            let _ = MetadataRequest::decode(&mut b, version);
        }
    }
}

fn mutate(mut b: Vec<u8>, edits: &[(usize, u8)], cut: usize) -> Vec<u8> {
    if b.is_empty() {
        return b;
    }
    for (at, v) in edits {
        let i = at % b.len();
        b[i] = *v;
    }
    b.truncate(b.len() - cut % b.len().max(1));
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_a_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..400), version in 0i16..13) {
        let _ = record_batch::split_batches(&bytes);
        let _ = record_batch::records(&bytes);
        for api in [ApiKey::Produce, ApiKey::Fetch, ApiKey::Metadata] {
            request_path(api, version, &bytes);
        }
    }

    #[test]
    fn mutated_batches_and_frames_never_panic_a_decoder(
        values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in 0usize..8,
        version in 3i16..12,
    ) {
        let batch = record_batch::encode_batch(0, 0, 0, &values);
        let bad = mutate(batch.clone(), &edits, cut);
        let _ = record_batch::split_batches(&bad);
        let _ = record_batch::records(&bad);
        let frame = mutate(produce_frame(version, batch), &edits, cut);
        request_path(ApiKey::Produce, version, &frame);
    }
}
