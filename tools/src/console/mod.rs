//! A node's HTTP server (`--http-listen`): Prometheus `/metrics`, and the web console: one page
//! (`/`, its script and style embedded in the binary) and the JSON it polls under `/api/`,
//! read from the admin API. Only GET and HEAD are served; anything else answers 405, an unknown
//! path 404. Connections are bounded in number, in the time their headers may take, and in
//! their lifetime, so no client can hold the node's resources.

pub mod api;
mod groups;
pub mod json;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::Registry;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use api::{Api, Endpoint};

/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 128;
/// How long a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a connection stays open (a browser opens another).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);

const INDEX_HTML: &str = include_str!("assets/index.html");
const CONSOLE_JS: &str = include_str!("assets/console.js");
const CONSOLE_CSS: &str = include_str!("assets/console.css");

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// Prometheus text.
    Metrics,
    /// A file of the page: its text and content type.
    Asset(&'static str, &'static str),
    /// JSON of the admin API.
    Api(Endpoint),
    /// No such path.
    NotFound,
    /// A path served, but not with this method.
    MethodNotAllowed,
}

/// The route of a request: pure, so every path and method is decided here (the query string is
/// not part of `path` and is ignored).
pub fn route(method: &Method, path: &str) -> Route {
    let found = match path {
        "/metrics" => Route::Metrics,
        "/" | "/index.html" => Route::Asset(INDEX_HTML, "text/html; charset=utf-8"),
        "/console.js" => Route::Asset(CONSOLE_JS, "text/javascript; charset=utf-8"),
        "/console.css" => Route::Asset(CONSOLE_CSS, "text/css; charset=utf-8"),
        p => match Endpoint::from_path(p) {
            Some(e) => Route::Api(e),
            None => return Route::NotFound,
        },
    };
    if method == Method::GET || method == Method::HEAD {
        found
    } else {
        Route::MethodNotAllowed
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(text.to_string())));
    *r.status_mut() = status;
    r
}

fn typed(status: StatusCode, body: Bytes, content_type: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(CACHE_CONTROL, hyper::header::HeaderValue::from_static("no-store"));
    r
}

/// The answer to one request.
async fn respond(registry: &Registry, api: &Api, method: &Method, path: &str) -> Response<Full<Bytes>> {
    match route(method, path) {
        Route::Metrics => crate::metrics_http::respond(registry, method, path),
        Route::Asset(text, content_type) => typed(StatusCode::OK, Bytes::from_static(text.as_bytes()), content_type),
        Route::Api(e) => match api.answer(e).await {
            Ok(body) => typed(StatusCode::OK, body, "application/json"),
            Err(why) => {
                let body = serde_json::json!({ "error": why }).to_string();
                typed(StatusCode::SERVICE_UNAVAILABLE, Bytes::from(body), "application/json")
            }
        },
        Route::NotFound => plain(
            StatusCode::NOT_FOUND,
            "not found: the console is at /, metrics at /metrics, JSON under /api/\n",
        ),
        Route::MethodNotAllowed => plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n"),
    }
}

/// A running HTTP server; it stops when dropped.
pub struct HttpServer {
    /// The address it serves on.
    pub addr: SocketAddr,
    task: JoinHandle<()>,
    tls_watch: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// Where it serves: `http://HOST:PORT` or, over TLS, `https://HOST:PORT`.
    pub fn url(&self) -> String {
        let scheme = if self.tls_watch.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(w) = &self.tls_watch {
            w.abort();
        }
    }
}

/// Binds the HTTP address, so that a port in use is an error before anything starts.
pub async fn bind(listen: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(listen)
        .await
        .with_context(|| format!("--http-listen: cannot listen on {listen}"))
}

/// Serves metrics and the console on `listener` until the returned server is dropped; the
/// console asks the quorum nodes at `admin`. With `tls` (a keystore; no client certificates
/// are asked for: browsers and scrapers show none) it serves HTTPS, reloading the files when
/// they change.
pub fn serve(
    listener: TcpListener,
    registry: Registry,
    admin: &[String],
    tls: Option<metastore::tls::TlsFiles>,
) -> anyhow::Result<HttpServer> {
    let addr = listener.local_addr()?;
    let api = Api::new(admin);
    let tls = tls
        .map(|files| metastore::tls::Reloading::new(files).map(Arc::new))
        .transpose()
        .map_err(|e| anyhow::anyhow!("the HTTP port's TLS: {e}"))?;
    let tls_watch = tls.clone().map(|t| tokio::spawn(t.watch(metastore::tls::RELOAD_EVERY)));
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let task = tokio::spawn(async move {
        loop {
            // Held by the connection's task: at most MAX_CONNECTIONS are served at once.
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let stream = match listener.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "http endpoint: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let (registry, api, tls) = (registry.clone(), api.clone(), tls.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (registry, api) = (registry.clone(), api.clone());
                    async move {
                        let r = respond(&registry, &api, req.method(), req.uri().path()).await;
                        Ok::<_, Infallible>(r)
                    }
                });
                // The handshake counts against the connection's lifetime too.
                let served = tokio::time::timeout(CONNECTION_LIFETIME, async {
                    match tls {
                        Some(tls) => {
                            let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
                            // A handshake has the time a plaintext request has for its header.
                            match tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)).await {
                                Ok(Ok(s)) => serve_connection(s, svc).await,
                                Ok(Err(e)) => tracing::debug!(error = %e, "http endpoint: TLS handshake refused"),
                                Err(_) => tracing::debug!("http endpoint: TLS handshake did not finish in time"),
                            }
                        }
                        None => serve_connection(stream, svc).await,
                    }
                });
                // Past its lifetime the connection is dropped, which closes it.
                let _ = served.await;
                drop(permit);
            });
        }
    });
    Ok(HttpServer { addr, task, tls_watch })
}

/// Serves one HTTP/1 connection to its end.
async fn serve_connection<IO, S>(io: IO, svc: S)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<
        Request<hyper::body::Incoming>,
        Response = Response<http_body_util::Full<Bytes>>,
        Error = Infallible,
    >,
    S::Future: Send + 'static,
{
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(io), svc);
    if let Err(e) = conn.await {
        tracing::debug!(error = %e, "http connection ended");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_to_metrics_the_page_and_the_api_and_nothing_else() {
        assert_eq!(route(&Method::GET, "/metrics"), Route::Metrics);
        assert!(
            matches!(route(&Method::GET, "/"), Route::Asset(t, "text/html; charset=utf-8") if t.contains("console.js"))
        );
        assert!(
            matches!(route(&Method::HEAD, "/console.js"), Route::Asset(_, ct) if ct.starts_with("text/javascript"))
        );
        assert!(matches!(route(&Method::GET, "/console.css"), Route::Asset(_, ct) if ct.starts_with("text/css")));
        assert_eq!(route(&Method::GET, "/api/groups"), Route::Api(Endpoint::Groups));
        for p in [
            "/x",
            "/api/",
            "/assets/console.js",
            "/metrics/",
            "//",
            "/%2e%2e/etc/passwd",
            "",
        ] {
            assert_eq!(route(&Method::GET, p), Route::NotFound, "{p}");
        }
        for m in [
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::OPTIONS,
            Method::PATCH,
        ] {
            assert_eq!(route(&m, "/api/brokers"), Route::MethodNotAllowed, "{m}");
            assert_eq!(route(&m, "/"), Route::MethodNotAllowed, "{m}");
            assert_eq!(route(&m, "/nope"), Route::NotFound, "{m}");
        }
    }

    /// One request over a fresh connection; the raw answer.
    async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(request).await.unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn the_server_answers_pages_errors_and_bad_requests_without_failing() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let server = serve(listener, Registry::new(), &[], None).unwrap();
        let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let page = exchange(server.addr, get("/?tab=moves").as_bytes()).await;
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        assert!(page.contains("/console.js"), "{page}");
        // No cluster to ask: the endpoint says why, as JSON.
        let api = exchange(server.addr, get("/api/brokers").as_bytes()).await;
        assert!(api.starts_with("HTTP/1.1 503"), "{api}");
        assert!(api.contains("{\"error\":"), "{api}");
        let post = "POST /api/brokers HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc";
        assert!(exchange(server.addr, post.as_bytes()).await.starts_with("HTTP/1.1 405"));
        assert!(exchange(server.addr, get("/../etc/passwd").as_bytes())
            .await
            .starts_with("HTTP/1.1 404"));
        let garbage = exchange(server.addr, b"\x00\xff not http\r\n\r\n").await;
        assert!(!garbage.contains("200 OK"), "{garbage}");
        // Still serving after all of it.
        assert!(exchange(server.addr, get("/metrics").as_bytes())
            .await
            .starts_with("HTTP/1.1 200"));
    }

    #[test]
    fn the_page_names_every_tab_and_endpoint_it_polls() {
        for tab in ["brokers", "moves", "throttles", "groups", "plans"] {
            assert!(INDEX_HTML.contains(&format!("data-tab=\"{tab}\"")), "{tab}");
        }
        for e in [
            "/api/brokers",
            "/api/reassignments",
            "/api/throttles",
            "/api/groups",
            "/api/plans",
        ] {
            assert!(CONSOLE_JS.contains(e), "{e}");
            assert!(Endpoint::from_path(e).is_some(), "{e}");
        }
    }
}
