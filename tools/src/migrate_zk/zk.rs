//! Reads the znodes the import needs from ZooKeeper, many requests in flight at once. Only
//! reads: nothing here writes to ZooKeeper.

use std::time::Duration;

use futures::{stream, StreamExt, TryStreamExt};
use zookeeper_client as zkc;

use super::parse::{self, invalid, Invalid, RawSnapshot, Znode};
use super::security;

/// Requests kept in flight, pipelined on one connection (ZooKeeper's default
/// globalOutstandingLimit is 1000).
const IN_FLIGHT: usize = 1000;

/// A ZooKeeper failure, naming the znode.
#[derive(Debug, thiserror::Error)]
pub enum ZkError {
    /// No session could be opened.
    #[error("cannot connect to ZooKeeper at {addr}: {source}")]
    Connect {
        /// The connect string.
        addr: String,
        /// Why.
        source: zkc::Error,
    },
    /// No session within the time allowed.
    #[error("cannot connect to ZooKeeper at {0}: no session within 15 s")]
    ConnectTimeout(String),
    /// A read failed.
    #[error("{path}: reading from ZooKeeper failed: {source}")]
    Read {
        /// The znode.
        path: String,
        /// Why.
        source: zkc::Error,
    },
}

/// Opens a session; `addr` is HOST:PORT[,HOST:PORT...][/chroot].
pub async fn connect(addr: &str) -> Result<zkc::Client, ZkError> {
    let connecting = zkc::Client::connector()
        .with_session_timeout(Duration::from_secs(30))
        .connect(addr);
    match tokio::time::timeout(Duration::from_secs(15), connecting).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(source)) => Err(ZkError::Connect {
            addr: addr.to_string(),
            source,
        }),
        Err(_) => Err(ZkError::ConnectTimeout(addr.to_string())),
    }
}

/// One read's result, or the problem of a znode whose ZooKeeper ACL hides it from this session.
type Outcome<T> = Result<T, Invalid>;

/// Reads each path's data; a missing znode is `None`. With `tolerate_refusal`, a znode that
/// ZooKeeper's ACL hides from this session (NoAuth) is a problem of its own instead of an error.
async fn get_each(
    zk: &zkc::Client,
    paths: Vec<String>,
    tolerate_refusal: bool,
) -> Result<Vec<(String, Outcome<Option<Znode>>)>, ZkError> {
    stream::iter(paths)
        .map(|path| {
            let f = zk.get_data(&path);
            async move {
                match f.await {
                    Ok((data, stat)) => Ok((
                        path,
                        Ok(Some(Znode {
                            data,
                            version: stat.version,
                            ctime_ms: stat.ctime,
                        })),
                    )),
                    Err(zkc::Error::NoNode) => Ok((path, Ok(None))),
                    Err(zkc::Error::NoAuth) if tolerate_refusal => {
                        let refused = invalid(&path, REFUSED);
                        Ok((path, Err(refused)))
                    }
                    Err(source) => Err(ZkError::Read { path, source }),
                }
            }
        })
        .buffered(IN_FLIGHT)
        .try_collect()
        .await
}

/// Why a znode ZooKeeper would not show is left out.
const REFUSED: &str = "ZooKeeper refused to read it (NoAuth: its ZooKeeper ACL does not let this session read it)";

/// Reads each path's data; a missing znode is `None`.
async fn get_all(zk: &zkc::Client, paths: Vec<String>) -> Result<Vec<(String, Option<Znode>)>, ZkError> {
    Ok(get_each(zk, paths, false)
        .await?
        .into_iter()
        .filter_map(|(p, n)| Some((p, n.ok()?)))
        .collect())
}

/// Lists each parent's children as full paths; a missing parent has none. With
/// `tolerate_refusal`, a parent ZooKeeper refuses to list is a problem instead of an error.
async fn children_each(
    zk: &zkc::Client,
    parents: Vec<String>,
    tolerate_refusal: bool,
) -> Result<(Vec<String>, Vec<Invalid>), ZkError> {
    let lists: Vec<Outcome<Vec<String>>> = stream::iter(parents)
        .map(|parent| {
            let f = zk.list_children(&parent);
            async move {
                match f.await {
                    Ok(names) => Ok(Ok(names.into_iter().map(|n| format!("{parent}/{n}")).collect())),
                    Err(zkc::Error::NoNode) => Ok(Ok(vec![])),
                    Err(zkc::Error::NoAuth) if tolerate_refusal => Ok(Err(invalid(&parent, REFUSED))),
                    Err(source) => Err(ZkError::Read { path: parent, source }),
                }
            }
        })
        .buffered(IN_FLIGHT)
        .try_collect()
        .await?;
    let (mut paths, mut refused) = (Vec::new(), Vec::new());
    for l in lists {
        match l {
            Ok(children) => paths.extend(children),
            Err(e) => refused.push(e),
        }
    }
    Ok((paths, refused))
}

/// Lists each parent's children as full paths; a missing parent has none.
async fn children_of(zk: &zkc::Client, parents: Vec<String>) -> Result<Vec<String>, ZkError> {
    Ok(children_each(zk, parents, false).await?.0)
}

/// Reads the ACL znodes (`<root>/<Type>/<name>` under both roots, as Kafka's authorizer reads
/// them: not the change notifications beside them) and the users' config znodes. A znode
/// ZooKeeper refuses to show is returned as a problem and the rest is still read: Kafka makes
/// `/config/users` readable by its brokers only when `zookeeper.set.acl` is on.
pub async fn read_security(zk: &zkc::Client) -> Result<(RawSnapshot, Vec<Invalid>), ZkError> {
    let roots = [security::LITERAL_ACLS, security::PREFIXED_ACLS]
        .map(String::from)
        .to_vec();
    let (types, mut refused) = children_each(zk, roots, true).await?;
    let (mut paths, more) = children_each(zk, types, true).await?;
    refused.extend(more);
    let (users, more) = children_each(zk, vec![security::USERS.to_string()], true).await?;
    refused.extend(more);
    paths.extend(users);
    let mut raw = RawSnapshot::new();
    for (path, got) in get_each(zk, paths, true).await? {
        match got {
            Ok(Some(n)) => {
                raw.insert(path, n);
            }
            Ok(None) => {}
            Err(e) => refused.push(e),
        }
    }
    Ok((raw, refused))
}

/// Reads every znode the import uses into a snapshot.
pub async fn read(zk: &zkc::Client) -> Result<RawSnapshot, ZkError> {
    let mut paths: Vec<String> = [
        parse::CLUSTER_ID,
        parse::CONTROLLER_EPOCH,
        parse::REASSIGN_PARTITIONS,
        parse::REASSIGN_CANCEL,
        parse::THROTTLED_REPLICAS_REMOVAL,
        parse::THROTTLED_RATES_REMOVAL,
    ]
    .map(String::from)
    .to_vec();
    let parents = [
        parse::BROKER_IDS,
        parse::TOPICS,
        parse::TOPIC_CONFIGS,
        parse::BROKER_CONFIGS,
        parse::REASSIGNMENT_REQUESTS,
        parse::DELETE_TOPICS,
    ]
    .map(String::from)
    .to_vec();
    let listed = children_of(zk, parents).await?;
    let topic_prefix = format!("{}/", parse::TOPICS);
    let topics: Vec<String> = listed
        .iter()
        .filter(|p| p.starts_with(&topic_prefix))
        .map(|p| format!("{p}/partitions"))
        .collect();
    let partitions = children_of(zk, topics).await?;
    paths.extend(listed);
    paths.extend(partitions.into_iter().map(|p| format!("{p}/state")));
    Ok(get_all(zk, paths)
        .await?
        .into_iter()
        .filter_map(|(p, n)| Some((p, n?)))
        .collect())
}
