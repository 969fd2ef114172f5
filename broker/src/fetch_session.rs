//! Replication sessions: a follower fetches every partition it copies from one leader over one
//! stream, as Kafka's follower Fetch carries many partitions per request. Each partition's copy
//! loop (`fetcher.rs`) still asks for its own records, one request at a time; the session puts
//! the requests that are waiting together into one message, and the leader answers each as soon
//! as it has data or its wait ends, sending the answers that are ready together. A broker pair
//! so costs one stream, whatever the number of partitions.
//!
//! Requests carry a sequence number that their answer echoes, so an answer reaches the request
//! it belongs to even when a partition's loop restarted meanwhile.
//!
//! A broker pair has two sessions, one per [`Lane`]: replicas in the ISR fetch apart from
//! replicas catching up. A catching-up replica's answers are megabytes (a reassignment's copy),
//! an in-sync replica's are what producers just wrote and wait on (acks=all); on one stream the
//! small answers queued behind the large ones. Kafka's fetcher threads mix them; this is on
//! purpose, so that a move does not slow the producers of the partitions that do not move.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use parking_lot::Mutex;
use proto::ferry::broker_client::BrokerClient;
use proto::ferry::{
    ReplicaFetchAnswer, ReplicaFetchBatch, ReplicaFetchBatchResponse, ReplicaFetchRequest, ReplicaFetchResponse,
};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::Channel;
use tonic::{Status, Streaming};

/// Requests of one session a leader holds at once (a follower has one per partition it copies):
/// what one peer can make this broker keep waiting.
const SESSION_IN_FLIGHT: usize = 1 << 18;
/// Requests or answers put into one message at most.
const PER_MESSAGE: usize = 4096;
/// Record bytes of the answers put into one message, past the first answer: a message is
/// encoded in one piece on the event loop, so a big one would hold up every other task.
const MESSAGE_BYTES: usize = 1 << 20;

/// The leader's answers on a session.
pub type AnswerStream = Pin<Box<dyn Stream<Item = Result<ReplicaFetchBatchResponse, Status>> + Send>>;

/// Serves a follower's session: each request is answered by `answer` on a task of its own (it
/// may wait for data), and the answers ready together go back in one message.
pub fn serve<F, Fut>(mut incoming: Streaming<ReplicaFetchBatch>, answer: F) -> AnswerStream
where
    F: Fn(ReplicaFetchRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ReplicaFetchResponse> + Send + 'static,
{
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<ReplicaFetchAnswer>();
    let (out_tx, out_rx) = mpsc::channel(2);
    let permits = Arc::new(Semaphore::new(SESSION_IN_FLIGHT));
    let answer = Arc::new(answer);
    let reader = tokio::spawn(async move {
        while let Some(Ok(batch)) = incoming.next().await {
            for req in batch.requests {
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    return;
                };
                let (answer, ready) = (answer.clone(), ready_tx.clone());
                tokio::spawn(async move {
                    let session_seq = req.session_seq;
                    let response = answer(req).await;
                    let _ = ready.send(ReplicaFetchAnswer {
                        session_seq,
                        response: Some(response),
                    });
                    drop(permit);
                });
            }
        }
    });
    tokio::spawn(async move {
        while let Some(first) = ready_rx.recv().await {
            let mut bytes = answer_bytes(&first);
            let mut answers = vec![first];
            while answers.len() < PER_MESSAGE && bytes < MESSAGE_BYTES {
                let Ok(a) = ready_rx.try_recv() else { break };
                bytes += answer_bytes(&a);
                answers.push(a);
            }
            if out_tx.send(Ok(ReplicaFetchBatchResponse { answers })).await.is_err() {
                // The follower is gone: its requests need no reading.
                reader.abort();
                return;
            }
        }
    });
    Box::pin(ReceiverStream::new(out_rx))
}

fn answer_bytes(a: &ReplicaFetchAnswer) -> usize {
    a.response.as_ref().map_or(0, |r| r.batches.len())
}

/// A request waiting for its answer.
type Call = (
    ReplicaFetchRequest,
    oneshot::Sender<Result<ReplicaFetchResponse, Status>>,
);

/// A client of another broker whose calls carry the cluster credential.
pub type PeerClient = BrokerClient<crate::controller_channels::Credentialed>;

/// Which session of a broker pair a fetch goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// The replica is in the ISR: its answers hold what producers wait on.
    InSync = 0,
    /// The replica is out of the ISR (a new replica of a move, or one that fell behind).
    CatchingUp = 1,
}

impl Lane {
    /// The lane of a replica of broker `id` whose partition's ISR is `isr`.
    pub fn of(isr: &[i32], id: i32) -> Self {
        if isr.contains(&id) {
            Lane::InSync
        } else {
            Lane::CatchingUp
        }
    }
}

/// This broker's sessions as a follower, one per leader endpoint and lane.
#[derive(Default)]
pub struct FetchSessions {
    /// Per leader endpoint, its sessions indexed by [`Lane`].
    sessions: Mutex<HashMap<String, [Option<mpsc::UnboundedSender<Call>>; 2]>>,
    /// The cluster credential a leader under an authorizer admits replication by.
    credential: std::sync::OnceLock<metastore::CredentialInterceptor>,
}

impl FetchSessions {
    /// Sends `req` on the `lane` session to the leader at `endpoint` (opening one over `channel`
    /// if none runs) and waits for its answer.
    pub async fn fetch(
        &self,
        endpoint: &str,
        lane: Lane,
        channel: Channel,
        req: ReplicaFetchRequest,
    ) -> Result<ReplicaFetchResponse, Status> {
        let (tx, rx) = oneshot::channel();
        self.session(endpoint, lane, channel)
            .send((req, tx))
            .map_err(|_| Status::unavailable("the fetch session to the leader ended"))?;
        rx.await
            .map_err(|_| Status::unavailable("the fetch session to the leader ended"))?
    }

    /// Sessions open now (ended ones are replaced on next use).
    pub fn open(&self) -> usize {
        let sessions = self.sessions.lock();
        sessions.values().flatten().flatten().filter(|s| !s.is_closed()).count()
    }

    /// Calls to other brokers carry `credential` (the broker's metastore client's) from now on.
    pub fn set_credential(&self, credential: metastore::CredentialInterceptor) {
        let _ = self.credential.set(credential);
    }

    /// A client of a leader over `channel`, carrying the cluster credential once known.
    pub fn client(&self, channel: Channel) -> PeerClient {
        BrokerClient::with_interceptor(channel, self.credential.get().cloned().unwrap_or_default())
            .max_decoding_message_size(1 << 30)
            .max_encoding_message_size(1 << 30)
    }

    fn session(&self, endpoint: &str, lane: Lane, channel: Channel) -> mpsc::UnboundedSender<Call> {
        let mut sessions = self.sessions.lock();
        // Looked up by `&str`: a fetch only allocates the key when it opens a leader's first session.
        if let Some(s) = sessions.get(endpoint).and_then(|l| l[lane as usize].as_ref()) {
            if !s.is_closed() {
                return s.clone();
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(self.client(channel), rx));
        match sessions.get_mut(endpoint) {
            Some(lanes) => lanes[lane as usize] = Some(tx.clone()),
            None => {
                let mut lanes: [Option<mpsc::UnboundedSender<Call>>; 2] = Default::default();
                lanes[lane as usize] = Some(tx.clone());
                sessions.insert(endpoint.to_string(), lanes);
            }
        }
        tx
    }
}

/// One session: sends the waiting requests together and hands each answer to its caller. Ends
/// when the stream fails; the callers then see an error and retry on a new session.
async fn run(mut client: PeerClient, mut calls: mpsc::UnboundedReceiver<Call>) {
    let Some(first) = calls.recv().await else { return };
    let mut waiting: HashMap<u64, oneshot::Sender<Result<ReplicaFetchResponse, Status>>> = HashMap::new();
    let mut seq = 0u64;
    let mut batch = |first: Call, calls: &mut mpsc::UnboundedReceiver<Call>, waiting: &mut HashMap<_, _>| {
        let mut requests = Vec::new();
        let mut next = Some(first);
        while let Some((mut req, reply)) = next.take() {
            seq += 1;
            req.session_seq = seq;
            waiting.insert(seq, reply);
            requests.push(req);
            if requests.len() < PER_MESSAGE {
                next = calls.try_recv().ok();
            }
        }
        ReplicaFetchBatch { requests }
    };
    let (out, out_rx) = mpsc::channel(4);
    // The receiver is alive: it moves into the call below.
    let _ = out.send(batch(first, &mut calls, &mut waiting)).await;
    let mut answers = match client.replica_fetch_session(ReceiverStream::new(out_rx)).await {
        Ok(r) => r.into_inner(),
        Err(status) => {
            for (_, reply) in waiting.drain() {
                let _ = reply.send(Err(status.clone()));
            }
            return;
        }
    };
    loop {
        tokio::select! {
            call = calls.recv() => {
                let Some(call) = call else { return };
                let b = batch(call, &mut calls, &mut waiting);
                if out.send(b).await.is_err() {
                    return;
                }
            }
            msg = answers.message() => match msg {
                Ok(Some(resp)) => {
                    for a in resp.answers {
                        // A request that was replaced has no caller left; its answer goes.
                        if let Some(reply) = waiting.remove(&a.session_seq) {
                            let _ = reply.send(Ok(a.response.unwrap_or_default()));
                        }
                    }
                }
                Ok(None) => return,
                Err(status) => {
                    for (_, reply) in waiting.drain() {
                        let _ = reply.send(Err(status.clone()));
                    }
                    return;
                }
            },
        }
    }
}
