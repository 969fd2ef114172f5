//! A node's `/metrics` endpoint: Prometheus text from the node's own registry over plain HTTP/1.1.

use std::convert::Infallible;
use std::net::SocketAddr;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::CONTENT_TYPE;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A running metrics endpoint; it stops when dropped.
pub struct MetricsServer {
    /// The address it serves on.
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The answer to one request: the registry's metrics for `GET /metrics`, 404 or 405 otherwise.
pub fn respond(registry: &Registry, method: &Method, path: &str) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, text: &str| {
        let mut r = Response::new(Full::new(Bytes::from(text.to_string())));
        *r.status_mut() = status;
        r
    };
    if path != "/metrics" {
        return plain(StatusCode::NOT_FOUND, "not found: metrics are at /metrics\n");
    }
    if method != Method::GET && method != Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
    }
    let encoder = TextEncoder::new();
    let mut buf = Vec::new();
    if let Err(e) = encoder.encode(&registry.gather(), &mut buf) {
        return plain(StatusCode::INTERNAL_SERVER_ERROR, &format!("encoding metrics: {e}\n"));
    }
    let mut r = Response::new(Full::new(Bytes::from(buf)));
    if let Ok(v) = encoder.format_type().parse() {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r
}

/// Binds the metrics address, so that a port in use is an error before anything starts.
pub async fn bind(listen: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(listen)
        .await
        .with_context(|| format!("--metrics-listen: cannot listen on {listen}"))
}

/// Serves `registry` at `http://<listener>/metrics` until the returned server is dropped.
pub fn serve(listener: TcpListener, registry: Registry) -> anyhow::Result<MetricsServer> {
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics endpoint: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let registry = registry.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let resp = respond(&registry, req.method(), req.uri().path());
                    async move { Ok::<_, Infallible>(resp) }
                });
                if let Err(e) = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await {
                    tracing::debug!(error = %e, "metrics connection ended");
                }
            });
        }
    });
    Ok(MetricsServer { addr, task })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn get_metrics_is_prometheus_text_and_other_paths_are_not_found() {
        let registry = Registry::new();
        let c = prometheus::IntCounter::new("ferry_test_total", "A test counter.").unwrap();
        registry.register(Box::new(c.clone())).unwrap();
        c.inc_by(3);
        let r = respond(&registry, &Method::GET, "/metrics");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[CONTENT_TYPE], "text/plain; version=0.0.4");
        let body = r.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(
            text.contains("# TYPE ferry_test_total counter\nferry_test_total 3\n"),
            "{text}"
        );
        assert_eq!(respond(&registry, &Method::GET, "/").status(), StatusCode::NOT_FOUND);
        assert_eq!(
            respond(&registry, &Method::POST, "/metrics").status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
