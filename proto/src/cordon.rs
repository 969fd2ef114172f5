//! Cordoned log dirs, Kafka's `cordoned.log.dirs` (KIP-1066): a comma list of a broker's log
//! dirs, or `*` for all of them, that take no new replica. The one home of "is this dir (or this
//! broker) cordoned": the broker resolves its effective value with [`cordoned`] and publishes the
//! result in its registration (`BrokerRegistration.cordoned_log_dirs`, as Kafka's broker reports
//! its cordoned dirs to the controller); placement asks [`takes_new_replicas`] of it.
//!
//! A name is resolved as the broker resolves its `log.dirs`: a relative name against the broker's
//! working dir, then lexically normalized, so `data/d1` and `/abs/path/data/d1` name the same dir
//! (Kafka's KAFKA-20901 compared the raw strings).

use std::collections::BTreeSet;

/// The value that cordons every dir of a broker.
pub const ALL: &str = "*";
/// Most entries one value may list.
pub const MAX_ENTRIES: usize = 1024;
/// The longest entry, in bytes.
pub const MAX_ENTRY_BYTES: usize = 4096;

/// A broker's dirs as a cordon resolves against them.
#[derive(Debug, Clone, Copy)]
pub struct BrokerDirs<'a> {
    /// Its log dirs, absolute, as registered.
    pub dirs: &'a [String],
    /// Its working dir, against which relative names resolve.
    pub work_dir: &'a str,
}

/// Which of a broker's dirs a value cordons, and the names it lists that are none of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CordonSet {
    /// The cordoned dirs, in the broker's absolute spelling.
    pub dirs: BTreeSet<String>,
    /// Listed names that resolve to none of the broker's dirs (as given).
    pub unknown: Vec<String>,
}

impl CordonSet {
    /// Whether `dir` (absolute) is cordoned.
    pub fn contains(&self, dir: &str) -> bool {
        self.dirs.contains(&normalize(dir))
    }
}

/// The entries of a value, trimmed, empty ones dropped.
fn entries(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// `name` as an absolute, lexically normalized path: relative names are joined to `work_dir`;
/// `.`, `..`, repeated and trailing separators go.
pub fn absolute(work_dir: &str, name: &str) -> String {
    if name.starts_with('/') {
        normalize(name)
    } else {
        normalize(&format!("{work_dir}/{name}"))
    }
}

/// Lexical normal form of an absolute path (`..` at the root stays at the root).
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The dirs of `broker` that `value` (an effective `cordoned.log.dirs`) cordons.
pub fn cordoned(broker: BrokerDirs<'_>, value: &str) -> CordonSet {
    let mut set = CordonSet::default();
    for entry in entries(value) {
        if entry == ALL {
            set.dirs.extend(broker.dirs.iter().map(|d| normalize(d)));
            continue;
        }
        let wanted = absolute(broker.work_dir, entry);
        match broker.dirs.iter().find(|d| normalize(d) == wanted) {
            Some(d) => {
                set.dirs.insert(normalize(d));
            }
            None => set.unknown.push(entry.to_string()),
        }
    }
    set
}

/// Whether a broker with `dirs`, of which `cordoned` are cordoned (both as registered), may get
/// a new replica: nothing of it is cordoned, or some dir of it is not.
pub fn takes_new_replicas(dirs: &[String], cordoned: &[String]) -> bool {
    if cordoned.is_empty() {
        return true;
    }
    let cordoned: BTreeSet<String> = cordoned.iter().map(|d| normalize(d)).collect();
    dirs.iter().any(|d| !cordoned.contains(&normalize(d)))
}

/// Checks a value's form: `*` alone or a list of dir names, within [`MAX_ENTRIES`] entries of
/// [`MAX_ENTRY_BYTES`] each. The error names the entry and the reason.
pub fn check_form(value: &str) -> Result<(), String> {
    let list: Vec<&str> = entries(value).collect();
    if list.len() > MAX_ENTRIES {
        return Err(format!("{} entries, at most {MAX_ENTRIES}", list.len()));
    }
    if list.len() > 1 && list.contains(&ALL) {
        return Err(format!("{ALL} cordons every dir and stands alone"));
    }
    if let Some(e) = list.iter().find(|e| e.len() > MAX_ENTRY_BYTES) {
        let head: String = e.chars().take(64).collect();
        return Err(format!("entry {head:?}... is over {MAX_ENTRY_BYTES} bytes"));
    }
    if let Some(e) = list.iter().find(|e| e.contains('\0')) {
        return Err(format!("entry {e:?} holds a NUL byte"));
    }
    Ok(())
}

/// The first name in `value` that is a dir of none of `brokers`, or `None`: a broker's own value
/// is checked against that broker alone, the cluster default against every broker.
pub fn unknown_dir(brokers: &[BrokerDirs<'_>], value: &str) -> Option<String> {
    entries(value)
        .filter(|e| *e != ALL)
        .find(|e| !brokers.iter().any(|b| cordoned(*b, e).unknown.is_empty()))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs() -> Vec<String> {
        vec!["/srv/ferry/data/d1".into(), "/srv/ferry/data/d2".into()]
    }

    fn b(dirs: &[String]) -> BrokerDirs<'_> {
        BrokerDirs {
            dirs,
            work_dir: "/srv/ferry",
        }
    }

    #[test]
    fn relative_and_absolute_names_cordon_the_same_dir() {
        let d = dirs();
        let rel = cordoned(b(&d), "data/d1");
        let abs = cordoned(b(&d), "/srv/ferry/data/d1");
        let odd = cordoned(b(&d), "./data/../data/d1/");
        assert_eq!(rel.dirs, BTreeSet::from(["/srv/ferry/data/d1".to_string()]));
        assert_eq!(rel, abs);
        assert_eq!(rel, odd);
        assert!(rel.contains("/srv/ferry/data/d1") && !rel.contains("/srv/ferry/data/d2"));
        assert!(rel.unknown.is_empty());
    }

    #[test]
    fn a_star_cordons_every_dir_and_nothing_cordons_none() {
        let d = dirs();
        assert_eq!(cordoned(b(&d), "*").dirs.len(), 2);
        assert_eq!(cordoned(b(&d), " * ").dirs.len(), 2);
        assert_eq!(cordoned(b(&d), ""), CordonSet::default());
    }

    #[test]
    fn names_of_no_dir_are_reported_not_cordoned() {
        let d = dirs();
        let s = cordoned(b(&d), "data/d1,data/d3");
        assert_eq!(s.dirs.len(), 1);
        assert_eq!(s.unknown, vec!["data/d3".to_string()]);
        // Relative to another working dir, the same name is another dir.
        let elsewhere = BrokerDirs {
            dirs: &d,
            work_dir: "/opt",
        };
        assert_eq!(cordoned(elsewhere, "data/d1").unknown, vec!["data/d1".to_string()]);
    }

    #[test]
    fn a_broker_takes_replicas_while_one_dir_is_not_cordoned() {
        let d = dirs();
        assert!(takes_new_replicas(&d, &[]));
        assert!(takes_new_replicas(&d, &d[..1]));
        assert!(!takes_new_replicas(&d, &d));
        assert!(takes_new_replicas(&[], &[]), "nothing cordoned");
        let all: Vec<String> = cordoned(b(&d), "*").dirs.into_iter().collect();
        assert!(!takes_new_replicas(&d, &all));
    }

    #[test]
    fn unknown_dirs_are_named_against_every_broker_given() {
        let d1 = dirs();
        let d2 = vec!["/other/d9".to_string()];
        let both = [b(&d1), b(&d2)];
        assert_eq!(unknown_dir(&both, "data/d1,/other/d9"), None);
        assert_eq!(unknown_dir(&both[..1], "/other/d9"), Some("/other/d9".to_string()));
        assert_eq!(unknown_dir(&both, "*"), None);
        assert_eq!(unknown_dir(&both, "d7"), Some("d7".to_string()));
    }

    #[test]
    fn the_form_is_bounded() {
        assert!(check_form("").is_ok() && check_form("*").is_ok() && check_form("a,b").is_ok());
        assert!(check_form("*,a").unwrap_err().contains("stands alone"));
        let many = vec!["d"; MAX_ENTRIES + 1].join(",");
        assert!(check_form(&many).unwrap_err().contains("entries"));
        assert!(check_form(&"x".repeat(MAX_ENTRY_BYTES + 1)).is_err());
        assert_eq!(absolute("/w", "../x"), "/x");
        assert_eq!(absolute("/w", "/../x"), "/x");
    }
}
