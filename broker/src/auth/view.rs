//! The credentials and ACLs this broker checks, followed from the metastore
//! (`/config/scram/`, `/kafka-acl…`): every login and every request is decided from here, with
//! no call to the quorum.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use prost::Message;
use proto::acl::{self, AclBinding, Authorizer, Decision, Operation, ResourceType};
use proto::ferry::ScramUserRecord;
use proto::keys;

use super::ListenerSecurity;
use crate::kafka::scram_credentials::mechanism_code;
use crate::sasl::{CredentialLookup, Mechanism, ScramCredential};

/// What this broker knows of users and ACLs.
pub struct SecurityView {
    settings: ListenerSecurity,
    users: parking_lot::RwLock<HashMap<String, ScramUserRecord>>,
    acl_keys: parking_lot::Mutex<BTreeMap<String, Vec<u8>>>,
    authorizer: parking_lot::RwLock<Arc<Authorizer>>,
}

impl SecurityView {
    /// An empty view under `settings`.
    pub fn new(settings: ListenerSecurity) -> Self {
        let authorizer = Authorizer::new(
            Vec::new(),
            settings.super_users.clone(),
            settings.allow_everyone_if_no_acl_found,
        );
        Self {
            settings,
            users: Default::default(),
            acl_keys: Default::default(),
            authorizer: parking_lot::RwLock::new(Arc::new(authorizer)),
        }
    }

    /// The listener's settings.
    pub fn settings(&self) -> &ListenerSecurity {
        &self.settings
    }

    /// Takes followed changes of the users' credentials (`reset`: they replace all).
    pub fn apply_users<'a>(&self, reset: bool, changes: impl Iterator<Item = (&'a str, Option<&'a [u8]>)>) {
        let mut users = self.users.write();
        if reset {
            users.clear();
        }
        for (key, value) in changes {
            let Some(user) = keys::parse_scram_user(key) else {
                continue;
            };
            match value.map(ScramUserRecord::decode) {
                Some(Ok(r)) => {
                    users.insert(user, r);
                }
                Some(Err(e)) => {
                    tracing::warn!(key, error = %e, "SCRAM credentials that do not decode; the user cannot log in");
                    users.remove(&user);
                }
                None => {
                    users.remove(&user);
                }
            }
        }
    }

    /// Takes followed changes of the ACL keys and rebuilds the authorizer from them.
    pub fn apply_acls<'a>(&self, reset: bool, changes: impl Iterator<Item = (&'a str, Option<&'a [u8]>)>) {
        let mut stored = self.acl_keys.lock();
        if reset {
            stored.clear();
        }
        for (key, value) in changes {
            match value {
                Some(v) => stored.insert(key.to_string(), v.to_vec()),
                None => stored.remove(key),
            };
        }
        let (bindings, bad): (Vec<AclBinding>, _) = acl::bindings_from_kvs(stored.iter());
        for (key, e) in bad {
            tracing::warn!(key, error = %e, "stored ACLs that do not decode are not applied");
        }
        let a = Authorizer::new(
            bindings,
            self.settings.super_users.clone(),
            self.settings.allow_everyone_if_no_acl_found,
        );
        *self.authorizer.write() = Arc::new(a);
    }

    /// Whether `principal` from `host` may do `op` on the resource; always when no authorizer
    /// is configured.
    pub fn allowed(&self, principal: &str, host: &str, op: Operation, rtype: ResourceType, name: &str) -> bool {
        self.decide(principal, host, op, rtype, name).is_none_or(|d| d.allowed)
    }

    /// The authorizer's decision, or `None` when no authorizer is configured.
    pub fn decide(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        rtype: ResourceType,
        name: &str,
    ) -> Option<Decision> {
        if !self.settings.authorizer {
            return None;
        }
        let a = self.authorizer.read().clone();
        Some(a.authorize(principal, host, op, rtype, name))
    }

    /// Whether `principal` may do `op` on some resource of `rtype` (Kafka's
    /// `authorizeByResourceType`); always when no authorizer is configured.
    pub fn allowed_any(&self, principal: &str, host: &str, op: Operation, rtype: ResourceType) -> bool {
        if !self.settings.authorizer {
            return true;
        }
        let a = self.authorizer.read().clone();
        a.authorize_any(principal, host, op, rtype)
    }
}

impl CredentialLookup for SecurityView {
    fn scram(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential> {
        let code = mechanism_code(mechanism)?;
        let users = self.users.read();
        let c = users.get(user)?.credentials.iter().find(|c| c.mechanism == code)?;
        Some(ScramCredential {
            salt: c.salt.to_vec(),
            stored_key: c.stored_key.to_vec(),
            server_key: c.server_key.to_vec(),
            iterations: u32::try_from(c.iterations).ok()?,
        })
    }
}

/// Follows the users' credentials and the ACLs into `view` until the task is aborted.
pub async fn follow(client: metastore::Client, view: Arc<SecurityView>) {
    let mut users = client.follow(keys::SCRAM_USERS);
    let mut acls = client.follow(keys::ACLS);
    loop {
        tokio::select! {
            ev = users.recv() => {
                let Some(ev) = ev else { return };
                view.apply_users(ev.is_reset(), ev.changes().into_iter().map(|(k, v, _)| (k, v)));
            }
            ev = acls.recv() => {
                let Some(ev) = ev else { return };
                view.apply_acls(ev.is_reset(), ev.changes().into_iter().map(|(k, v, _)| (k, v)));
            }
        }
    }
}
