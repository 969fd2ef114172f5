//! `ferry metastore members`: list and change the voters and learners.

use clap::{Args, Subcommand};
use proto::metastore as pb;

/// Flags of `ferry metastore`.
#[derive(Args)]
pub struct MetastoreArgs {
    #[command(flatten)]
    bootstrap: crate::Bootstrap,
    #[command(subcommand)]
    cmd: MetastoreCmd,
}

#[derive(Subcommand)]
enum MetastoreCmd {
    /// Membership of the Raft group.
    Members {
        #[command(subcommand)]
        cmd: MembersCmd,
    },
    /// Each node's Raft state, applied index and key count.
    Status,
}

#[derive(Subcommand)]
enum MembersCmd {
    /// Print each member: id, address, voter or learner.
    List,
    /// Add a node (started with `ferry node --join`) as a learner; returns once it caught up.
    AddLearner {
        /// Its id.
        #[arg(long)]
        id: u64,
        /// Its HOST:PORT.
        #[arg(long)]
        addr: String,
    },
    /// Make a learner a voter.
    Promote {
        /// Its id.
        #[arg(long)]
        id: u64,
    },
    /// Remove a voter or learner.
    Remove {
        /// Its id.
        #[arg(long)]
        id: u64,
    },
}

fn print_members(members: &[pb::Member]) {
    for m in members {
        println!("{}\t{}\t{}", m.id, m.addr, if m.voter { "voter" } else { "learner" });
    }
}

/// Runs a `ferry metastore` command.
pub async fn run(a: MetastoreArgs) -> anyhow::Result<()> {
    let client = a.bootstrap.client()?;
    match a.cmd {
        MetastoreCmd::Members { cmd } => {
            let members = match cmd {
                MembersCmd::List => client.member_list().await?,
                MembersCmd::AddLearner { id, addr } => client.member_add_learner(id, &addr).await?,
                MembersCmd::Promote { id } => client.member_promote(id).await?,
                MembersCmd::Remove { id } => client.member_remove(id).await?,
            };
            print_members(&members);
        }
        MetastoreCmd::Status => {
            for (i, ep) in client.endpoints().iter().enumerate() {
                match client.status_of(i).await {
                    Ok(s) => {
                        let h = s.header.unwrap_or_default();
                        println!(
                            "{ep}\tid={} state={} leader={} term={} applied={} revision={} keys={}",
                            h.member_id, s.state, h.leader_id, h.raft_term, s.applied_index, h.revision, s.keys
                        );
                    }
                    Err(e) => println!("{ep}\terror: {e}"),
                }
            }
        }
    }
    Ok(())
}
