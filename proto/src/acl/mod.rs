//! ACLs as Kafka models them: the model with Kafka's wire codes and names (`model`), the
//! authorizer's decision (`authorize`), DescribeAcls/DeleteAcls filters (`filter`), and the
//! ZooKeeper-era storage format that Ferry's metastore keeps too (`zk`). Pure: no I/O.

mod authorize;
mod filter;
mod model;
mod zk;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_authorize;

pub use authorize::{Authorizer, Decision, Reason};
pub use filter::{AccessControlEntryFilter, AclBindingFilter, ResourcePatternFilter};
pub use model::{
    AccessControlEntry, AclBinding, Operation, PatternType, Permission, ResourcePattern, ResourceType, CLUSTER_NAME,
    WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
};
pub use zk::{
    bindings_from_kvs, decode_acls, encode_acls, key_of, parse_key, LITERAL_ROOT, MAX_ENTRIES, PREFIXED_ROOT,
};

use crate::errors::{ErrorCode, Refusal};

/// Why an ACL, a filter, a key or a stored value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    /// A field's value is refused; `field` is Kafka's name for it (`operation`,
    /// `acls[2].principal`).
    #[error("{field}: {reason}")]
    Invalid {
        /// The field.
        field: String,
        /// Why.
        reason: String,
    },
    /// A stored value is not JSON.
    #[error("value: not JSON: {0}")]
    Json(String),
    /// A key is not where an ACL is stored.
    #[error("key {0} is not an ACL key")]
    Key(String),
}

impl AclError {
    /// A refused field.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        AclError::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The field refused, if the error is about one.
    pub fn field(&self) -> Option<&str> {
        match self {
            AclError::Invalid { field, .. } => Some(field),
            AclError::Json(_) => Some("value"),
            AclError::Key(_) => None,
        }
    }
}

impl From<AclError> for Refusal {
    /// Kafka answers a malformed ACL or filter with INVALID_REQUEST.
    fn from(e: AclError) -> Self {
        Refusal::new(ErrorCode::INVALID_REQUEST, e.to_string())
    }
}

/// A value quoted for an error message, cut short so that a huge input makes a short message.
pub(crate) fn shown(s: &str) -> String {
    const MAX: usize = 64;
    if s.len() <= MAX {
        return format!("{s:?}");
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}...", &s[..end])
}
