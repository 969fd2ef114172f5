//! Config changes, in one home for the controller (which plans them against the stored configs
//! inside its guarded write) and the broker (which forwards Kafka's operations as they came):
//! Kafka's IncrementalAlterConfigs operations SET, DELETE, APPEND and SUBTRACT over a set of
//! configs. APPEND adds the list elements not there yet and SUBTRACT removes those given; a
//! list left empty is removed. Both apply to list configs only, as in Kafka (INVALID_CONFIG).

use std::collections::HashMap;

use crate::errors::{ErrorCode, Refusal};
use crate::topic_config;

/// Kafka's SET.
pub const SET: i32 = 0;
/// Kafka's DELETE.
pub const DELETE: i32 = 1;
/// Kafka's APPEND.
pub const APPEND: i32 = 2;
/// Kafka's SUBTRACT.
pub const SUBTRACT: i32 = 3;

/// One resource's change: configs to set and configs to remove.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ConfigChange {
    /// Configs to set.
    pub set: HashMap<String, String>,
    /// Configs to remove.
    pub delete: Vec<String>,
}

impl ConfigChange {
    /// Sets `name` (`None`: removes it), replacing an earlier change of it.
    pub fn put(&mut self, name: &str, value: Option<String>) {
        match value {
            Some(v) => {
                self.delete.retain(|d| d != name);
                self.set.insert(name.to_string(), v);
            }
            None => {
                self.set.remove(name);
                if !self.delete.iter().any(|d| d == name) {
                    self.delete.push(name.to_string());
                }
            }
        }
    }
}

fn invalid(why: String) -> Refusal {
    Refusal::new(ErrorCode::INVALID_REQUEST, why)
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The change `ops` (name, operation, value) make to `current`, in order: a later operation on
/// the same config sees the earlier ones' result. The error names the config.
pub fn plan_incremental(
    ops: &[(String, i32, Option<String>)],
    current: &HashMap<String, String>,
) -> Result<ConfigChange, Refusal> {
    let mut change = ConfigChange::default();
    for (name, op, value) in ops {
        let now = match change.set.get(name) {
            Some(v) => Some(v.clone()),
            None if change.delete.contains(name) => None,
            None => current.get(name).cloned(),
        };
        match (*op, value) {
            (SET, Some(v)) => change.put(name, Some(v.clone())),
            (SET, None) => return Err(invalid(format!("{name}: SET needs a value"))),
            (DELETE, _) => change.put(name, None),
            (APPEND | SUBTRACT, _) if !topic_config::is_list(name) => {
                return Err(Refusal::new(
                    ErrorCode::INVALID_CONFIG,
                    format!("{name}: APPEND and SUBTRACT apply to list configs only"),
                ))
            }
            (APPEND | SUBTRACT, None) => return Err(invalid(format!("{name}: operation {op} needs a value"))),
            (APPEND | SUBTRACT, Some(v)) => {
                let mut items: Vec<String> = list(now.as_deref().unwrap_or(""));
                for item in list(v) {
                    if *op == APPEND && !items.contains(&item) {
                        items.push(item);
                    } else if *op == SUBTRACT {
                        items.retain(|i| *i != item);
                    }
                }
                change.put(name, (!items.is_empty()).then(|| items.join(",")));
            }
            (op, _) => {
                return Err(invalid(format!(
                    "{name}: unknown operation {op} (SET 0, DELETE 1, APPEND 2, SUBTRACT 3)"
                )))
            }
        }
    }
    Ok(change)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, op: i32, value: Option<&str>) -> (String, i32, Option<String>) {
        (name.into(), op, value.map(String::from))
    }

    const LEADERS: &str = "leader.replication.throttled.replicas";

    #[test]
    fn append_and_subtract_change_list_elements_only() {
        let now = HashMap::from([(LEADERS.to_string(), "0:1,1:2".to_string())]);
        let c = plan_incremental(&[op(LEADERS, APPEND, Some("1:2,2:3"))], &now).unwrap();
        assert_eq!(c.set[LEADERS], "0:1,1:2,2:3");
        let c = plan_incremental(&[op(LEADERS, SUBTRACT, Some("0:1"))], &now).unwrap();
        assert_eq!(c.set[LEADERS], "1:2");
        let c = plan_incremental(&[op(LEADERS, SUBTRACT, Some("0:1,1:2"))], &now).unwrap();
        assert_eq!(c.delete, vec![LEADERS.to_string()], "an emptied list is removed");
        let c = plan_incremental(&[op(LEADERS, APPEND, Some("5:1"))], &HashMap::new()).unwrap();
        assert_eq!(c.set[LEADERS], "5:1");
    }

    #[test]
    fn operations_on_one_config_apply_in_order() {
        let ops = [op(LEADERS, DELETE, None), op(LEADERS, APPEND, Some("3:1"))];
        let now = HashMap::from([(LEADERS.to_string(), "0:1".to_string())]);
        let c = plan_incremental(&ops, &now).unwrap();
        assert_eq!(c.set[LEADERS], "3:1");
        assert!(c.delete.is_empty());
    }

    #[test]
    fn bad_operations_name_the_config() {
        let e = plan_incremental(&[op("retention.ms", APPEND, Some("1"))], &HashMap::new()).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
        assert!(
            e.message.contains("retention.ms") && e.message.contains("list"),
            "{}",
            e.message
        );
        let e = plan_incremental(&[op("retention.ms", SET, None)], &HashMap::new()).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_REQUEST);
        assert!(e.message.contains("retention.ms"), "{}", e.message);
        let e = plan_incremental(&[op("retention.ms", 7, Some("1"))], &HashMap::new()).unwrap_err();
        assert!(e.message.contains("unknown operation 7"), "{}", e.message);
    }
}
