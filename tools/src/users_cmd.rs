//! `ferry users`: SCRAM credentials over the Security service, for the first users of a
//! cluster whose Kafka listeners already ask for a login (Kafka's `kafka-storage format
//! --add-scram` does the same job). It needs the cluster credential
//! (`--cluster-credential-file`). The password is salted and derived here; only the keys
//! leave this process.

use anyhow::{anyhow, bail, Context};
use broker::kafka::scram_credentials::{mechanism_code, mechanism_of};
use broker::sasl::{Mechanism, ScramCredential};
use clap::{Args, Subcommand};
use proto::ferry::security_client::SecurityClient;
use proto::ferry::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest, ScramDeletion, ScramUpsertion,
};
use tonic::codegen::InterceptedService;

use crate::Bootstrap;

/// Flags of `ferry users`.
#[derive(Args)]
pub struct UsersArgs {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[command(subcommand)]
    command: UsersCommand,
}

#[derive(Subcommand)]
enum UsersCommand {
    /// Set a user's SCRAM credential (like kafka-configs --add-config 'SCRAM-SHA-512=[password=P]').
    SetScram {
        /// The user.
        user: String,
        /// The password.
        #[arg(long)]
        password: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
        /// PBKDF2 iterations, 4096 to 16384.
        #[arg(long, default_value_t = 4096)]
        iterations: u32,
    },
    /// Remove a user's SCRAM credential of one mechanism.
    DeleteScram {
        /// The user.
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long)]
        mechanism: String,
    },
    /// List users and their SCRAM mechanisms (all users when none is named).
    Describe {
        /// The users.
        users: Vec<String>,
    },
}

fn scram(name: &str) -> anyhow::Result<(Mechanism, i32)> {
    let m = Mechanism::parse(name).map_err(|e| anyhow!("--mechanism: {e}"))?;
    let code = mechanism_code(m).ok_or_else(|| anyhow!("--mechanism: {name} is not a SCRAM mechanism"))?;
    Ok((m, code))
}

/// Runs `ferry users`.
pub async fn run(a: UsersArgs) -> anyhow::Result<()> {
    let addr = a
        .bootstrap
        .endpoints()
        .into_iter()
        .next()
        .context("--bootstrap-server names no node")?;
    // The Security service answers only callers with the cluster credential.
    let meta = a.bootstrap.client()?;
    let mut client = security_client(&addr, &meta)?;
    match a.command {
        UsersCommand::SetScram {
            user,
            password,
            mechanism,
            iterations,
        } => {
            set_scram(&mut client, &user, &password, &mechanism, iterations).await?;
            println!("set {mechanism} credential of {user}");
        }
        UsersCommand::DeleteScram { user, mechanism } => {
            let (_, code) = scram(&mechanism)?;
            let req = AlterUserScramCredentialsRequest {
                deletions: vec![ScramDeletion {
                    user: user.clone(),
                    mechanism: code,
                }],
                upsertions: vec![],
            };
            alter(&mut client, req).await?;
            println!("deleted {mechanism} credential of {user}");
        }
        UsersCommand::Describe { users } => {
            let req = DescribeUserScramCredentialsRequest {
                all: users.is_empty(),
                users,
            };
            let r = client.describe_user_scram_credentials(req).await?.into_inner();
            if r.error_code != 0 {
                bail!("{}", r.error_message);
            }
            for u in r.results {
                if u.error_code != 0 {
                    println!("{}: {}", u.user, u.error_message);
                    continue;
                }
                let mechs: Vec<String> = u
                    .credentials
                    .iter()
                    .map(|c| {
                        let name = mechanism_of(c.mechanism).map_or("?", |m| m.name());
                        format!("{name}(iterations={})", c.iterations)
                    })
                    .collect();
                println!("{} {}", u.user, mechs.join(" "));
            }
        }
    }
    Ok(())
}

/// A Security service client of the node at `addr`, carrying `meta`'s cluster credential.
pub type Security = SecurityClient<InterceptedService<tonic::transport::Channel, metastore::CredentialInterceptor>>;

/// A client of the Security service at `addr` that sends `meta`'s credential.
pub fn security_client(addr: &str, meta: &metastore::Client) -> anyhow::Result<Security> {
    let channel = metastore::peers::channel(addr).with_context(|| format!("--bootstrap-server {addr}"))?;
    Ok(SecurityClient::with_interceptor(channel, meta.credential_interceptor()))
}

/// Sets `user`'s credential of `mechanism` to `password`, salted here with a random salt.
pub async fn set_scram(
    client: &mut Security,
    user: &str,
    password: &str,
    mechanism: &str,
    iterations: u32,
) -> anyhow::Result<()> {
    let (m, code) = scram(mechanism)?;
    let salt: [u8; 32] = rand::random();
    let c = ScramCredential::derive(m, password, &salt, iterations).map_err(|e| anyhow!("{e}"))?;
    let req = AlterUserScramCredentialsRequest {
        deletions: vec![],
        upsertions: vec![ScramUpsertion {
            user: user.to_string(),
            credential: Some(proto::ferry::ScramCredential {
                mechanism: code,
                salt: c.salt.into(),
                stored_key: c.stored_key.into(),
                server_key: c.server_key.into(),
                iterations: iterations as i32,
            }),
        }],
    };
    alter(client, req).await
}

async fn alter(client: &mut Security, req: AlterUserScramCredentialsRequest) -> anyhow::Result<()> {
    let r = client.alter_user_scram_credentials(req).await?.into_inner();
    for u in r.results {
        if u.error_code != 0 {
            bail!("{}: {}", u.user, u.error_message);
        }
    }
    Ok(())
}
