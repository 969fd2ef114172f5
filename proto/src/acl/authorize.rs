//! The authorizer: ACLs indexed by resource type and name, and Kafka's decision for a request.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Bound;

use super::filter::AclBindingFilter;
use super::model::{
    AccessControlEntry, AclBinding, Operation, PatternType, Permission, ResourcePattern, ResourceType,
    WILDCARD_RESOURCE,
};

/// Entries by pattern name.
type ByName = BTreeMap<String, BTreeSet<AccessControlEntry>>;

/// The ACLs on one resource type.
#[derive(Debug, Clone, Default)]
struct TypeAcls {
    /// Literal patterns, `*` among them.
    literal: ByName,
    /// Prefixed patterns, walked by range (see `prefixes_of`).
    prefixed: ByName,
}

impl TypeAcls {
    fn names_mut(&mut self, pattern_type: PatternType) -> Option<&mut ByName> {
        match pattern_type {
            PatternType::Literal => Some(&mut self.literal),
            PatternType::Prefixed => Some(&mut self.prefixed),
            _ => None,
        }
    }
}

/// ACLs indexed for checks, with Kafka's super users and its `allow.everyone.if.no.acl.found`.
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    index: BTreeMap<ResourceType, TypeAcls>,
    /// Principals (`User:admin`) allowed everything, whatever the ACLs say.
    pub super_users: BTreeSet<String>,
    /// Whether a resource that no ACL matches is open to everyone.
    pub allow_everyone_if_no_acl_found: bool,
}

/// Why a request was allowed or denied, for an audit line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// The principal is a super user.
    SuperUser,
    /// This ACL decided: a matching DENY, or else a matching ALLOW.
    Acl(AclBinding),
    /// No ACL matches the resource; `allow_everyone_if_no_acl_found` decided.
    NoAclFound,
    /// ACLs match the resource, but none allows this principal the operation from this host.
    NoAllowMatched,
    /// The request names no concrete operation or resource type (`Any`, `Unknown`).
    InvalidAction,
}

/// An authorization decision and the rule that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Which rule decided.
    pub reason: Reason,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.allowed { "ALLOWED" } else { "DENIED" })?;
        match &self.reason {
            Reason::SuperUser => f.write_str(" (super user)"),
            Reason::Acl(b) => write!(f, " by ACL {b}"),
            Reason::NoAclFound => write!(
                f,
                " (no ACL matches the resource; allow.everyone.if.no.acl.found={})",
                self.allowed
            ),
            Reason::NoAllowMatched => f.write_str(" (no ACL allows it)"),
            Reason::InvalidAction => f.write_str(" (not a concrete operation or resource type)"),
        }
    }
}

impl Authorizer {
    /// An authorizer over `bindings`; those neither literal nor prefixed could match nothing
    /// and are dropped.
    pub fn new(
        bindings: impl IntoIterator<Item = AclBinding>,
        super_users: BTreeSet<String>,
        allow_everyone_if_no_acl_found: bool,
    ) -> Self {
        let mut a = Authorizer {
            index: BTreeMap::new(),
            super_users,
            allow_everyone_if_no_acl_found,
        };
        for b in bindings {
            a.add(b);
        }
        a
    }

    /// Adds a binding; false when it was there already or cannot match anything.
    pub fn add(&mut self, binding: AclBinding) -> bool {
        let AclBinding { pattern, entry } = binding;
        if !matches!(pattern.pattern_type, PatternType::Literal | PatternType::Prefixed) {
            return false;
        }
        let acls = self.index.entry(pattern.resource_type).or_default();
        match acls.names_mut(pattern.pattern_type) {
            Some(names) => names.entry(pattern.name).or_default().insert(entry),
            None => false,
        }
    }

    /// Removes a binding; false when it was not there.
    pub fn remove(&mut self, binding: &AclBinding) -> bool {
        let p = &binding.pattern;
        let Some(names) = self
            .index
            .get_mut(&p.resource_type)
            .and_then(|acls| acls.names_mut(p.pattern_type))
        else {
            return false;
        };
        let Some(entries) = names.get_mut(&p.name) else {
            return false;
        };
        let removed = entries.remove(&binding.entry);
        if entries.is_empty() {
            names.remove(&p.name);
        }
        removed
    }

    /// Every binding, in a stable order (type, literal before prefixed, name, entry).
    pub fn bindings(&self) -> impl Iterator<Item = AclBinding> + '_ {
        self.index.iter().flat_map(|(&rt, acls)| {
            let literal = acls.literal.iter().map(move |n| (PatternType::Literal, n));
            let prefixed = acls.prefixed.iter().map(move |n| (PatternType::Prefixed, n));
            literal.chain(prefixed).flat_map(move |(pt, (name, entries))| {
                entries
                    .iter()
                    .map(move |e| AclBinding::new(ResourcePattern::new(rt, name.clone(), pt), e.clone()))
            })
        })
    }

    /// The bindings `filter` matches (DescribeAcls; DeleteAcls removes these).
    pub fn matching(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.bindings().filter(|b| filter.matches(b)).collect()
    }

    /// The number of bindings.
    pub fn len(&self) -> usize {
        self.index
            .values()
            .flat_map(|a| a.literal.values().chain(a.prefixed.values()))
            .map(BTreeSet::len)
            .sum()
    }

    /// Whether there are no bindings.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `principal` at `host` may do `op` on the resource `name` of `resource_type`, as
    /// Kafka's authorizer decides: super users always; else a matching DENY wins; else a
    /// matching ALLOW of the operation or of one that implies it; else, when no ACL at all
    /// matches the resource, `allow_everyone_if_no_acl_found`.
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> Decision {
        let decide = |allowed, reason| Decision { allowed, reason };
        if !op.is_concrete() || !resource_type.is_concrete() {
            return decide(false, Reason::InvalidAction);
        }
        if self.super_users.contains(principal) {
            return decide(true, Reason::SuperUser);
        }
        let applicable = self.applicable(resource_type, name);
        if applicable.is_empty() {
            return decide(self.allow_everyone_if_no_acl_found, Reason::NoAclFound);
        }
        let matching = |perm: Permission, ok: fn(Operation, Operation) -> bool| {
            applicable.iter().find_map(|&(pt, pattern_name, entries)| {
                entries
                    .iter()
                    .find(|e| {
                        e.permission == perm
                            && ok(e.operation, op)
                            && e.applies_to_principal(principal)
                            && e.applies_to_host(host)
                    })
                    .map(|e| AclBinding::new(ResourcePattern::new(resource_type, pattern_name, pt), e.clone()))
            })
        };
        if let Some(b) = matching(Permission::Deny, Operation::denies) {
            return decide(false, Reason::Acl(b));
        }
        if let Some(b) = matching(Permission::Allow, Operation::allows) {
            return decide(true, Reason::Acl(b));
        }
        decide(false, Reason::NoAllowMatched)
    }

    /// Whether there may be a resource of `resource_type` that `principal` at `host` may do
    /// `op` on (Kafka's `authorizeByResourceType`, for idempotent writes and listings). Only
    /// the operation itself and `All` count, as in Kafka; an allowed name or prefix counts
    /// unless a deny of the same literal name or of a prefix of it covers it.
    pub fn authorize_any(&self, principal: &str, host: &str, op: Operation, resource_type: ResourceType) -> bool {
        if !op.is_concrete() || !resource_type.is_concrete() {
            return false;
        }
        if self.super_users.contains(principal) {
            return true;
        }
        let Some(acls) = self.index.get(&resource_type) else {
            return self.allow_everyone_if_no_acl_found;
        };
        let mut deny = [BTreeSet::new(), BTreeSet::new()];
        let mut allow = [BTreeSet::new(), BTreeSet::new()];
        for (slot, names) in [&acls.literal, &acls.prefixed].into_iter().enumerate() {
            for (name, entries) in names {
                for e in entries {
                    if !(e.applies_to_principal(principal) && e.applies_to_host(host) && e.operation.denies(op)) {
                        continue;
                    }
                    match e.permission {
                        Permission::Deny => deny[slot].insert(name.as_str()),
                        Permission::Allow => allow[slot].insert(name.as_str()),
                        _ => false,
                    };
                }
            }
        }
        let [deny_literal, deny_prefix] = deny;
        let [allow_literal, allow_prefix] = allow;
        if deny_literal.contains(WILDCARD_RESOURCE) {
            return false;
        }
        // Kafka's ZooKeeper authorizer answers yes here outright; but a literal `*` ACL (for
        // anyone) means every resource has an ACL, so none is open to everyone — as Kafka's
        // KRaft authorizer finds.
        if self.allow_everyone_if_no_acl_found && !acls.literal.contains_key(WILDCARD_RESOURCE) {
            return true;
        }
        if allow_literal.contains(WILDCARD_RESOURCE) {
            return true;
        }
        let dominated = |name: &str| has_prefix_in(name, &deny_prefix);
        allow_literal.iter().any(|n| !deny_literal.contains(n) && !dominated(n))
            || allow_prefix.iter().any(|p| !dominated(p))
    }

    /// The ACL sets whose pattern covers the resource: the literal name, the literal `*`, and
    /// every prefixed pattern that is a prefix of the name.
    fn applicable<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &str,
    ) -> Vec<(PatternType, &'a str, &'a BTreeSet<AccessControlEntry>)> {
        let mut out = Vec::new();
        let Some(acls) = self.index.get(&resource_type) else {
            return out;
        };
        let mut literal = |n: &str| {
            if let Some((k, entries)) = acls.literal.get_key_value(n) {
                out.push((PatternType::Literal, k.as_str(), entries));
            }
        };
        literal(name);
        if name != WILDCARD_RESOURCE {
            literal(WILDCARD_RESOURCE);
        }
        for (k, entries) in prefixes_of(&acls.prefixed, name) {
            out.push((PatternType::Prefixed, k, entries));
        }
        out
    }
}

/// The entries of `map` whose key is a prefix of `name`, longest first, found by walking down
/// from `name` and jumping over runs of keys that are not prefixes: after a key that shares
/// only `c` leading bytes with `name`, every prefix still to find is at most `name[..c]`.
fn prefixes_of<'a, V>(map: &'a BTreeMap<String, V>, name: &str) -> Vec<(&'a str, &'a V)> {
    let mut out = Vec::new();
    let mut upper: Bound<&str> = Bound::Included(name);
    while let Some((key, value)) = map.range::<str, _>((Bound::Unbounded, upper)).next_back() {
        if name.starts_with(key.as_str()) {
            out.push((key.as_str(), value));
            upper = Bound::Excluded(key.as_str());
        } else {
            // `name[..c]` is a proper prefix of `key`, so below it: each step goes lower.
            let mut c = key.bytes().zip(name.bytes()).take_while(|(a, b)| a == b).count();
            while !name.is_char_boundary(c) {
                c -= 1;
            }
            upper = Bound::Included(&name[..c]);
        }
    }
    out
}

/// Whether some prefix of `name` (itself included) is in `prefixes`.
fn has_prefix_in(name: &str, prefixes: &BTreeSet<&str>) -> bool {
    (0..=name.len()).any(|i| name.is_char_boundary(i) && prefixes.contains(&name[..i]))
}
