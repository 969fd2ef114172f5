//! Leader hints: the admin service of a node that does not lead names the leader's address in
//! every answer ([`proto::LEADER_HINT`]), so that a client sends its next requests there and a
//! large request crosses the network once instead of being forwarded (Kafka's clients learn the
//! controller from metadata answers the same way). Only the admin service carries it: the
//! metastore's own clients spread over the members on purpose.

use std::task::{Context, Poll};

use metastore::Client;
use tonic::codegen::{http, BoxFuture, Service};
use tonic::server::NamedService;

/// A service whose answers carry the leader hint while another node leads.
#[derive(Clone)]
pub struct LeaderHinted<S> {
    inner: S,
    client: Client,
}

impl<S> LeaderHinted<S> {
    /// Wraps `inner`; `client` knows this node's leader once attached to it.
    pub fn new(inner: S, client: Client) -> Self {
        Self { inner, client }
    }
}

impl<S: NamedService> NamedService for LeaderHinted<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B, R> Service<http::Request<B>> for LeaderHinted<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    R: Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let hint = self
            .client
            .remote_leader()
            .and_then(|a| http::HeaderValue::from_str(&a).ok());
        let answer = self.inner.call(req);
        Box::pin(async move {
            let mut r = answer.await?;
            if let Some(v) = hint {
                r.headers_mut().insert(proto::LEADER_HINT, v);
            }
            Ok(r)
        })
    }
}
