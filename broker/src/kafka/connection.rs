//! One Kafka client connection: frames read ahead on their own task, requests answered in
//! order, produce requests pipelined. Generic over the stream's halves, so that a plain and an
//! encrypted connection run the same code.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{FuturesOrdered, StreamExt};
use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::frame::{self, FrameError};
use super::listeners::Via;
use super::{handle, throttling, AbortOnDrop, Context};
use crate::auth::session::Session;
use crate::replica_manager::BrokerCore;
use metastore::tls::{principal_of, Reloading};

/// `connections.max.idle.ms`: a connection silent this long is closed.
const IDLE: Duration = Duration::from_secs(600);
/// How long a TLS handshake may take before the connection is dropped.
const TLS_HANDSHAKE: Duration = Duration::from_secs(10);

/// Serves one accepted client: over TLS first when the listener has certificates (a failed
/// handshake counts as a failed authentication), then as [`connection`].
pub(super) async fn accept(
    stream: tokio::net::TcpStream,
    tls: Option<&Reloading>,
    core: &Arc<BrokerCore>,
    ctx: &Context,
    peer: (&str, &Via),
    max: usize,
) -> Result<(), ConnError> {
    let Some(tls) = tls else {
        return connection(stream.into_split(), None, core, ctx, peer, max).await;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
    let stream = match tokio::time::timeout(TLS_HANDSHAKE, acceptor.accept(stream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            core.metrics.authentication_failures.inc();
            return Err(ConnError::Tls(e.to_string()));
        }
        Err(_) => {
            core.metrics.authentication_failures.inc();
            return Err(ConnError::Tls(format!("no TLS handshake within {TLS_HANDSHAKE:?}")));
        }
    };
    let principal = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .and_then(principal_of);
    connection(tokio::io::split(stream), principal, core, ctx, peer, max).await
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub(super) enum ConnError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Frame(#[from] FrameError),
    #[error("API key {0} version {1} is not served")]
    Unsupported(i16, i16),
    #[error("idle for {0:?}")]
    Idle(Duration),
    #[error("{0}")]
    Sasl(String),
    #[error("TLS: {0}")]
    Tls(String),
}

/// One client connection: requests are read as they come and answered in order. Produce
/// requests are pipelined: each is appended to the logs at once, in the order it came, and its
/// wait for the in-sync replicas overlaps the next requests' (Kafka handles one request per
/// connection at a time; a producer with several in flight gains from this). Any other request
/// waits for those before it, so its effects keep their order.
pub(super) async fn connection<R, W>(
    (rd, mut wr): (R, W),
    certificate: Option<String>,
    core: &Arc<BrokerCore>,
    ctx: &Context,
    peer: (&str, &Via),
    max: usize,
) -> Result<(), ConnError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send,
{
    let (tx, mut frames) = tokio::sync::mpsc::channel(MAX_IN_FLIGHT);
    // A client over its quota is not read from until its throttle time has passed (KIP-219).
    let mute = Arc::new(throttling::Mute::default());
    // Reading on its own task keeps the reads whole: a read cut off by a select would lose bytes.
    let reader = tokio::spawn(read_frames(rd, max, tx, mute.clone()));
    let _stop_reader = AbortOnDrop(reader);
    let session = Session::new(ctx.security.settings(), &peer.1.name, peer.1.protocol).with_certificate(certificate);
    let session = parking_lot::Mutex::new(session);
    let mut inflight: FuturesOrdered<Answer<'_>> = FuturesOrdered::new();
    loop {
        let muted = mute.until();
        tokio::select! {
            Some(done) = inflight.next(), if !inflight.is_empty() => send(&mut wr, done).await?,
            _ = mute.wait(), if muted.is_some() => {}
            frame = frames.recv(), if inflight.len() < MAX_IN_FLIGHT && muted.is_none() => {
                let Some(frame) = frame else {
                    // The client is gone: answer what is in flight first.
                    return drain(&mut inflight, &mut wr).await;
                };
                let frame = frame?;
                let produce = frame::key_and_version(&frame).is_ok_and(|(key, _)| key == ApiKey::Produce as i16);
                if !produce {
                    drain(&mut inflight, &mut wr).await?;
                    send(&mut wr, handle(core, ctx, peer, &session, &mute, frame).await).await?;
                    if session.lock().closing() {
                        return Err(ConnError::Sasl("authentication failed".into()));
                    }
                    continue;
                }
                // Polled once here, the request's appends happen now, in arrival order; what is
                // left is the wait for the in-sync replicas.
                let mut answer: Answer<'_> = Box::pin(handle(core, ctx, peer, &session, &mute, frame));
                match futures::poll!(&mut answer) {
                    std::task::Poll::Ready(r) => inflight.push_back(Box::pin(futures::future::ready(r))),
                    std::task::Poll::Pending => inflight.push_back(answer),
                }
            }
        }
    }
}

/// One request's answer, still to come.
type Answer<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Option<Bytes>, ConnError>> + Send + 'a>>;

/// Writes one answer, if the request has one.
async fn send<W: AsyncWrite + Unpin>(wr: &mut W, done: Result<Option<Bytes>, ConnError>) -> Result<(), ConnError> {
    if let Some(response) = done? {
        wr.write_all(&response).await?;
    }
    Ok(())
}

/// Writes every answer in flight, in order.
async fn drain<W: AsyncWrite + Unpin>(inflight: &mut FuturesOrdered<Answer<'_>>, wr: &mut W) -> Result<(), ConnError> {
    while let Some(done) = inflight.next().await {
        send(wr, done).await?;
    }
    Ok(())
}

/// Requests read ahead of their answers on one connection.
const MAX_IN_FLIGHT: usize = 8;

/// Reads frames until the client goes, idles out, or sends a frame that is refused (which is
/// sent on as the last item).
async fn read_frames<R: AsyncRead + Unpin>(
    mut rd: R,
    max: usize,
    tx: tokio::sync::mpsc::Sender<Result<Bytes, ConnError>>,
    mute: Arc<throttling::Mute>,
) {
    loop {
        mute.wait().await;
        let size = match tokio::time::timeout(IDLE, rd.read_i32()).await {
            Err(_) => Err(ConnError::Idle(IDLE)),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return,
            Ok(r) => r.map_err(ConnError::from),
        };
        let frame = match size.and_then(|s| Ok(frame::check_size(s, max)?)) {
            Ok(size) => {
                let mut buf = vec![0u8; size];
                match rd.read_exact(&mut buf).await {
                    Ok(_) => Ok(Bytes::from(buf)),
                    Err(e) => Err(e.into()),
                }
            }
            Err(e) => Err(e),
        };
        let last = frame.is_err();
        if tx.send(frame).await.is_err() || last {
            return;
        }
    }
}
