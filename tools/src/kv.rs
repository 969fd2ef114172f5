//! `ferry kv`: put, get, range, del, txn and watch against the metastore.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use proto::metastore as pb;
use serde::Deserialize;

use crate::ExitCode;

/// Flags of `ferry kv`.
#[derive(Args)]
pub struct KvArgs {
    #[command(flatten)]
    bootstrap: crate::Bootstrap,
    #[command(subcommand)]
    cmd: KvCmd,
}

#[derive(Subcommand)]
enum KvCmd {
    /// Set a key.
    Put {
        /// The key, a /-path.
        key: String,
        /// The value.
        value: String,
        /// Bind the key to this lease.
        #[arg(long, default_value_t = 0)]
        lease: u64,
    },
    /// Print a key's value.
    Get {
        /// The key.
        key: String,
        /// Read the answering node's replica without a quorum round.
        #[arg(long)]
        serializable: bool,
        /// Print the revisions too.
        #[arg(long, short)]
        verbose: bool,
    },
    /// List keys under a prefix, one `KEY<TAB>VALUE` line each.
    Range {
        /// The prefix, a /-path.
        prefix: String,
        /// At most this many keys (0 = all).
        #[arg(long, default_value_t = 0)]
        limit: u64,
        /// Print keys only.
        #[arg(long)]
        keys_only: bool,
        /// Read without a quorum round.
        #[arg(long)]
        serializable: bool,
    },
    /// Delete a key, or every key under a prefix with --prefix.
    Del {
        /// The key or prefix.
        key: String,
        /// Treat KEY as a prefix.
        #[arg(long)]
        prefix: bool,
    },
    /// Run a transaction given as JSON (a file, or stdin with `-`).
    ///
    /// {"guards":[{"key":"/a","version":1},{"key":"/b","absent":true}],
    ///  "ops":[{"put":{"key":"/a","value":"x"}},{"delete":{"key":"/b"}},{"delete_prefix":{"prefix":"/c/"}}]}
    Txn {
        /// The JSON file, or `-` for stdin.
        #[arg(default_value = "-")]
        file: PathBuf,
    },
    /// Print changes under a prefix as they commit.
    Watch {
        /// The prefix.
        prefix: String,
        /// Start from this revision (0 = from now).
        #[arg(long, default_value_t = 0)]
        from_revision: u64,
        /// Stop after this many events (0 = never).
        #[arg(long, default_value_t = 0)]
        max_events: u64,
    },
    /// Grant a lease and print its id.
    LeaseGrant {
        /// Time to live in milliseconds.
        ttl_ms: u64,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TxnFile {
    #[serde(default)]
    guards: Vec<GuardJson>,
    #[serde(default)]
    ops: Vec<OpJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GuardJson {
    key: String,
    exists: Option<bool>,
    absent: Option<bool>,
    version: Option<u64>,
    mod_revision: Option<u64>,
    value: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum OpJson {
    Put {
        key: String,
        value: String,
        #[serde(default)]
        lease: u64,
    },
    Delete {
        key: String,
    },
    DeletePrefix {
        prefix: String,
    },
}

fn txn_request(text: &str) -> anyhow::Result<pb::TxnRequest> {
    let f: TxnFile = serde_json::from_str(text).context("transaction JSON")?;
    let mut guards = Vec::new();
    for (i, g) in f.guards.into_iter().enumerate() {
        use pb::guard::Check;
        let checks: Vec<Check> = [
            g.exists.map(Check::Exists),
            g.absent.map(Check::Absent),
            g.version.map(Check::Version),
            g.mod_revision.map(Check::ModRevision),
            g.value.map(|v| Check::Value(v.into())),
        ]
        .into_iter()
        .flatten()
        .collect();
        if checks.len() != 1 {
            bail!("guards[{i}]: give exactly one of exists, absent, version, mod_revision, value");
        }
        guards.push(pb::Guard {
            key: g.key,
            check: checks.into_iter().next(),
        });
    }
    let ops = f
        .ops
        .into_iter()
        .map(|o| pb::Op {
            op: Some(match o {
                OpJson::Put { key, value, lease } => pb::op::Op::Put(pb::PutOp {
                    key,
                    value: value.into(),
                    lease,
                }),
                OpJson::Delete { key } => pb::op::Op::Delete(pb::DeleteOp { key }),
                OpJson::DeletePrefix { prefix } => pb::op::Op::DeletePrefix(pb::DeletePrefixOp { prefix }),
            }),
        })
        .collect();
    Ok(pb::TxnRequest {
        guards,
        ops,
        request_id: String::new(),
    })
}

fn show(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

/// Runs a `ferry kv` command.
pub async fn run(a: KvArgs) -> anyhow::Result<()> {
    let client = a.bootstrap.client()?;
    match a.cmd {
        KvCmd::Put { key, value, lease } => {
            let rev = client.put_with_lease(&key, value, lease).await?;
            println!("OK revision {rev}");
        }
        KvCmd::Get {
            key,
            serializable,
            verbose,
        } => get(&client, &key, serializable, verbose).await?,
        KvCmd::Range {
            prefix,
            limit,
            keys_only,
            serializable,
        } => {
            let req = pb::RangeRequest {
                prefix,
                limit,
                keys_only,
                serializable,
                ..Default::default()
            };
            range(&client, req).await?;
        }
        KvCmd::Del { key, prefix } => {
            let n = if prefix {
                client.delete_prefix(&key).await?
            } else {
                client.delete(&key).await?
            };
            println!("deleted {n}");
        }
        KvCmd::Txn { file } => txn(&client, &file).await?,
        KvCmd::Watch {
            prefix,
            from_revision,
            max_events,
        } => watch(&client, &prefix, from_revision, max_events).await?,
        KvCmd::LeaseGrant { ttl_ms } => {
            println!("{}", client.lease_grant(ttl_ms).await?);
        }
    }
    Ok(())
}

/// `kv get`: the value, or with `--verbose` the key, value and revisions; exit 1 if absent.
async fn get(client: &metastore::Client, key: &str, serializable: bool, verbose: bool) -> anyhow::Result<()> {
    match client.get_opt(key, serializable).await? {
        Some(kv) if verbose => println!(
            "{}\t{}\tcreate_revision={} mod_revision={} version={} lease={}",
            kv.key,
            show(&kv.value),
            kv.create_revision,
            kv.mod_revision,
            kv.version,
            kv.lease
        ),
        Some(kv) => println!("{}", show(&kv.value)),
        None => {
            eprintln!("error: key {key} not found");
            return Err(ExitCode(1).into());
        }
    }
    Ok(())
}

/// `kv range`: one line per key, and a hint when the limit cut the answer.
async fn range(client: &metastore::Client, req: pb::RangeRequest) -> anyhow::Result<()> {
    let keys_only = req.keys_only;
    let r = client.range_req(req).await?;
    for kv in r.kvs {
        if keys_only {
            println!("{}", kv.key);
        } else {
            println!("{}\t{}", kv.key, show(&kv.value));
        }
    }
    if r.more {
        eprintln!("(more keys match; raise --limit)");
    }
    Ok(())
}

/// `kv txn`: runs the file's transaction; exit 2 if a guard failed.
async fn txn(client: &metastore::Client, file: &Path) -> anyhow::Result<()> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading stdin")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    let r = client.txn(txn_request(&text)?).await?;
    let rev = r.header.map_or(0, |h| h.revision);
    if r.succeeded {
        println!("SUCCEEDED revision {rev} deleted {}", r.deleted);
    } else {
        println!("FAILED {}", r.failed_reason);
        return Err(ExitCode(2).into());
    }
    Ok(())
}

/// `kv watch`: prints each change under the prefix, until `max_events` (0 = never).
async fn watch(client: &metastore::Client, prefix: &str, from_revision: u64, max_events: u64) -> anyhow::Result<()> {
    let mut rx = client.watch(prefix, from_revision);
    let mut seen = 0u64;
    while let Some(msg) = rx.recv().await {
        let msg = msg?;
        for ev in msg.events {
            let kv = ev.kv.unwrap_or_default();
            if ev.kind == pb::watch_event::Kind::Delete as i32 {
                println!("{} DELETE {}", msg.revision, kv.key);
            } else {
                println!("{} PUT {}\t{}", msg.revision, kv.key, show(&kv.value));
            }
            seen += 1;
            if max_events > 0 && seen >= max_events {
                return Ok(());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txn_json_parses_and_rejects_ambiguous_guards() {
        let r = txn_request(r#"{"guards":[{"key":"/a","version":1}],"ops":[{"put":{"key":"/a","value":"x"}},{"delete_prefix":{"prefix":"/c/"}}]}"#).unwrap();
        assert_eq!(r.guards.len(), 1);
        assert_eq!(r.ops.len(), 2);
        let e = txn_request(r#"{"guards":[{"key":"/a","version":1,"absent":true}]}"#).unwrap_err();
        assert!(e.to_string().contains("guards[0]"));
        assert!(txn_request(r#"{"ops":[{"bogus":{}}]}"#).is_err());
    }
}
