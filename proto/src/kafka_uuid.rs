//! Kafka's text form of a Uuid (topic ids in ZooKeeper and in `partition.metadata`): 16 bytes
//! in URL-safe base64 without padding, 22 characters. Ferry stores the usual hyphenated form.

use base64::Engine;

/// Kafka's text for `id`.
pub fn encode(id: uuid::Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// The id in Kafka's text, if it is one.
pub fn decode(text: &str) -> Option<uuid::Uuid> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim())
        .ok()?;
    uuid::Uuid::from_slice(&bytes).ok()
}

/// A topic id in either form (Kafka's or hyphenated), as the hyphenated one.
pub fn canonical(text: &str) -> Option<String> {
    uuid::Uuid::parse_str(text.trim())
        .ok()
        .or_else(|| decode(text))
        .map(|id| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_name_the_same_id() {
        let id = uuid::Uuid::from_u128(0x6f1c6c1e_1d3c_4c39_9d52_5b0d5d0e2f11);
        assert_eq!(encode(id), "bxxsHh08TDmdUlsNXQ4vEQ");
        assert_eq!(decode("bxxsHh08TDmdUlsNXQ4vEQ"), Some(id));
        let hyphenated = "6f1c6c1e-1d3c-4c39-9d52-5b0d5d0e2f11".to_string();
        assert_eq!(canonical("bxxsHh08TDmdUlsNXQ4vEQ"), Some(hyphenated.clone()));
        assert_eq!(canonical(&hyphenated), Some(hyphenated));
        assert_eq!(canonical("x"), None);
    }
}
