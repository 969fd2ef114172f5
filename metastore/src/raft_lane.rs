//! The Raft lane: openraft and the Raft traffic between nodes run on a thread of their own, apart
//! from the runtime that serves clients. Decoding a million-partition admin request, encoding a
//! range or applying a controller pass takes the client runtime for up to a second; Raft on that
//! runtime missed its heartbeats meanwhile, and followers called elections.
//!
//! Nodes keep one port. A node's Raft connections to a peer start with [`PREFACE`] before
//! HTTP/2; the accept loop hands those to the Raft thread's server and every other connection
//! to the client runtime's.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};

/// The bytes a Raft-lane connection starts with. An HTTP/2 client starts with `PRI * HTTP/2.0`,
/// so no other client is taken for a peer.
pub const PREFACE: &[u8; 16] = b"FERRY-RAFT-LANE\n";

/// How long the accept loop waits for a new connection's first bytes. A client that sends
/// nothing by then goes to the client runtime, which times it out as before.
const FIRST_BYTES_WAIT: Duration = Duration::from_secs(10);

/// Which server a new connection belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// A peer's Raft connection (its preface is consumed).
    Raft,
    /// Anything else.
    Client,
}

/// Decides a connection's lane from the bytes seen so far: `None` while they are a proper
/// prefix of the preface.
pub fn lane_of(first: &[u8]) -> Option<Lane> {
    let n = first.len().min(PREFACE.len());
    if first[..n] != PREFACE[..n] {
        Some(Lane::Client)
    } else if n == PREFACE.len() {
        Some(Lane::Raft)
    } else if first.is_empty() {
        // The peer closed before sending anything: the client server sees the close.
        Some(Lane::Client)
    } else {
        None
    }
}

/// Reads the first bytes of `stream` without taking them, and consumes the preface of a
/// Raft-lane connection.
async fn classify(stream: &mut TcpStream) -> io::Result<Lane> {
    let mut buf = [0u8; PREFACE.len()];
    let deadline = tokio::time::Instant::now() + FIRST_BYTES_WAIT;
    loop {
        let n = match tokio::time::timeout_at(deadline, stream.peek(&mut buf)).await {
            Ok(n) => n?,
            Err(_) => return Ok(Lane::Client),
        };
        match lane_of(&buf[..n]) {
            Some(Lane::Raft) => {
                tokio::io::AsyncReadExt::read_exact(stream, &mut buf).await?;
                return Ok(Lane::Raft);
            }
            Some(lane) => return Ok(lane),
            // Part of the preface is in: peek again once more may have come (it returns at
            // once while the socket stays readable).
            None => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
}

/// Accepts connections on `listener` and hands each to its lane's server until both receivers
/// are gone. It runs on the Raft thread, so that peers reconnect while the client runtime is
/// busy; a tokio stream belongs to its runtime's reactor, so each goes over as a std stream for
/// its server's runtime to register.
pub async fn route(
    listener: std::net::TcpListener,
    client: mpsc::Sender<std::net::TcpStream>,
    raft: mpsc::Sender<std::net::TcpStream>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "cannot accept connections");
            return;
        }
    };
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and the like: wait rather than spin.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if client.is_closed() && raft.is_closed() {
            return;
        }
        let _ = stream.set_nodelay(true);
        let (client, raft) = (client.clone(), raft.clone());
        tokio::spawn(async move {
            let lane = match classify(&mut stream).await {
                Ok(lane) => lane,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "connection closed before its first bytes");
                    return;
                }
            };
            let to = if lane == Lane::Raft { raft } else { client };
            match stream.into_std() {
                Ok(s) => {
                    let _ = to.send(s).await;
                }
                Err(e) => tracing::warn!(%peer, error = %e, "handing a connection over failed"),
            }
        });
    }
}

/// Opens a Raft-lane connection to `addr` (HOST:PORT): TCP, then the preface.
pub async fn connect(addr: SocketAddr) -> io::Result<TokioIo<TcpStream>> {
    let mut s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    s.write_all(PREFACE).await?;
    Ok(TokioIo::new(s))
}

/// The thread that runs openraft and the Raft lane's server; it stops when its handle drops.
pub struct RaftThread {
    handle: Handle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RaftThread {
    /// Starts the thread of node `id`, with a single-threaded runtime.
    pub fn start(id: u64) -> io::Result<Self> {
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name(format!("raft-{id}")).spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .thread_name(format!("raft-{id}-blocking"))
                .build();
            let rt = match rt {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = handle_tx.send(Err(e));
                    return;
                }
            };
            let _ = handle_tx.send(Ok(rt.handle().clone()));
            // Ends on stop or when the handle is dropped without one.
            rt.block_on(async {
                let _ = stopped.await;
            });
            // Snapshot writes may still run on the blocking pool: they finish on their own.
            rt.shutdown_background();
        })?;
        let handle = handle_rx
            .recv()
            .map_err(|_| io::Error::other("the Raft thread ended before starting its runtime"))??;
        Ok(Self {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The Raft thread's runtime.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl Drop for RaftThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            // Not joined from the Raft thread itself (a drop inside one of its tasks).
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_whole_preface_makes_a_raft_connection() {
        assert_eq!(lane_of(PREFACE), Some(Lane::Raft));
        assert_eq!(lane_of(&PREFACE[..5]), None);
        assert_eq!(lane_of(b"PRI * HTTP/2.0\r\n"), Some(Lane::Client));
        assert_eq!(lane_of(b"FERRY-X"), Some(Lane::Client));
        assert_eq!(lane_of(b""), Some(Lane::Client));
    }

    #[tokio::test]
    async fn connections_go_to_their_lane_and_the_preface_is_consumed() {
        use tokio::io::AsyncReadExt;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (client_tx, mut client_rx) = mpsc::channel(4);
        let (raft_tx, mut raft_rx) = mpsc::channel(4);
        tokio::spawn(route(listener, client_tx, raft_tx));

        let mut peer = connect(addr).await.unwrap().into_inner();
        peer.write_all(b"after").await.unwrap();
        let got = raft_rx.recv().await.unwrap();
        let mut got = TcpStream::from_std(got).unwrap();
        let mut buf = [0u8; 5];
        got.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"after");

        let mut other = TcpStream::connect(addr).await.unwrap();
        other.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
        let mut got = TcpStream::from_std(client_rx.recv().await.unwrap()).unwrap();
        let mut buf = [0u8; 3];
        got.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"PRI", "a client's bytes are left for its server");
    }
}
