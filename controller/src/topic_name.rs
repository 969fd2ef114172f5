//! Topic name rules, matching what Kafka clients expect to be accepted.

use proto::errors::{ErrorCode, Refusal};

/// Longest allowed topic name; Kafka keeps room for a partition suffix in 255-byte file names.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Checks a topic name: 1 to 249 characters from `[a-zA-Z0-9._-]`, and not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), Refusal> {
    if name.is_empty() {
        return Err(invalid_name(format!("topic name {name:?} is invalid: it is empty")));
    }
    // "." and ".." would be directory entries in a log dir layout.
    if name == "." || name == ".." {
        return Err(invalid_name(format!(
            "topic name {name:?} is invalid: \".\" and \"..\" are not allowed"
        )));
    }
    if let Some(bad) = name.chars().find(|c| !is_legal_char(*c)) {
        return Err(invalid_name(format!(
            "topic name {name:?} is invalid: it contains {bad:?}, only ASCII letters, digits, '.', '_' and '-' are allowed"
        )));
    }
    // All characters are ASCII here, so bytes == characters.
    if name.len() > MAX_TOPIC_NAME_LEN {
        return Err(invalid_name(format!(
            "topic name {name:?} is invalid: it is {} characters long, the maximum is {MAX_TOPIC_NAME_LEN}",
            name.len()
        )));
    }
    Ok(())
}

fn invalid_name(message: String) -> Refusal {
    Refusal::new(ErrorCode::INVALID_TOPIC_EXCEPTION, message)
}

fn is_legal_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_legal_names() {
        for name in [
            "a",
            "orders",
            "Orders.v2",
            "__consumer_offsets",
            "a-b_c.d",
            "0",
            "...",
            ".a",
            "a..",
        ] {
            assert_eq!(validate_topic_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn accepts_max_length() {
        let name = "x".repeat(MAX_TOPIC_NAME_LEN);
        assert_eq!(validate_topic_name(&name), Ok(()));
    }

    #[test]
    fn rejects_too_long() {
        let name = "x".repeat(250);
        let err = validate_topic_name(&name).unwrap_err().message;
        assert!(err.starts_with("topic name \"xxx"), "{err}");
        assert!(
            err.ends_with("is invalid: it is 250 characters long, the maximum is 249"),
            "{err}"
        );
    }

    #[test]
    fn rejects_empty() {
        assert_eq!(
            validate_topic_name(""),
            Err(invalid_name("topic name \"\" is invalid: it is empty".to_string()))
        );
    }

    #[test]
    fn rejects_dot_and_dot_dot() {
        for name in [".", ".."] {
            let err = validate_topic_name(name).unwrap_err().message;
            assert_eq!(
                err,
                format!("topic name \"{name}\" is invalid: \".\" and \"..\" are not allowed")
            );
        }
    }

    #[test]
    fn rejects_illegal_character() {
        assert_eq!(
            validate_topic_name("a/b"),
            Err(invalid_name(
                "topic name \"a/b\" is invalid: it contains '/', only ASCII letters, digits, '.', '_' and '-' are allowed"
                    .to_string()
            ))
        );
    }

    #[test]
    fn names_first_illegal_character() {
        for (name, bad) in [("a b", "' '"), ("é", "'é'"), ("a:b/c", "':'"), ("tab\there", "'\\t'")] {
            let err = validate_topic_name(name).unwrap_err().message;
            assert!(err.contains(&format!("it contains {bad},")), "{err}");
        }
    }

    #[test]
    fn illegal_character_reported_before_length() {
        let name = format!("{}/", "x".repeat(300));
        assert!(validate_topic_name(&name)
            .unwrap_err()
            .message
            .contains("it contains '/'"));
    }
}
