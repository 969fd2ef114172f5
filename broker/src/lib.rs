//! The broker: replicated partition logs on one or more log dirs, produce and fetch, and
//! replication driven by the metadata in the metastore. Pure parts (the log, ISR decisions) are
//! tested on their own; `node`, `fetcher` and `service` are the drivers around them.

pub mod auth;
pub mod broker_configs;
pub mod byte_counters;
pub mod change_signal;
pub mod checkpoint_file;
pub mod cleaner;
pub mod client;
pub mod config_levels;
pub mod controller_channels;
pub mod coordinator;
pub mod dir_checkpoints;
pub mod dir_choice;
pub mod dir_move_recovery;
pub mod dir_moves;
pub mod fetch;
pub mod fetch_session;
pub mod fetcher;
pub mod folder_removal;
pub mod future_log;
pub mod isr;
pub mod isr_driver;
pub mod kafka;
pub mod lock_order;
pub mod log_dir_move;
pub mod log_dir_requests;
pub mod log_dirs;
pub mod meta_properties;
pub mod metrics;
pub mod named_dir;
pub mod node;
pub mod partition_log;
pub mod produce;
pub mod quota;
pub mod reconcile_plan;
pub mod record_batch;
pub mod registration;
pub mod replica;
pub mod replica_create;
pub mod replica_manager;
pub mod retention;
pub mod retention_config;
pub mod sasl;
pub mod service;
pub mod throttle;

pub use client::{ClusterClient, DataError};
pub use node::{Broker, BrokerConfig, BrokerHandle};
pub use replica_manager::DataConfig;
