//! `ferry throttles`: sets or removes replication throttles by hand (AlterThrottles), on
//! brokers (rates) and topics (throttled replicas). With `--auto-remove`, Ferry removes them
//! once the reassignments in their scope are done; without, they stay until changed here.

use anyhow::bail;
use clap::Args;
use proto::ferry::{AlterThrottlesRequest, BrokerThrottle, TopicThrottle};

use crate::Bootstrap;

/// Flags of `ferry throttles`.
#[derive(Args)]
pub struct ThrottlesArgs {
    #[command(flatten)]
    bootstrap: Bootstrap,
    /// Brokers whose rates to set, comma-separated.
    #[arg(long, value_delimiter = ',')]
    brokers: Vec<i32>,
    /// Leader-side rate in bytes/s on those brokers; 0 removes it.
    #[arg(long)]
    leader_rate: Option<i64>,
    /// Follower-side rate in bytes/s on those brokers; 0 removes it.
    #[arg(long)]
    follower_rate: Option<i64>,
    /// The topic whose throttled replicas to set.
    #[arg(long)]
    topic: Option<String>,
    /// Leader-side throttled replicas of the topic: `*` or `partition:broker,...`; "" removes.
    #[arg(long)]
    leader_replicas: Option<String>,
    /// Follower-side throttled replicas of the topic: `*` or `partition:broker,...`; "" removes.
    #[arg(long)]
    follower_replicas: Option<String>,
    /// Let Ferry remove what this sets once the reassignments in its scope are done.
    #[arg(long)]
    auto_remove: bool,
    /// Check only; change nothing.
    #[arg(long)]
    validate_only: bool,
}

/// Runs `ferry throttles`.
pub async fn run(a: ThrottlesArgs) -> anyhow::Result<()> {
    if a.brokers.is_empty() && a.topic.is_none() {
        bail!(
            "give --brokers with --leader-rate/--follower-rate, or --topic with --leader-replicas/--follower-replicas"
        );
    }
    if !a.brokers.is_empty() && a.leader_rate.is_none() && a.follower_rate.is_none() {
        bail!("--brokers needs --leader-rate or --follower-rate");
    }
    if a.topic.is_some() && a.leader_replicas.is_none() && a.follower_replicas.is_none() {
        bail!("--topic needs --leader-replicas or --follower-replicas");
    }
    let req = AlterThrottlesRequest {
        brokers: a
            .brokers
            .iter()
            .map(|b| BrokerThrottle {
                broker: *b,
                leader_rate: a.leader_rate,
                follower_rate: a.follower_rate,
                auto_remove: a.auto_remove,
            })
            .collect(),
        topics: a
            .topic
            .iter()
            .map(|t| TopicThrottle {
                topic: t.clone(),
                leader_replicas: a.leader_replicas.clone(),
                follower_replicas: a.follower_replicas.clone(),
                auto_remove: a.auto_remove,
            })
            .collect(),
        validate_only: a.validate_only,
    };
    let c = a.bootstrap.cluster()?;
    let r = c
        .admin_call(|mut x| {
            let req = req.clone();
            async move { x.alter_throttles(req).await }
        })
        .await?;
    if r.error_code != 0 {
        bail!("{} (error code {})", r.error_message, r.error_code);
    }
    let how = if a.auto_remove {
        "; Ferry removes them when the reassignments they cover are done"
    } else {
        "; they stay until changed"
    };
    let what = if a.validate_only { "are valid" } else { "were set" };
    println!("The throttles {what}{how}.");
    Ok(())
}
