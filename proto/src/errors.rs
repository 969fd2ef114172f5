//! Kafka's error codes, by name and number, as Ferry answers them.

/// A Kafka error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCode(pub i32);

macro_rules! codes {
    ($($name:ident = $num:expr),* $(,)?) => {
        impl ErrorCode {
            $(
                #[doc = concat!("`", stringify!($name), "` (", stringify!($num), ").")]
                pub const $name: ErrorCode = ErrorCode($num);
            )*

            /// Kafka's name for the code, or `UNKNOWN_SERVER_ERROR` for a number Ferry does not use.
            pub fn name(self) -> &'static str {
                match self.0 {
                    $($num => stringify!($name),)*
                    _ => "UNKNOWN_SERVER_ERROR",
                }
            }
        }
    };
}

codes! {
    NONE = 0,
    OFFSET_OUT_OF_RANGE = 1,
    CORRUPT_MESSAGE = 2,
    UNKNOWN_TOPIC_OR_PARTITION = 3,
    LEADER_NOT_AVAILABLE = 5,
    NOT_LEADER_OR_FOLLOWER = 6,
    REQUEST_TIMED_OUT = 7,
    BROKER_NOT_AVAILABLE = 8,
    REPLICA_NOT_AVAILABLE = 9,
    MESSAGE_TOO_LARGE = 10,
    OFFSET_METADATA_TOO_LARGE = 12,
    COORDINATOR_LOAD_IN_PROGRESS = 14,
    COORDINATOR_NOT_AVAILABLE = 15,
    NOT_COORDINATOR = 16,
    INVALID_TOPIC_EXCEPTION = 17,
    RECORD_LIST_TOO_LARGE = 18,
    NOT_ENOUGH_REPLICAS = 19,
    INVALID_REQUIRED_ACKS = 21,
    ILLEGAL_GENERATION = 22,
    INCONSISTENT_GROUP_PROTOCOL = 23,
    INVALID_GROUP_ID = 24,
    UNKNOWN_MEMBER_ID = 25,
    INVALID_SESSION_TIMEOUT = 26,
    REBALANCE_IN_PROGRESS = 27,
    TOPIC_AUTHORIZATION_FAILED = 29,
    GROUP_AUTHORIZATION_FAILED = 30,
    CLUSTER_AUTHORIZATION_FAILED = 31,
    ILLEGAL_SASL_STATE = 34,
    UNSUPPORTED_SASL_MECHANISM = 33,
    UNSUPPORTED_VERSION = 35,
    TOPIC_ALREADY_EXISTS = 36,
    INVALID_PARTITIONS = 37,
    INVALID_REPLICATION_FACTOR = 38,
    INVALID_REPLICA_ASSIGNMENT = 39,
    INVALID_CONFIG = 40,
    NOT_CONTROLLER = 41,
    INVALID_REQUEST = 42,
    POLICY_VIOLATION = 44,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53,
    SECURITY_DISABLED = 54,
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45,
    DUPLICATE_SEQUENCE_NUMBER = 46,
    INVALID_PRODUCER_EPOCH = 47,
    KAFKA_STORAGE_ERROR = 56,
    SASL_AUTHENTICATION_FAILED = 58,
    LOG_DIR_NOT_FOUND = 57,
    UNKNOWN_PRODUCER_ID = 59,
    NON_EMPTY_GROUP = 68,
    LISTENER_NOT_FOUND = 72,
    GROUP_ID_NOT_FOUND = 69,
    FENCED_LEADER_EPOCH = 74,
    UNKNOWN_LEADER_EPOCH = 75,
    UNSUPPORTED_COMPRESSION_TYPE = 76,
    OFFSET_NOT_AVAILABLE = 78,
    MEMBER_ID_REQUIRED = 79,
    PREFERRED_LEADER_NOT_AVAILABLE = 80,
    GROUP_MAX_SIZE_REACHED = 81,
    FENCED_INSTANCE_ID = 82,
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83,
    ELECTION_NOT_NEEDED = 84,
    NO_REASSIGNMENT_IN_PROGRESS = 85,
    GROUP_SUBSCRIBED_TO_TOPIC = 86,
    INVALID_RECORD = 87,
    RESOURCE_NOT_FOUND = 91,
    DUPLICATE_RESOURCE = 92,
    UNACCEPTABLE_CREDENTIAL = 93,
    UNKNOWN_TOPIC_ID = 100,
    FENCED_MEMBER_EPOCH = 110,
    UNRELEASED_INSTANCE_ID = 111,
    UNSUPPORTED_ASSIGNOR = 112,
    STALE_MEMBER_EPOCH = 113,
    INELIGIBLE_REPLICA = 107,
    INVALID_UPDATE_VERSION = 108,
    // Ferry's own, outside Kafka's range.
    INVALID_THROTTLE = 1000,
    REASSIGNMENT_CANCEL_IN_PROGRESS = 1001,
}

impl Default for ErrorCode {
    fn default() -> Self {
        ErrorCode::NONE
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// A refused request: Kafka's code and a message that names the field or partition and the
/// reason. The one shape every decision refuses with; each edge (gRPC, the Kafka protocol, the
/// CLI) maps it once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Refusal {
    /// Kafka's code.
    pub code: ErrorCode,
    /// For people: what was refused and why.
    pub message: String,
}

impl Refusal {
    /// A refusal with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The same refusal with `context` (a partition, a field) put before its message.
    pub fn context(self, context: impl std::fmt::Display) -> Self {
        Self {
            message: format!("{context}: {}", self.message),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_numbers() {
        assert_eq!(ErrorCode(39).name(), "INVALID_REPLICA_ASSIGNMENT");
        assert_eq!(ErrorCode::OFFSET_OUT_OF_RANGE.to_string(), "OFFSET_OUT_OF_RANGE (1)");
        assert_eq!(ErrorCode(9999).name(), "UNKNOWN_SERVER_ERROR");
    }
}
