//! A node's `/metrics` answer: Prometheus text from the node's own registry. The node's HTTP
//! server (`console`) routes `/metrics` here.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::CONTENT_TYPE;
use hyper::{Method, Response, StatusCode};
use prometheus::{Encoder, Registry, TextEncoder};

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
