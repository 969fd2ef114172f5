//! A broker's config levels below its own dynamic configs: the cluster-wide dynamic default and
//! the working dir that relative dir names resolve against. Plain state, held by `BrokerCore`
//! and kept up to date by the driver in `broker_configs`.

use std::collections::HashMap;

use parking_lot::RwLock;

/// The levels below a broker's own dynamic configs, and its working dir.
#[derive(Debug)]
pub struct ConfigLevels {
    /// The cluster-wide dynamic default (`/config/brokers/<default>`).
    pub default: RwLock<HashMap<String, String>>,
    /// The working dir, against which relative dir names resolve (as the broker's own log dirs
    /// given relative did).
    pub work_dir: String,
    /// Bumped when the effective cordon changes, for the registration to publish it.
    pub cordon_changed: tokio::sync::watch::Sender<u64>,
}

impl ConfigLevels {
    /// Levels with nothing dynamic yet, resolving dir names against the process's working dir.
    pub fn new() -> Self {
        Self {
            default: RwLock::new(HashMap::new()),
            work_dir: work_dir(),
            cordon_changed: tokio::sync::watch::channel(0).0,
        }
    }
}

impl Default for ConfigLevels {
    fn default() -> Self {
        Self::new()
    }
}

/// The process's working dir ("/" when it cannot be read).
pub fn work_dir() -> String {
    std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".to_string())
}
