//! What a client says of itself on each admin call (`grpc_rules.rs` reads it): the cluster
//! credential (nodes, and operators with the credential file), a user's name and password, or
//! nothing.

use tonic::metadata::{Ascii, MetadataValue};
use tonic::{Request, Status};

use super::grpc_rules;

/// The headers a client adds to its calls.
#[derive(Clone, Default)]
pub struct CallIdentity {
    credential: Option<metastore::CredentialInterceptor>,
    basic: Option<MetadataValue<Ascii>>,
}

impl CallIdentity {
    /// Calls carry the cluster credential, once `credential` holds it.
    pub fn credential(credential: metastore::CredentialInterceptor) -> Self {
        Self {
            credential: Some(credential),
            basic: None,
        }
    }

    /// Calls log in as `user` with `password` (checked against the user's SCRAM credentials).
    pub fn user(user: &str, password: &str) -> Result<Self, String> {
        let v = MetadataValue::try_from(grpc_rules::basic(user, password))
            .map_err(|_| "a user name or password that cannot be sent in a header".to_string())?;
        Ok(Self {
            credential: None,
            basic: Some(v),
        })
    }
}

impl tonic::service::Interceptor for CallIdentity {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let mut req = match self.credential.as_mut() {
            Some(c) => c.call(req)?,
            None => req,
        };
        if let Some(b) = &self.basic {
            req.metadata_mut().insert(grpc_rules::AUTHORIZATION, b.clone());
        }
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::service::Interceptor;

    #[test]
    fn a_user_identity_sends_basic_credentials_the_guard_reads_back() {
        let mut id = CallIdentity::user("alice", "s3cret").unwrap();
        let req = id.call(Request::new(())).unwrap();
        let header = req.metadata().get(grpc_rules::AUTHORIZATION).unwrap();
        assert_eq!(
            grpc_rules::claim(None, Some(header.as_bytes())),
            Ok(grpc_rules::Claim::User {
                name: "alice".into(),
                password: "s3cret".into()
            })
        );
        let mut none = CallIdentity::default();
        assert!(none.call(Request::new(())).unwrap().metadata().is_empty());
    }
}
