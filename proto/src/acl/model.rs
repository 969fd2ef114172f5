//! The ACL model: Kafka's enums with their wire codes and names, resource patterns, entries,
//! bindings, and the checks CreateAcls makes on a binding before storing it.

use std::fmt;

use super::AclError;

/// The literal resource name that matches every resource of its type.
pub const WILDCARD_RESOURCE: &str = "*";
/// The principal that matches every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The host that matches every host.
pub const WILDCARD_HOST: &str = "*";
/// The one name a Cluster resource may have.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// Defines one of Kafka's ACL enums: its wire codes, its stored name and its printed name.
macro_rules! kafka_enum {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $code:literal, $wire:literal, $cli:literal; )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(i8)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $code, )+
        }

        impl $name {
            /// Every value, in code order.
            pub const VALUES: &'static [$name] = &[$($name::$variant),+];

            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                self as i8
            }

            /// The value of a wire code; `Unknown` for a code Kafka does not define, as Kafka
            /// reads one (a request's checks then refuse it).
            pub fn from_code(code: i8) -> Self {
                match code {
                    $( $code => $name::$variant, )+
                    _ => $name::Unknown,
                }
            }

            /// Kafka's name as stored JSON and ZooKeeper paths spell it ("DescribeConfigs").
            pub fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $wire, )+
                }
            }

            /// Kafka's name as kafka-acls prints it ("DESCRIBE_CONFIGS").
            pub fn cli_name(self) -> &'static str {
                match self {
                    $( $name::$variant => $cli, )+
                }
            }

            /// Parses either name, the printed one in any case, as Kafka does; `None` when
            /// neither matches.
            pub fn from_name(s: &str) -> Option<Self> {
                Self::VALUES
                    .iter()
                    .copied()
                    .find(|v| v.name() == s || v.cli_name().eq_ignore_ascii_case(s))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.cli_name())
            }
        }
    };
}

kafka_enum! {
    /// The type of resource an ACL protects.
    ResourceType {
        /// A code this side does not know.
        Unknown = 0, "Unknown", "UNKNOWN";
        /// In a filter: every type.
        Any = 1, "Any", "ANY";
        /// A topic.
        Topic = 2, "Topic", "TOPIC";
        /// A consumer group.
        Group = 3, "Group", "GROUP";
        /// The cluster (named `kafka-cluster`).
        Cluster = 4, "Cluster", "CLUSTER";
        /// A transactional id.
        TransactionalId = 5, "TransactionalId", "TRANSACTIONAL_ID";
        /// A delegation token.
        DelegationToken = 6, "DelegationToken", "DELEGATION_TOKEN";
        /// A user (for tokens created on its behalf).
        User = 7, "User", "USER";
    }
}

kafka_enum! {
    /// How a pattern's name matches resource names.
    PatternType {
        /// A code this side does not know.
        Unknown = 0, "Unknown", "UNKNOWN";
        /// In a filter: patterns of every type.
        Any = 1, "Any", "ANY";
        /// In a filter: every pattern that would match the filter's name.
        Match = 2, "Match", "MATCH";
        /// The name itself, or every name when it is `*`.
        Literal = 3, "Literal", "LITERAL";
        /// Every name that starts with the pattern's name.
        Prefixed = 4, "Prefixed", "PREFIXED";
    }
}

kafka_enum! {
    /// An operation on a resource.
    Operation {
        /// A code this side does not know.
        Unknown = 0, "Unknown", "UNKNOWN";
        /// In a filter: every operation.
        Any = 1, "Any", "ANY";
        /// Every operation.
        All = 2, "All", "ALL";
        /// Read (fetch, join a group).
        Read = 3, "Read", "READ";
        /// Write (produce).
        Write = 4, "Write", "WRITE";
        /// Create.
        Create = 5, "Create", "CREATE";
        /// Delete.
        Delete = 6, "Delete", "DELETE";
        /// Alter.
        Alter = 7, "Alter", "ALTER";
        /// Describe.
        Describe = 8, "Describe", "DESCRIBE";
        /// Inter-broker actions.
        ClusterAction = 9, "ClusterAction", "CLUSTER_ACTION";
        /// Describe configs.
        DescribeConfigs = 10, "DescribeConfigs", "DESCRIBE_CONFIGS";
        /// Alter configs.
        AlterConfigs = 11, "AlterConfigs", "ALTER_CONFIGS";
        /// Idempotent produce.
        IdempotentWrite = 12, "IdempotentWrite", "IDEMPOTENT_WRITE";
        /// Create delegation tokens.
        CreateTokens = 13, "CreateTokens", "CREATE_TOKENS";
        /// Describe delegation tokens.
        DescribeTokens = 14, "DescribeTokens", "DESCRIBE_TOKENS";
    }
}

kafka_enum! {
    /// Whether an ACL allows or denies.
    Permission {
        /// A code this side does not know.
        Unknown = 0, "Unknown", "UNKNOWN";
        /// In a filter: both.
        Any = 1, "Any", "ANY";
        /// Denies; a matching deny wins over every allow.
        Deny = 2, "Deny", "DENY";
        /// Allows.
        Allow = 3, "Allow", "ALLOW";
    }
}

impl ResourceType {
    /// The operations an ACL on this type may name besides `All` (Kafka's table; Group's config
    /// operations came with group configs). Empty for `Unknown` and `Any`.
    pub fn operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Unknown | ResourceType::Any => &[],
        }
    }

    /// Whether this names one kind of resource (not `Unknown` or `Any`).
    pub fn is_concrete(self) -> bool {
        !matches!(self, ResourceType::Unknown | ResourceType::Any)
    }
}

impl Operation {
    /// Whether an ACL on `resource_type` may name this operation.
    pub fn valid_for(self, resource_type: ResourceType) -> bool {
        (self == Operation::All && resource_type.is_concrete()) || resource_type.operations().contains(&self)
    }

    /// Whether an ALLOW of this operation allows `requested` too: itself, `All`, and Kafka's
    /// implications (DESCRIBE by READ, WRITE, DELETE, ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS).
    pub fn allows(self, requested: Operation) -> bool {
        use Operation::*;
        self == requested
            || self == All
            || (requested == Describe && matches!(self, Read | Write | Delete | Alter))
            || (requested == DescribeConfigs && self == AlterConfigs)
    }

    /// Whether a DENY of this operation denies `requested`: itself or `All`, no implication.
    pub fn denies(self, requested: Operation) -> bool {
        self == requested || self == Operation::All
    }

    /// Whether this names one operation or `All` (not `Unknown` or `Any`).
    pub fn is_concrete(self) -> bool {
        !matches!(self, Operation::Unknown | Operation::Any)
    }
}

/// The resources an ACL applies to: a type, a name and how the name matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourcePattern {
    /// The type of resource.
    pub resource_type: ResourceType,
    /// The name, a prefix when `pattern_type` is `Prefixed`.
    pub name: String,
    /// How `name` matches.
    pub pattern_type: PatternType,
}

impl ResourcePattern {
    /// A pattern of any type.
    pub fn new(resource_type: ResourceType, name: impl Into<String>, pattern_type: PatternType) -> Self {
        Self {
            resource_type,
            name: name.into(),
            pattern_type,
        }
    }

    /// A literal pattern.
    pub fn literal(resource_type: ResourceType, name: impl Into<String>) -> Self {
        Self::new(resource_type, name, PatternType::Literal)
    }

    /// A prefixed pattern.
    pub fn prefixed(resource_type: ResourceType, name: impl Into<String>) -> Self {
        Self::new(resource_type, name, PatternType::Prefixed)
    }

    /// Whether the pattern covers the resource `name` of `resource_type`.
    pub fn covers(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                PatternType::Literal => self.name == name || self.name == WILDCARD_RESOURCE,
                PatternType::Prefixed => name.starts_with(self.name.as_str()),
                _ => false,
            }
    }
}

impl fmt::Display for ResourcePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ResourcePattern(resourceType={}, name={}, patternType={})",
            self.resource_type, self.name, self.pattern_type
        )
    }
}

/// Who may or may not do what from where.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccessControlEntry {
    /// `Type:name`, e.g. `User:alice`; `User:*` for everyone.
    pub principal: String,
    /// A client address, or `*` for every host.
    pub host: String,
    /// The operation.
    pub operation: Operation,
    /// Allow or deny.
    pub permission: Permission,
}

impl AccessControlEntry {
    /// An entry.
    pub fn new(
        principal: impl Into<String>,
        host: impl Into<String>,
        operation: Operation,
        permission: Permission,
    ) -> Self {
        Self {
            principal: principal.into(),
            host: host.into(),
            operation,
            permission,
        }
    }

    /// Whether the entry names `principal` or everyone.
    pub fn applies_to_principal(&self, principal: &str) -> bool {
        self.principal == principal || self.principal == WILDCARD_PRINCIPAL
    }

    /// Whether the entry names `host` or every host.
    pub fn applies_to_host(&self, host: &str) -> bool {
        self.host == host || self.host == WILDCARD_HOST
    }
}

impl fmt::Display for AccessControlEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(principal={}, host={}, operation={}, permissionType={})",
            self.principal, self.host, self.operation, self.permission
        )
    }
}

/// An ACL: an entry bound to a resource pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    /// The resources.
    pub pattern: ResourcePattern,
    /// The entry.
    pub entry: AccessControlEntry,
}

impl AclBinding {
    /// A binding.
    pub fn new(pattern: ResourcePattern, entry: AccessControlEntry) -> Self {
        Self { pattern, entry }
    }

    /// Checks a binding to be created as Kafka's CreateAcls does; the error names the field.
    pub fn validate(&self) -> Result<(), AclError> {
        let p = &self.pattern;
        let e = &self.entry;
        if !p.resource_type.is_concrete() {
            return Err(AclError::invalid(
                "resourceType",
                format!("{} is not a resource type an ACL can name", p.resource_type),
            ));
        }
        if !matches!(p.pattern_type, PatternType::Literal | PatternType::Prefixed) {
            return Err(AclError::invalid(
                "patternType",
                format!("{} is not LITERAL or PREFIXED", p.pattern_type),
            ));
        }
        if p.name.is_empty() {
            return Err(AclError::invalid("resourceName", "empty"));
        }
        if p.resource_type == ResourceType::Cluster && p.name != CLUSTER_NAME {
            return Err(AclError::invalid(
                "resourceName",
                format!("the only name of a CLUSTER resource is {CLUSTER_NAME}"),
            ));
        }
        check_principal(&e.principal).map_err(|why| AclError::invalid("principal", why))?;
        if !e.operation.is_concrete() {
            return Err(AclError::invalid(
                "operation",
                format!("{} is not an operation an ACL can name", e.operation),
            ));
        }
        if !e.operation.valid_for(p.resource_type) {
            return Err(AclError::invalid(
                "operation",
                format!("{} is not an operation on {}", e.operation, p.resource_type),
            ));
        }
        if !matches!(e.permission, Permission::Allow | Permission::Deny) {
            return Err(AclError::invalid(
                "permissionType",
                format!("{} is not ALLOW or DENY", e.permission),
            ));
        }
        Ok(())
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.pattern, self.entry)
    }
}

/// Checks that a principal reads `Type:name` with neither part empty.
pub(crate) fn check_principal(principal: &str) -> Result<(), String> {
    match principal.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(()),
        _ => Err(format!("{} is not of the form Type:name", super::shown(principal))),
    }
}
