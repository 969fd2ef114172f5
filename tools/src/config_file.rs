//! TOML config files whose errors name the key and its line.

use std::collections::BTreeMap;

use anyhow::anyhow;
use serde::de::DeserializeOwned;
use toml::Spanned;

/// The 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Parses `text` (read from `origin`) as a `T` whose fields are top-level keys. A syntax error
/// names its line; an unknown key or a value of the wrong type names the key and its line.
pub fn parse<T: DeserializeOwned>(text: &str, origin: &str) -> anyhow::Result<T> {
    let keys: BTreeMap<Spanned<String>, Spanned<toml::Value>> = toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| format!(" line {}:", line_of(text, s.start)))
            .unwrap_or_default();
        anyhow!("{origin}:{at} {}", e.message().trim_end())
    })?;
    // Each key alone, so that an error is pinned to the key that caused it.
    let mut keys: Vec<_> = keys.into_iter().collect();
    keys.sort_by_key(|(k, _)| k.span().start);
    for (key, value) in &keys {
        let mut one = toml::Table::new();
        one.insert(key.get_ref().clone(), value.get_ref().clone());
        if let Err(e) = toml::Value::Table(one).try_into::<T>() {
            return Err(anyhow!(
                "{origin}: line {}: key `{}`: {}",
                line_of(text, key.span().start),
                key.get_ref(),
                e.message().trim_end()
            ));
        }
    }
    let all: toml::Table = keys
        .into_iter()
        .map(|(k, v)| (k.into_inner(), v.into_inner()))
        .collect();
    toml::Value::Table(all)
        .try_into::<T>()
        .map_err(|e| anyhow!("{origin}: {}", e.message().trim_end()))
}

/// Reads and parses a config file; see [`parse`].
pub fn read<T: DeserializeOwned>(path: &std::path::Path) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    parse(&text, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Cfg {
        a: Option<u64>,
        b: Option<Vec<String>>,
    }

    #[test]
    fn errors_name_the_key_and_line() {
        assert_eq!(
            parse::<Cfg>("a = 1\nb = [\"x\"]\n", "f").unwrap(),
            Cfg {
                a: Some(1),
                b: Some(vec!["x".into()])
            }
        );
        let err = |s: &str| parse::<Cfg>(s, "f.toml").unwrap_err().to_string();
        let e = err("a = 1\n\nc = 2\n");
        assert!(e.starts_with("f.toml: line 3: key `c`: unknown field `c`"), "{e}");
        let e = err("# comment\na = \"x\"\n");
        assert!(
            e.starts_with("f.toml: line 2: key `a`: invalid type: string \"x\""),
            "{e}"
        );
        let e = err("b = [1]\n");
        assert!(
            e.starts_with("f.toml: line 1: key `b`: invalid type: integer `1`"),
            "{e}"
        );
        let e = err("a = 1\na = 2\n");
        assert!(e.starts_with("f.toml: line 2:"), "{e}");
        let e = err("a = \n");
        assert!(e.starts_with("f.toml: line 1:"), "{e}");
    }
}
