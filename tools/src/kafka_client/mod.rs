//! A small client of Kafka's wire protocol for the `ferry` commands that act as a Kafka client
//! (`consume --group`, the coordinator lines of `reassign --progress`): framing, the request
//! header and correlation ids, one request at a time per connection. An answer is bounded in
//! size and walked with its schema (`responses`) before the protocol crate decodes it, so a
//! count that lies cannot make the crate reserve memory the frame does not hold.

pub mod responses;

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use proto::errors::ErrorCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest answer read: the answers this client asks for carry no records.
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// How long a connection or one request may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// What a call over the Kafka protocol can fail with.
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    /// The connection failed or closed.
    #[error("{addr}: {source}")]
    Io {
        /// The broker's address.
        addr: String,
        /// The failure.
        source: std::io::Error,
    },
    /// No answer in time.
    #[error("{0}: no answer within {CALL_TIMEOUT:?}")]
    Timeout(String),
    /// The answer broke the protocol (size, correlation id, schema).
    #[error("{addr}: malformed answer: {why}")]
    Malformed {
        /// The broker's address.
        addr: String,
        /// What was wrong.
        why: String,
    },
    /// The broker answered with a Kafka error.
    #[error("{code}: {message}")]
    Refused {
        /// Kafka's code.
        code: ErrorCode,
        /// For people: the group or partition and why.
        message: String,
    },
}

impl KafkaError {
    /// The Kafka code, when the broker answered with one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            KafkaError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// A refusal carrying Kafka's `code` (nothing when it is 0).
pub fn check(code: i16, message: Option<&StrBytes>, what: &str) -> Result<(), KafkaError> {
    if code == 0 {
        return Ok(());
    }
    let detail = message.map(|m| format!(": {}", m.as_str())).unwrap_or_default();
    Err(KafkaError::Refused {
        code: ErrorCode(i32::from(code)),
        message: format!("{what}{detail}"),
    })
}

/// One connection to a broker's Kafka listener.
pub struct KafkaConn {
    addr: String,
    stream: TcpStream,
    next_correlation: i32,
    client_id: StrBytes,
}

impl KafkaConn {
    /// Connects to `addr` (HOST:PORT).
    pub async fn connect(addr: &str) -> Result<Self, KafkaError> {
        let stream = tokio::time::timeout(CALL_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| KafkaError::Timeout(addr.to_string()))?
            .map_err(|source| KafkaError::Io {
                addr: addr.to_string(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        Ok(Self {
            addr: addr.to_string(),
            stream,
            next_correlation: 0,
            client_id: StrBytes::from_static_str("ferry"),
        })
    }

    /// Sends `req` at `version` and reads its answer.
    pub async fn call<R: Request>(&mut self, req: &R, version: i16) -> Result<R::Response, KafkaError> {
        let addr = self.addr.clone();
        tokio::time::timeout(CALL_TIMEOUT, self.exchange(req, version))
            .await
            .map_err(|_| KafkaError::Timeout(addr))?
    }

    async fn exchange<R: Request>(&mut self, req: &R, version: i16) -> Result<R::Response, KafkaError> {
        let key = ApiKey::try_from(R::KEY).map_err(|_| self.malformed(format!("unknown API key {}", R::KEY)))?;
        let correlation = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let frame = encode_request(req, key, version, correlation, &self.client_id)
            .map_err(|e| self.malformed(format!("cannot encode {key:?} v{version}: {e}")))?;
        let io = |source| KafkaError::Io {
            addr: self.addr.clone(),
            source,
        };
        self.stream.write_all(&frame).await.map_err(io)?;
        let size = self.stream.read_i32().await.map_err(io)?;
        let size = match usize::try_from(size) {
            Ok(n) if n <= MAX_RESPONSE_BYTES => n,
            _ => return Err(self.malformed(format!("answer of {size} bytes (at most {MAX_RESPONSE_BYTES})"))),
        };
        let mut body = vec![0u8; size];
        self.stream.read_exact(&mut body).await.map_err(io)?;
        decode_response::<R>(Bytes::from(body), key, version, correlation).map_err(|why| self.malformed(why))
    }

    fn malformed(&self, why: String) -> KafkaError {
        KafkaError::Malformed {
            addr: self.addr.clone(),
            why,
        }
    }
}

/// The frame of a request: its size, header and body.
pub fn encode_request<R: Request>(
    req: &R,
    key: ApiKey,
    version: i16,
    correlation: i32,
    client_id: &StrBytes,
) -> anyhow::Result<Bytes> {
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = correlation;
    header.client_id = Some(client_id.clone());
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header.encode(&mut buf, key.request_header_version(version))?;
    req.encode(&mut buf, version)?;
    let size = i32::try_from(buf.len() - 4)?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// Decodes an answer (after its size): the correlation id must be the request's, and the body
/// must walk clean with its schema before it is decoded.
pub fn decode_response<R: Request>(
    mut body: Bytes,
    key: ApiKey,
    version: i16,
    correlation: i32,
) -> Result<R::Response, String> {
    let header_version = key.response_header_version(version);
    if header_version >= 1 {
        // The flexible header's tagged fields, after the correlation id.
        let rest = body
            .get(4..)
            .ok_or_else(|| format!("{} bytes cannot hold a header", body.len()))?;
        broker::kafka::walk::walk(rest, &[], true).map_err(|e| format!("header: {e}"))?;
    }
    let header = ResponseHeader::decode(&mut body, header_version).map_err(|e| format!("header: {e}"))?;
    if header.correlation_id != correlation {
        return Err(format!(
            "correlation id {}, expected {correlation}",
            header.correlation_id
        ));
    }
    let (schema, flexible) =
        responses::schema(key, version).ok_or_else(|| format!("no answer schema for {key:?} v{version}"))?;
    broker::kafka::walk::walk(&body, &schema, flexible).map_err(|e| format!("{key:?} v{version}: {e}"))?;
    R::Response::decode(&mut body, version).map_err(|e| format!("{key:?} v{version}: {e}"))
}

/// FindCoordinator (v4) for a group, asked of the broker at `any`: the coordinator's address.
pub async fn find_group_coordinator(any: &str, group: &str) -> Result<(i32, String), KafkaError> {
    let mut conn = KafkaConn::connect(any).await?;
    let mut req = FindCoordinatorRequest::default();
    req.key_type = 0;
    req.coordinator_keys = vec![StrBytes::from_string(group.to_string())];
    let r = conn.call(&req, 4).await?;
    let c = r.coordinators.first().ok_or_else(|| KafkaError::Malformed {
        addr: any.to_string(),
        why: "FindCoordinator answered no coordinator".into(),
    })?;
    check(c.error_code, c.error_message.as_ref(), &format!("group {group}"))?;
    Ok((c.node_id.0, format!("{}:{}", c.host.as_str(), c.port)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ListGroupsRequest, ListGroupsResponse};

    fn framed_answer(resp: &ListGroupsResponse, version: i16, correlation: i32) -> Bytes {
        let mut b = BytesMut::new();
        let mut h = ResponseHeader::default();
        h.correlation_id = correlation;
        h.encode(&mut b, ApiKey::ListGroups.response_header_version(version))
            .unwrap();
        resp.encode(&mut b, version).unwrap();
        b.freeze()
    }

    #[test]
    fn a_request_frame_starts_with_its_size_key_version_and_correlation_id() {
        let f = encode_request(
            &ListGroupsRequest::default(),
            ApiKey::ListGroups,
            4,
            7,
            &StrBytes::from_static_str("ferry"),
        )
        .unwrap();
        assert_eq!(i32::from_be_bytes(f[..4].try_into().unwrap()) as usize, f.len() - 4);
        assert_eq!(broker::kafka::frame::key_and_version(&f[4..]).unwrap(), (16, 4));
        assert_eq!(i32::from_be_bytes(f[8..12].try_into().unwrap()), 7);
    }

    #[test]
    fn an_answer_decodes_only_with_its_own_correlation_id() {
        let mut resp = ListGroupsResponse::default();
        let mut g = kafka_protocol::messages::list_groups_response::ListedGroup::default();
        g.group_id = kafka_protocol::messages::GroupId(StrBytes::from_static_str("g"));
        g.group_state = StrBytes::from_static_str("Stable");
        resp.groups.push(g);
        let b = framed_answer(&resp, 4, 3);
        let got = decode_response::<ListGroupsRequest>(b.clone(), ApiKey::ListGroups, 4, 3).unwrap();
        assert_eq!(got, resp);
        assert!(decode_response::<ListGroupsRequest>(b, ApiKey::ListGroups, 4, 4).is_err());
    }

    #[test]
    fn an_answer_whose_count_lies_is_refused_before_decoding() {
        let b = framed_answer(&ListGroupsResponse::default(), 4, 1).to_vec();
        // Header: correlation id (4) and its tagged fields (1); body: throttle (4), error (2),
        // then the compact group count, 0 + 1 for none. Claim a huge count instead.
        let mut lying = b[..11].to_vec();
        lying.extend_from_slice(&[0xff, 0xff, 0xff, 0x7f, 0]);
        assert!(decode_response::<ListGroupsRequest>(Bytes::from(lying), ApiKey::ListGroups, 4, 1).is_err());
        assert!(decode_response::<ListGroupsRequest>(Bytes::from(b), ApiKey::ListGroups, 4, 1).is_ok());
    }
}
