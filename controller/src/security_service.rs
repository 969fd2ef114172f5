//! The `Security` gRPC service: users' SCRAM credentials (`scram_admin`) and ACLs
//! (`acl_admin`). Any quorum node answers, as the Admin service does. Every call must carry
//! the cluster credential: whoever could write users or ACLs could make themselves a super
//! user. Brokers send it with the Kafka requests they forward (whose principals they have
//! checked), `ferry users` with `--cluster-credential-file`.

use metastore::Client;
use proto::ferry::security_server::Security;
use proto::ferry::*;
use tonic::{Request, Response, Status};

use crate::limits::RequestLimits;
use crate::{acl_admin, scram_admin};

/// Serves `Security` over a metastore client.
#[derive(Clone)]
pub struct SecurityService {
    client: Client,
    limits: RequestLimits,
}

impl SecurityService {
    /// A service that reads and writes through `client`, with `limits` on requests.
    pub fn new(client: Client, limits: RequestLimits) -> Self {
        Self { client, limits }
    }
}

impl SecurityService {
    /// Refuses a call without the cluster credential.
    fn check<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let given = req.metadata().get(metastore::credential::CREDENTIAL_HEADER);
        if given.is_some_and(|g| self.client.carries_credential(g.as_bytes())) {
            return Ok(());
        }
        Err(Status::permission_denied(
            "users and ACLs are changed and read with the cluster credential (--cluster-credential-file)",
        ))
    }
}

fn status(e: metastore::ClientError) -> Status {
    Status::unavailable(format!("metastore: {e}"))
}

#[tonic::async_trait]
impl Security for SecurityService {
    async fn alter_user_scram_credentials(
        &self,
        req: Request<AlterUserScramCredentialsRequest>,
    ) -> Result<Response<AlterUserScramCredentialsResponse>, Status> {
        self.check(&req)?;
        let r = scram_admin::alter(&self.client, &self.limits, req.into_inner()).await;
        Ok(Response::new(r.map_err(status)?))
    }

    async fn describe_user_scram_credentials(
        &self,
        req: Request<DescribeUserScramCredentialsRequest>,
    ) -> Result<Response<DescribeUserScramCredentialsResponse>, Status> {
        self.check(&req)?;
        let r = scram_admin::describe(&self.client, &self.limits, req.into_inner()).await;
        Ok(Response::new(r.map_err(status)?))
    }

    async fn create_acls(&self, req: Request<CreateAclsRequest>) -> Result<Response<CreateAclsResponse>, Status> {
        self.check(&req)?;
        let r = acl_admin::create(&self.client, &self.limits, req.into_inner()).await;
        Ok(Response::new(r.map_err(status)?))
    }

    async fn describe_acls(&self, req: Request<DescribeAclsRequest>) -> Result<Response<DescribeAclsResponse>, Status> {
        self.check(&req)?;
        let r = acl_admin::describe(&self.client, req.into_inner()).await;
        Ok(Response::new(r.map_err(status)?))
    }

    async fn delete_acls(&self, req: Request<DeleteAclsRequest>) -> Result<Response<DeleteAclsResponse>, Status> {
        self.check(&req)?;
        let r = acl_admin::delete(&self.client, &self.limits, req.into_inner()).await;
        Ok(Response::new(r.map_err(status)?))
    }
}
