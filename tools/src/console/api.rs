//! The console's `/api/` endpoints: each asks the admin API (the node's own Admin and Broker
//! gRPC services, through `broker::ClusterClient` as the CLI does, and the brokers' Kafka
//! listeners for groups) and turns the answers into JSON with `json`. An answer is kept for
//! [`FRESH`], and one endpoint computes one answer at a time, so many open pages cost the
//! cluster no more than one.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use broker::ClusterClient;
use bytes::Bytes;
use proto::ferry::*;
use serde::Serialize;
use tokio::sync::Mutex;

use super::groups;
use super::json;

/// How long an answer is served again before the cluster is asked anew.
const FRESH: Duration = Duration::from_millis(800);
/// The longest one answer may take to gather; a cluster without a quorum answers an error.
const GATHER_TIMEOUT: Duration = Duration::from_secs(15);
/// Resources per DescribeConfigs request, below the admin's item limit.
const CONFIGS_PER_REQUEST: usize = 1000;

/// The JSON endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// Brokers and their dirs.
    Brokers,
    /// Reassignments in flight.
    Reassignments,
    /// Throttles in force.
    Throttles,
    /// Consumer groups and lag.
    Groups,
    /// The controller's move plans.
    Plans,
}

impl Endpoint {
    /// The endpoint at `path`, if one is there.
    pub fn from_path(path: &str) -> Option<Self> {
        Some(match path {
            "/api/brokers" => Self::Brokers,
            "/api/reassignments" => Self::Reassignments,
            "/api/throttles" => Self::Throttles,
            "/api/groups" => Self::Groups,
            "/api/plans" => Self::Plans,
            _ => return None,
        })
    }
}

/// The endpoints of one node, over its client of the cluster.
pub struct Api {
    /// Why there is none, when the admin addresses could not be used: every endpoint says so,
    /// and `/metrics` is served all the same.
    client: Result<ClusterClient, Failure>,
    cache: HashMap<Endpoint, Mutex<Option<(Instant, Bytes)>>>,
}

/// What an endpoint failed with: said to the page as `{"error": ...}`.
pub type Failure = String;

impl Api {
    /// The endpoints, asking the quorum nodes at `admin` (this node's own address first).
    pub fn new(admin: &[String]) -> Arc<Self> {
        let client = ClusterClient::new(admin)
            .map(|c| c.with_timeout(Duration::from_secs(5)))
            .map_err(|e| format!("no admin address to ask ({admin:?}): {e}"));
        let cache = [
            Endpoint::Brokers,
            Endpoint::Reassignments,
            Endpoint::Throttles,
            Endpoint::Groups,
            Endpoint::Plans,
        ]
        .into_iter()
        .map(|e| (e, Mutex::new(None)))
        .collect();
        Arc::new(Self { client, cache })
    }

    /// The JSON of `e`: fresh from the cache, or gathered now.
    pub async fn answer(&self, e: Endpoint) -> Result<Bytes, Failure> {
        let Some(slot) = self.cache.get(&e) else {
            // Every endpoint has a slot (`new`); a missing one is gathered uncached.
            return self.gather(e).await;
        };
        let mut slot = slot.lock().await;
        if let Some((at, body)) = slot.as_ref() {
            if at.elapsed() < FRESH {
                return Ok(body.clone());
            }
        }
        let body = self.gather(e).await?;
        *slot = Some((Instant::now(), body.clone()));
        Ok(body)
    }

    fn client(&self) -> Result<&ClusterClient, Failure> {
        self.client.as_ref().map_err(Clone::clone)
    }

    async fn gather(&self, e: Endpoint) -> Result<Bytes, Failure> {
        let work = async {
            match e {
                Endpoint::Brokers => to_json(&self.brokers().await?),
                Endpoint::Reassignments => to_json(&json::moves(&self.reassignments(true).await?)),
                Endpoint::Throttles => to_json(&self.throttles().await?),
                Endpoint::Groups => to_json(&self.groups().await?),
                Endpoint::Plans => to_json(&list_plans(self.client()?).await?),
            }
        };
        tokio::time::timeout(GATHER_TIMEOUT, work)
            .await
            .unwrap_or_else(|_| Err(format!("the cluster gave no answer within {GATHER_TIMEOUT:?}")))
    }

    async fn cluster(&self) -> Result<DescribeClusterResponse, Failure> {
        self.client()?
            .admin_call(|mut a| async move { a.describe_cluster(DescribeClusterRequest {}).await })
            .await
            .map_err(|e| format!("DescribeCluster: {e}"))
    }

    async fn topics(&self) -> Result<DescribeTopicsResponse, Failure> {
        let r = self
            .client()?
            .admin_call(|mut a| async move { a.describe_topics(DescribeTopicsRequest { topics: vec![] }).await })
            .await
            .map_err(|e| format!("DescribeTopics: {e}"))?;
        refused("DescribeTopics", r.error_code, &r.error_message)?;
        Ok(r)
    }

    /// DescribeConfigs of `resources`, a request per [`CONFIGS_PER_REQUEST`].
    async fn configs(&self, resources: Vec<ConfigResource>) -> Result<DescribeConfigsResponse, Failure> {
        let mut out = DescribeConfigsResponse::default();
        for chunk in resources.chunks(CONFIGS_PER_REQUEST) {
            let req = DescribeConfigsRequest {
                resources: chunk.to_vec(),
            };
            let r = self
                .client()?
                .admin_call(|mut a| {
                    let req = req.clone();
                    async move { a.describe_configs(req).await }
                })
                .await
                .map_err(|e| format!("DescribeConfigs: {e}"))?;
            refused("DescribeConfigs", r.error_code, &r.error_message)?;
            out.results.extend(r.results);
        }
        Ok(out)
    }

    async fn reassignments(&self, with_progress: bool) -> Result<ListPartitionReassignmentsResponse, Failure> {
        let req = ListPartitionReassignmentsRequest {
            partitions: vec![],
            with_progress,
        };
        let r = self
            .client()?
            .admin_call(|mut a| {
                let req = req.clone();
                async move { a.list_partition_reassignments(req).await }
            })
            .await
            .map_err(|e| format!("ListPartitionReassignments: {e}"))?;
        refused("ListPartitionReassignments", r.error_code, &r.error_message)?;
        Ok(r)
    }

    async fn brokers(&self) -> Result<json::BrokersView, Failure> {
        let cluster = self.cluster().await?;
        let req = AdminDescribeLogDirsRequest {
            brokers: vec![],
            topics: vec![],
        };
        let dirs = self
            .client()?
            .admin_call(|mut a| {
                let req = req.clone();
                async move { a.describe_log_dirs(req).await }
            })
            .await
            .map_err(|e| format!("DescribeLogDirs: {e}"))?;
        refused("DescribeLogDirs", dirs.error_code, &dirs.error_message)?;
        let topics = self.topics().await?;
        let configs = self.configs(broker_resources(&cluster)).await?;
        Ok(json::brokers(&cluster, &dirs, &topics, &configs))
    }

    async fn throttles(&self) -> Result<json::ThrottlesView, Failure> {
        let cluster = self.cluster().await?;
        let topics = self.topics().await?;
        let mut resources = broker_resources(&cluster);
        resources.extend(json::throttled_topics(&topics).into_iter().map(|name| ConfigResource {
            r#type: config_resource::Type::Topic as i32,
            name,
        }));
        let configs = self.configs(resources).await?;
        let moving = self.reassignments(false).await?;
        Ok(json::throttles(&configs, &moving))
    }

    async fn groups(&self) -> Result<groups::GroupsView, Failure> {
        let cluster = self.cluster().await?;
        let topics = self.topics().await?;
        Ok(groups::gather(&cluster.brokers, &json::partition_leaders(&topics)).await)
    }
}

/// Every registered broker's config resource and the cluster-wide default's.
fn broker_resources(cluster: &DescribeClusterResponse) -> Vec<ConfigResource> {
    let mut ids: Vec<i32> = cluster.brokers.iter().map(|b| b.id).collect();
    ids.sort_unstable();
    ids.into_iter()
        .map(|id| id.to_string())
        .chain(std::iter::once(String::new()))
        .map(|name| ConfigResource {
            r#type: config_resource::Type::Broker as i32,
            name,
        })
        .collect()
}

/// A whole-request refusal as a failure.
fn refused(what: &str, code: i32, message: &str) -> Result<(), Failure> {
    if code == 0 {
        Ok(())
    } else {
        Err(format!("{what}: {message} (error code {code})"))
    }
}

fn to_json<T: Serialize>(v: &T) -> Result<Bytes, Failure> {
    serde_json::to_vec(v)
        .map(Bytes::from)
        .map_err(|e| format!("encoding the answer: {e}"))
}

/// The controller's move plans.
///
/// The controller's plans with their moves (ListPlans), as the plans page shows them.
async fn list_plans(client: &ClusterClient) -> Result<json::PlansView, Failure> {
    let req = ListPlansRequest {
        id: None,
        with_moves: true,
    };
    let r = client
        .admin_call(|mut a| async move { a.list_plans(req).await })
        .await
        .map_err(|e| format!("ListPlans: {e}"))?;
    refused("ListPlans", r.error_code, &r.error_message)?;
    Ok(json::plans(&r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_five_endpoints_are_known() {
        assert_eq!(Endpoint::from_path("/api/brokers"), Some(Endpoint::Brokers));
        assert_eq!(Endpoint::from_path("/api/reassignments"), Some(Endpoint::Reassignments));
        assert_eq!(Endpoint::from_path("/api/throttles"), Some(Endpoint::Throttles));
        assert_eq!(Endpoint::from_path("/api/groups"), Some(Endpoint::Groups));
        assert_eq!(Endpoint::from_path("/api/plans"), Some(Endpoint::Plans));
        for p in [
            "/api",
            "/api/",
            "/api/brokers/",
            "/api/brokers/1",
            "/API/brokers",
            "/api/../metrics",
        ] {
            assert_eq!(Endpoint::from_path(p), None, "{p}");
        }
    }

    #[test]
    fn broker_resources_name_every_broker_then_the_default() {
        let cluster = DescribeClusterResponse {
            brokers: vec![
                BrokerRegistration {
                    id: 3,
                    ..Default::default()
                },
                BrokerRegistration {
                    id: 1,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let names: Vec<String> = broker_resources(&cluster).into_iter().map(|r| r.name).collect();
        assert_eq!(names, ["1", "3", ""]);
    }

    #[tokio::test]
    async fn without_an_admin_address_every_endpoint_answers_why() {
        let api = Api::new(&[]);
        for e in [
            Endpoint::Brokers,
            Endpoint::Reassignments,
            Endpoint::Throttles,
            Endpoint::Groups,
            Endpoint::Plans,
        ] {
            let why = api.answer(e).await.unwrap_err();
            assert!(why.contains("no admin address"), "{e:?}: {why}");
        }
    }
}
