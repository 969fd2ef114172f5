//! This broker's config levels and the driver that follows them: its own dynamic configs
//! (`BrokerCore::dynamic_config`, `/config/brokers/<id>`), the cluster-wide dynamic default
//! (`/config/brokers/<default>`) and the node's static configs. Which level wins is
//! `proto::broker_config`'s; which dirs a `cordoned.log.dirs` names is `proto::cordon`'s. The
//! effective cordon goes to the log dirs (no new replica there) and to the registration.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use metastore::Client;
use prost::Message;
use proto::broker_config::Layers;
use proto::cordon::BrokerDirs;
use proto::keys;
use proto::topic_config::CORDONED_LOG_DIRS;

use crate::replica_manager::BrokerCore;

pub use crate::config_levels::{work_dir, ConfigLevels};

/// This broker's dirs as registered: absolute, in configured order.
fn dir_names(core: &BrokerCore) -> Vec<String> {
    core.dirs
        .dirs()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect()
}

impl BrokerCore {
    /// The effective value of broker config `name` here: the broker's own dynamic value, the
    /// dynamic default, the static config, Kafka's default, the first that is set.
    pub fn effective_config(&self, name: &str) -> Option<String> {
        let own = self.dynamic_config.read();
        let default = self.levels.default.read();
        proto::broker_config::effective(
            name,
            Layers {
                broker: Some(&own),
                default: &default,
                static_: &self.config.static_configs,
            },
        )
    }

    /// `replica.alter.log.dirs.io.max.bytes.per.second`, when set on this broker (at any level).
    pub fn alter_log_dirs_rate(&self) -> Option<u64> {
        self.effective_config(proto::topic_config::ALTER_LOG_DIRS_RATE)
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|r| *r > 0)
    }

    /// The dirs the effective `cordoned.log.dirs` cordons here, and the names it lists that are
    /// no dir of this broker (a default may name another broker's dirs).
    pub fn cordon(&self) -> proto::cordon::CordonSet {
        let value = self.effective_config(CORDONED_LOG_DIRS).unwrap_or_default();
        let dirs = dir_names(self);
        proto::cordon::cordoned(
            BrokerDirs {
                dirs: &dirs,
                work_dir: &self.levels.work_dir,
            },
            &value,
        )
    }

    /// Hands the effective cordon to the log dirs, and tells the registration when it changed.
    pub fn apply_cordon(&self) {
        let set: BTreeSet<PathBuf> = self.cordon().dirs.into_iter().map(PathBuf::from).collect();
        if self.dirs.set_cordoned(set.clone()) {
            tracing::info!(broker = self.id, cordoned = ?set, "cordoned log dirs changed");
            self.levels.cordon_changed.send_modify(|n| *n += 1);
        }
    }
}

/// Follows this broker's dynamic configs and the cluster-wide default, and applies the cordon
/// they give after each change.
pub(crate) async fn follow_config(core: std::sync::Arc<BrokerCore>, client: Client) {
    let own_key = keys::broker_config(core.id);
    let mut events = client.follow(keys::BROKER_CONFIGS);
    while let Some(ev) = events.recv().await {
        {
            let mut own = core.dynamic_config.write();
            let mut default = core.levels.default.write();
            if ev.is_reset() {
                own.clear();
                default.clear();
            }
            for (k, v, _) in ev.changes() {
                let level = if k == own_key {
                    &mut *own
                } else if k == keys::BROKER_DEFAULT_CONFIG {
                    &mut *default
                } else {
                    continue; // another broker's
                };
                *level = v
                    .and_then(|v| proto::ferry::BrokerConfigRecord::decode(v).ok())
                    .map(|r| r.config)
                    .unwrap_or_default();
            }
        }
        core.apply_cordon();
    }
}

/// Checks the node's static broker configs before the broker opens: names and values as a
/// dynamic change is checked, and every dir its `cordoned.log.dirs` names one of `dirs`
/// (absolute) resolved against `work_dir`. The error names the config or the dir.
pub fn check_static(config: &HashMap<String, String>, dirs: &[String], work_dir: &str) -> Result<(), String> {
    proto::topic_config::validate_broker(config)?;
    if let Some(v) = config.get(CORDONED_LOG_DIRS) {
        let unknown = proto::cordon::cordoned(BrokerDirs { dirs, work_dir }, v).unknown;
        if let Some(d) = unknown.first() {
            return Err(format!(
                "{CORDONED_LOG_DIRS}: {d:?} is not one of this broker's log dirs"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_configs_are_checked_like_dynamic_ones_and_name_unknown_dirs() {
        let dirs = vec!["/w/d1".to_string(), "/w/d2".to_string()];
        let cfg = |k: &str, v: &str| HashMap::from([(k.to_string(), v.to_string())]);
        assert!(check_static(&cfg(CORDONED_LOG_DIRS, "d1"), &dirs, "/w").is_ok());
        assert!(check_static(&cfg(CORDONED_LOG_DIRS, "*"), &dirs, "/w").is_ok());
        let e = check_static(&cfg(CORDONED_LOG_DIRS, "d3"), &dirs, "/w").unwrap_err();
        assert!(e.contains("\"d3\""), "{e}");
        assert!(check_static(&cfg("log.dirs", "/x"), &dirs, "/w").is_err());
    }
}
