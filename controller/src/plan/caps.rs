//! How many moves may run at once: into and out of each broker, between the dirs of each
//! broker, and in the whole cluster. Defaults follow Cruise Control (5 per broker, 2 dir moves
//! per broker) and Redpanda (50 per cluster).

use serde::{Deserialize, Serialize};

use super::error::PlanError;

pub use super::bounds::MAX_CAP;

/// The concurrency caps of one plan. Moves submitted by anyone count against them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caps {
    /// Moves copying into one broker at once.
    pub into_broker: u32,
    /// Moves removing a replica from one broker at once.
    pub out_of_broker: u32,
    /// Moves between the dirs of one broker at once.
    pub dir_moves_per_broker: u32,
    /// Moves in the whole cluster at once.
    pub cluster: u32,
}

impl Default for Caps {
    fn default() -> Self {
        Self {
            into_broker: 5,
            out_of_broker: 5,
            dir_moves_per_broker: 2,
            cluster: 50,
        }
    }
}

/// Caps as a request gives them: each may be absent (the default) and is checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CapsRequest {
    /// `max_moves_into_broker`.
    pub into_broker: Option<i64>,
    /// `max_moves_out_of_broker`.
    pub out_of_broker: Option<i64>,
    /// `max_dir_moves_per_broker`.
    pub dir_moves_per_broker: Option<i64>,
    /// `max_moves_in_cluster`.
    pub cluster: Option<i64>,
}

impl CapsRequest {
    /// The caps, each given one checked to be 1 to [`MAX_CAP`]; an error names the field.
    pub fn resolve(&self) -> Result<Caps, PlanError> {
        let d = Caps::default();
        let pick = |field: &'static str, given: Option<i64>, default: u32| -> Result<u32, PlanError> {
            match given {
                None => Ok(default),
                Some(v) if v >= 1 && v <= i64::from(MAX_CAP) => Ok(v as u32),
                Some(value) => Err(PlanError::Cap { field, value }),
            }
        };
        Ok(Caps {
            into_broker: pick("max_moves_into_broker", self.into_broker, d.into_broker)?,
            out_of_broker: pick("max_moves_out_of_broker", self.out_of_broker, d.out_of_broker)?,
            dir_moves_per_broker: pick(
                "max_dir_moves_per_broker",
                self.dir_moves_per_broker,
                d.dir_moves_per_broker,
            )?,
            cluster: pick("max_moves_in_cluster", self.cluster, d.cluster)?,
        })
    }
}

impl Caps {
    /// Checks stored caps the same way a request's are checked.
    pub fn check(&self) -> Result<(), PlanError> {
        CapsRequest {
            into_broker: Some(i64::from(self.into_broker)),
            out_of_broker: Some(i64::from(self.out_of_broker)),
            dir_moves_per_broker: Some(i64::from(self.dir_moves_per_broker)),
            cluster: Some(i64::from(self.cluster)),
        }
        .resolve()
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_caps_take_the_defaults() {
        assert_eq!(CapsRequest::default().resolve().expect("valid"), Caps::default());
        let c = CapsRequest {
            into_broker: Some(4),
            ..Default::default()
        }
        .resolve()
        .expect("valid");
        assert_eq!((c.into_broker, c.out_of_broker), (4, 5));
    }

    #[test]
    fn a_cap_of_zero_below_or_too_high_is_refused_by_name() {
        for (req, field) in [
            (
                CapsRequest {
                    into_broker: Some(0),
                    ..Default::default()
                },
                "max_moves_into_broker",
            ),
            (
                CapsRequest {
                    out_of_broker: Some(-3),
                    ..Default::default()
                },
                "max_moves_out_of_broker",
            ),
            (
                CapsRequest {
                    dir_moves_per_broker: Some(0),
                    ..Default::default()
                },
                "max_dir_moves_per_broker",
            ),
            (
                CapsRequest {
                    cluster: Some(i64::from(MAX_CAP) + 1),
                    ..Default::default()
                },
                "max_moves_in_cluster",
            ),
        ] {
            let err = req.resolve().unwrap_err();
            assert!(err.to_string().contains(field), "{err}");
            assert_eq!(err.refusal().code, proto::errors::ErrorCode::INVALID_REQUEST);
        }
        let zero = Caps {
            cluster: 0,
            ..Caps::default()
        };
        assert!(zero.check().is_err());
    }
}
