//! Filters of DescribeAcls and DeleteAcls, matched as Kafka matches an `AclBindingFilter`.

use super::model::{
    AccessControlEntry, AclBinding, Operation, PatternType, Permission, ResourcePattern, ResourceType,
    WILDCARD_RESOURCE,
};
use super::AclError;

/// Which resource patterns a filter selects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourcePatternFilter {
    /// A type, or `Any`.
    pub resource_type: ResourceType,
    /// A name, or `None` for every name.
    pub name: Option<String>,
    /// `Any` (every type, the same name), `Match` (the patterns that would match the name),
    /// `Literal` or `Prefixed` (that type, the same name).
    pub pattern_type: PatternType,
}

/// Which entries a filter selects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AccessControlEntryFilter {
    /// A principal, or `None` for every principal (`User:*` matches only itself).
    pub principal: Option<String>,
    /// A host, or `None` for every host (`*` matches only itself).
    pub host: Option<String>,
    /// An operation, or `Any`.
    pub operation: Operation,
    /// A permission, or `Any`.
    pub permission: Permission,
}

/// A filter over bindings: both halves must match.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AclBindingFilter {
    /// The pattern half.
    pub pattern: ResourcePatternFilter,
    /// The entry half.
    pub entry: AccessControlEntryFilter,
}

impl ResourcePatternFilter {
    /// Matches every pattern.
    pub const ANY: Self = Self {
        resource_type: ResourceType::Any,
        name: None,
        pattern_type: PatternType::Any,
    };

    /// Whether the filter selects `p`.
    pub fn matches(&self, p: &ResourcePattern) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != p.resource_type {
            return false;
        }
        let exact_type = !matches!(self.pattern_type, PatternType::Any | PatternType::Match);
        if exact_type && self.pattern_type != p.pattern_type {
            return false;
        }
        let Some(name) = &self.name else {
            return true;
        };
        if self.pattern_type != PatternType::Match {
            return *name == p.name;
        }
        match p.pattern_type {
            PatternType::Literal => *name == p.name || p.name == WILDCARD_RESOURCE,
            PatternType::Prefixed => name.starts_with(p.name.as_str()),
            _ => false,
        }
    }

    /// Refuses `Unknown` codes, naming the field.
    pub fn validate(&self) -> Result<(), AclError> {
        if self.resource_type == ResourceType::Unknown {
            return Err(AclError::invalid("resourceType", "UNKNOWN"));
        }
        if self.pattern_type == PatternType::Unknown {
            return Err(AclError::invalid("patternType", "UNKNOWN"));
        }
        Ok(())
    }
}

impl AccessControlEntryFilter {
    /// Matches every entry.
    pub const ANY: Self = Self {
        principal: None,
        host: None,
        operation: Operation::Any,
        permission: Permission::Any,
    };

    /// Whether the filter selects `e`.
    pub fn matches(&self, e: &AccessControlEntry) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == e.principal)
            && self.host.as_ref().is_none_or(|h| *h == e.host)
            && (self.operation == Operation::Any || self.operation == e.operation)
            && (self.permission == Permission::Any || self.permission == e.permission)
    }

    /// Refuses `Unknown` codes, naming the field.
    pub fn validate(&self) -> Result<(), AclError> {
        if self.operation == Operation::Unknown {
            return Err(AclError::invalid("operation", "UNKNOWN"));
        }
        if self.permission == Permission::Unknown {
            return Err(AclError::invalid("permissionType", "UNKNOWN"));
        }
        Ok(())
    }
}

impl AclBindingFilter {
    /// Matches every binding.
    pub const ANY: Self = Self {
        pattern: ResourcePatternFilter::ANY,
        entry: AccessControlEntryFilter::ANY,
    };

    /// Whether the filter selects `b`.
    pub fn matches(&self, b: &AclBinding) -> bool {
        self.pattern.matches(&b.pattern) && self.entry.matches(&b.entry)
    }

    /// Refuses `Unknown` codes in either half, naming the field (DescribeAcls and DeleteAcls
    /// answer INVALID_REQUEST).
    pub fn validate(&self) -> Result<(), AclError> {
        self.pattern.validate()?;
        self.entry.validate()
    }
}
