//! `--command-config`: the Kafka client config file an operator already has for Kafka's tools
//! (`client.properties`) names the user the `ferry` commands log in as: the username and
//! password of its `sasl.jaas.config`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, Context};

/// Reads Java properties: `key=value` or `key: value` lines, `#` and `!` comments, and lines
/// continued by a final backslash.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut pending = String::new();
    for line in text.lines() {
        let line = line.trim_start();
        if pending.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!')) {
            continue;
        }
        if let Some(cont) = line.strip_suffix('\\') {
            pending.push_str(cont);
            continue;
        }
        pending.push_str(line);
        let full = std::mem::take(&mut pending);
        let cut = full.find(['=', ':']).unwrap_or(full.len());
        let (k, v) = full.split_at(cut);
        let v = v.get(1..).unwrap_or("");
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    out
}

/// The `username="..."` and `password="..."` options of a JAAS login module line.
pub fn jaas_user(jaas: &str) -> Option<(String, String)> {
    let option = |name: &str| {
        let at = jaas.find(&format!("{name}=\""))? + name.len() + 2;
        let rest = &jaas[at..];
        Some(rest[..rest.find('"')?].to_string())
    };
    Some((option("username")?, option("password")?))
}

/// The user and password a client config logs in with.
pub fn read_user(path: &Path) -> anyhow::Result<(String, String)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--command-config: reading {}", path.display()))?;
    let props = parse_properties(&text);
    let jaas = props.get("sasl.jaas.config").ok_or_else(|| {
        anyhow!(
            "--command-config {}: no sasl.jaas.config to log in with",
            path.display()
        )
    })?;
    jaas_user(jaas).ok_or_else(|| {
        anyhow!(
            "--command-config {}: sasl.jaas.config names no username=\"...\" and password=\"...\"",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operators_client_properties_names_its_user() {
        let text = "# for admins\nsecurity.protocol=SASL_SSL\nsasl.mechanism: SCRAM-SHA-512\n\
                    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n  \
                    required username=\"admin\" password=\"p=w:d\";\n";
        let p = parse_properties(text);
        assert_eq!(p["security.protocol"], "SASL_SSL");
        assert_eq!(p["sasl.mechanism"], "SCRAM-SHA-512");
        assert_eq!(
            jaas_user(&p["sasl.jaas.config"]),
            Some(("admin".to_string(), "p=w:d".to_string()))
        );
        assert_eq!(jaas_user("PlainLoginModule required username=\"x\";"), None);
    }
}
