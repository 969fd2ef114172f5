//! TLS on the gRPC port and on every gRPC channel this process opens. A node's one port carries
//! its peers' Raft, replication and forwarded calls as well as its clients' calls, so one setting
//! covers them all. When the port requires client certificates, nodes authenticate each other
//! with them (mutual TLS), on top of the cluster credential that their Raft calls carry.
//!
//! The client side is one setting for the process (a node, or the CLI): the CAs it trusts and the
//! certificate it shows. Its files are read at each new connection, so renewed files take effect
//! without a restart; the server side reloads through [`crate::tls::Reloading`].

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use hyper_util::rt::TokioIo;
use parking_lot::RwLock;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::{client, server, TlsAcceptor, TlsConnector};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

use crate::keystore::KeystoreAccess;
use crate::tls::{Reloading, TlsError};
use crate::truststore::Truststore;

/// What this process's channels trust and show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTlsFiles {
    /// The CAs that sign the servers' certificates (`ssl.truststore.*`).
    pub truststore: Truststore,
    /// The certificate chain and key shown to a server that asks (`ssl.keystore.location`).
    pub keystore: Option<PathBuf>,
    /// How to open the keystore (`ssl.keystore.type` and its passwords).
    pub keystore_access: KeystoreAccess,
}

/// The process's client setting: none means plaintext.
static CLIENT: RwLock<Option<ClientTlsFiles>> = RwLock::new(None);

/// gRPC's application protocol, offered on both sides.
const H2: &[u8] = b"h2";

/// How long a new connection may take to finish its TLS handshake.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(10);

/// Refused or unfinished TLS handshakes on this process's gRPC ports.
pub fn handshake_failures() -> &'static prometheus::IntCounter {
    static FAILURES: std::sync::OnceLock<prometheus::IntCounter> = std::sync::OnceLock::new();
    FAILURES.get_or_init(|| {
        // The name and help are constants: creating the counter cannot fail.
        prometheus::IntCounter::new(
            "ferry_grpc_tls_handshake_failures_total",
            "TLS handshakes on the gRPC ports of this process that were refused or did not finish \
             (an untrusted or missing certificate, a plaintext caller).",
        )
        .expect("a valid metric name")
    })
}

/// Makes every gRPC channel this process opens from now on use TLS with `files` (plaintext
/// with none). Channels already open keep what they were opened with.
pub fn set_client(files: Option<ClientTlsFiles>) {
    *CLIENT.write() = files;
}

/// The process's client setting.
pub fn client() -> Option<ClientTlsFiles> {
    CLIENT.read().clone()
}

/// The rustls client config `files` make: their CAs trusted, their certificate shown.
pub fn client_config(files: &ClientTlsFiles) -> Result<Arc<ClientConfig>, TlsError> {
    let roots = crate::truststore::read(&files.truststore)?;
    let builder = ClientConfig::builder_with_provider(crate::tls::provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let mut config = match &files.keystore {
        Some(ks) => {
            let (chain, key) = crate::keystore::read(ks, &files.keystore_access)?;
            builder.with_client_auth_cert(chain, key)?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![H2.to_vec()];
    Ok(Arc::new(config))
}

/// Opens a TLS connection to `uri`'s host and port with `files`; `preface` goes first, in the
/// clear (the Raft lane's, which the accept loop reads before the handshake).
pub async fn connect(
    uri: tonic::codegen::http::Uri,
    files: ClientTlsFiles,
    preface: Option<&'static [u8]>,
) -> io::Result<TokioIo<client::TlsStream<TcpStream>>> {
    let host = uri
        .host()
        .unwrap_or_default()
        .trim_matches(|c| c == '[' || c == ']')
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let config = client_config(&files).map_err(io::Error::other)?;
    let name = ServerName::try_from(host.clone())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
    let mut tcp = TcpStream::connect((host.as_str(), port)).await?;
    tcp.set_nodelay(true)?;
    if let Some(p) = preface {
        tcp.write_all(p).await?;
    }
    let tls = TlsConnector::from(config).connect(name, tcp).await?;
    Ok(TokioIo::new(tls))
}

/// Runs the TLS handshake on each connection of `conns`, side by side, each within
/// [`HANDSHAKE_WAIT`], and yields those that finish; the others are logged and dropped. The
/// certificates are those `tls` holds when each connection arrives.
fn accept<S>(conns: S, tls: Arc<Reloading>) -> ReceiverStream<io::Result<server::TlsStream<TcpStream>>>
where
    S: Stream<Item = io::Result<TcpStream>> + Send + Unpin + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        let mut conns = conns;
        loop {
            // Ends with the server (its receiver gone), not only at the next connection.
            let conn = tokio::select! {
                _ = tx.closed() => return,
                conn = conns.next() => match conn {
                    Some(conn) => conn,
                    None => return,
                },
            };
            let tcp = match conn {
                Ok(tcp) => tcp,
                Err(e) => {
                    tracing::warn!(error = %e, "taking a connection for TLS failed");
                    continue;
                }
            };
            let acceptor = TlsAcceptor::from(tls.config());
            let tx = tx.clone();
            tokio::spawn(async move {
                let peer = tcp.peer_addr().ok();
                match tokio::time::timeout(HANDSHAKE_WAIT, acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => {
                        let _ = tx.send(Ok(s)).await;
                    }
                    Ok(Err(e)) => {
                        handshake_failures().inc();
                        tracing::info!(?peer, error = %e, "gRPC TLS handshake refused");
                    }
                    Err(_) => {
                        handshake_failures().inc();
                        tracing::info!(?peer, "gRPC TLS handshake did not finish in time");
                    }
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// The principal of the caller's verified TLS certificate, as Kafka maps it (`User:` and the
/// subject's name), if it showed one.
pub fn peer_principal(ext: &tonic::Extensions) -> Option<String> {
    let certs = ext.get::<TlsConnectInfo<TcpConnectInfo>>()?.peer_certs()?;
    crate::tls::principal_of(certs.first()?)
}

/// What a node's channels use with its gRPC TLS `files`: the same CAs, and its certificate to
/// show peers that require one.
pub fn node_client(files: &crate::tls::TlsFiles) -> Result<ClientTlsFiles, TlsError> {
    let Some(truststore) = files.truststore.clone() else {
        return Err(TlsError::File {
            setting: "ssl.truststore.location",
            path: String::new(),
            reason: "a node's gRPC port needs the CAs that sign its peers' certificates".into(),
        });
    };
    let (chain, _) = crate::keystore::read(&files.keystore, &files.keystore_access)?;
    if !chain.first().is_some_and(crate::tls::allows_client_auth) {
        return Err(TlsError::File {
            setting: "ssl.keystore.location",
            path: files.keystore.display().to_string(),
            reason: "the certificate does not allow client authentication (extended key usage \
                     clientAuth), and a node shows it to its peers"
                .into(),
        });
    }
    let client = ClientTlsFiles {
        truststore,
        keystore: Some(files.keystore.clone()),
        keystore_access: files.keystore_access.clone(),
    };
    client_config(&client)?;
    Ok(client)
}

/// A node's gRPC TLS: the server side from `files` (offering `h2`), and this process's channels
/// set as [`node_client`] makes them. The caller keeps it reloaded with
/// [`Reloading::watch`] once the node has started.
pub fn start_node(files: &crate::tls::TlsFiles) -> Result<Arc<Reloading>, TlsError> {
    let client = node_client(files)?;
    let reloading = Arc::new(Reloading::with_alpn(files.clone(), vec![H2.to_vec()])?);
    set_client(Some(client));
    Ok(reloading)
}

/// Serves `router` on the connections of `incoming`, over TLS when `tls` is given, until
/// `shutdown` completes.
pub async fn serve(
    router: tonic::transport::server::Router,
    incoming: impl Stream<Item = io::Result<TcpStream>> + Send + Unpin + 'static,
    tls: Option<Arc<Reloading>>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    match tls {
        Some(tls) => {
            router
                .serve_with_incoming_shutdown(accept(incoming, tls), shutdown)
                .await
        }
        None => router.serve_with_incoming_shutdown(incoming, shutdown).await,
    }
}
