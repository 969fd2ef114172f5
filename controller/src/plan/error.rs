//! Why a plan could not be made, stored or changed. Each maps to one [`Refusal`] with Kafka's
//! code and a message naming the field, broker, dir or partition.

use proto::errors::{ErrorCode, Refusal};

/// A plan refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A cap out of range.
    #[error("{field}: must be from 1 to {max}, got {value}", max = super::bounds::MAX_CAP)]
    Cap {
        /// The request's field.
        field: &'static str,
        /// What it gave.
        value: i64,
    },
    /// A tolerance out of range.
    #[error("tolerance_pct: must be from 0 to 100, got {value}")]
    Tolerance {
        /// What it gave.
        value: i64,
    },
    /// A broker that is not registered.
    #[error("{field}: broker {broker} is not registered")]
    UnknownBroker {
        /// The request's field.
        field: &'static str,
        /// The broker named.
        broker: i32,
    },
    /// A dir the broker does not have.
    #[error("dir: broker {broker} has no log dir '{dir}'")]
    UnknownDir {
        /// The broker named.
        broker: i32,
        /// The dir named.
        dir: String,
    },
    /// A drain that cannot be done.
    #[error("cannot drain {what}: {reason}")]
    CannotDrain {
        /// `broker 3` or `dir /d of broker 3`.
        what: String,
        /// Why, naming the partition or the brokers short.
        reason: String,
    },
    /// A dir balance with too few dirs.
    #[error("broker: {reason}")]
    CannotBalanceDirs {
        /// Why.
        reason: String,
    },
    /// More moves than a plan may hold.
    #[error("the plan would hold {moves} moves, more than {max}", max = super::bounds::MAX_PLAN_MOVES)]
    TooManyMoves {
        /// How many.
        moves: usize,
    },
    /// A move that breaks the plan's rules.
    #[error("partition {partition}: {reason}")]
    BadMove {
        /// `topic-partition`.
        partition: String,
        /// Why.
        reason: String,
    },
    /// A change the plan's state does not allow.
    #[error("plan {id} is {state}: cannot {action}")]
    State {
        /// The plan.
        id: u64,
        /// Its state, as `show` prints it.
        state: String,
        /// What was asked.
        action: &'static str,
    },
    /// An undrain of a plan that is not a drain of what it names.
    #[error("plan {id} is not a drain of {what}")]
    NotADrainOf {
        /// The plan.
        id: u64,
        /// What the undrain named.
        what: String,
    },
    /// Stored bytes that do not decode.
    #[error("stored plan does not decode: {0}")]
    Malformed(String),
}

impl PlanError {
    /// The refusal a request gets for this error.
    pub fn refusal(&self) -> Refusal {
        let code = match self {
            PlanError::Cap { .. }
            | PlanError::Tolerance { .. }
            | PlanError::TooManyMoves { .. }
            | PlanError::BadMove { .. }
            | PlanError::NotADrainOf { .. }
            | PlanError::CannotBalanceDirs { .. } => ErrorCode::INVALID_REQUEST,
            PlanError::UnknownBroker { .. } => ErrorCode::BROKER_NOT_AVAILABLE,
            PlanError::UnknownDir { .. } => ErrorCode::LOG_DIR_NOT_FOUND,
            PlanError::CannotDrain { .. } => ErrorCode::INVALID_REPLICATION_FACTOR,
            PlanError::State { .. } => ErrorCode::INVALID_REQUEST,
            PlanError::Malformed(_) => ErrorCode::CORRUPT_MESSAGE,
        };
        Refusal::new(code, self.to_string())
    }
}

/// Checks a tolerance given in percent.
pub fn tolerance(value: i64) -> Result<u32, PlanError> {
    if (0..=100).contains(&value) {
        Ok(value as u32)
    } else {
        Err(PlanError::Tolerance { value })
    }
}
