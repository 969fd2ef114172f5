//! `--command-config`: the Kafka client config file an operator already has for Kafka's tools
//! (`client.properties`) names the user the `ferry` commands log in as: the username and
//! password of its `sasl.jaas.config`; with `security.protocol` SSL or SASL_SSL, the commands
//! also reach the gRPC port over TLS, trusting its `ssl.truststore.location` and showing its
//! `ssl.keystore.location`, if any, in PEM, PKCS12 or JKS (`ssl.*.type`, and when that is not
//! set, the format the file's first bytes show: Kafka would take JKS), opened with
//! `ssl.truststore.password`, `ssl.keystore.password` and `ssl.key.password`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use metastore::keystore::{KeystoreAccess, Password, StoreType};
use metastore::truststore::Truststore;

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

/// The TLS a client config asks for, if its protocol is SSL or SASL_SSL.
pub fn read_tls(path: &Path) -> anyhow::Result<Option<metastore::grpc_tls::ClientTlsFiles>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--command-config: reading {}", path.display()))?;
    let props = parse_properties(&text);
    let protocol = props.get("security.protocol").map(|p| p.to_ascii_uppercase());
    if !matches!(protocol.as_deref(), Some("SSL" | "SASL_SSL")) {
        return Ok(None);
    }
    let location = props.get("ssl.truststore.location").ok_or_else(|| {
        anyhow!(
            "--command-config {}: security.protocol {} needs ssl.truststore.location (the CAs)",
            path.display(),
            protocol.unwrap_or_default()
        )
    })?;
    let password = |key: &str| props.get(key).map(|p| Password::new(p.as_str()));
    let keystore = props.get("ssl.keystore.location").map(PathBuf::from);
    let files = metastore::grpc_tls::ClientTlsFiles {
        truststore: Truststore {
            location: location.into(),
            kind: store_type(&props, "ssl.truststore.type", Path::new(location))
                .map_err(|e| anyhow!("--command-config {}: {e}", path.display()))?,
            password: password("ssl.truststore.password"),
        },
        keystore_access: KeystoreAccess {
            kind: match &keystore {
                Some(k) => store_type(&props, "ssl.keystore.type", k)
                    .map_err(|e| anyhow!("--command-config {}: {e}", path.display()))?,
                None => StoreType::Pem,
            },
            keystore_password: password("ssl.keystore.password"),
            key_password: password("ssl.key.password"),
        },
        keystore,
    };
    metastore::grpc_tls::client_config(&files).map_err(|e| anyhow!("--command-config {}: {e}", path.display()))?;
    Ok(Some(files))
}

/// The store type `key` names, or else the one `file`'s first bytes show.
fn store_type(props: &BTreeMap<String, String>, key: &str, file: &Path) -> Result<StoreType, String> {
    match props.get(key) {
        Some(t) => StoreType::parse(t).map_err(|e| format!("{key}: {e}")),
        None => {
            let mut head = [0u8; 4];
            let n = std::fs::File::open(file)
                .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
                .map_err(|e| format!("{}: {e}", file.display()))?;
            Ok(StoreType::sniff(&head[..n]))
        }
    }
}

/// The user and password a client config logs in with; none for a config without SASL (plain
/// SSL or PLAINTEXT), whose caller is anonymous or named by its TLS certificate.
pub fn read_user(path: &Path) -> anyhow::Result<Option<(String, String)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--command-config: reading {}", path.display()))?;
    let props = parse_properties(&text);
    let sasl = props
        .get("security.protocol")
        .is_some_and(|p| p.to_ascii_uppercase().starts_with("SASL_"));
    let Some(jaas) = props.get("sasl.jaas.config") else {
        if sasl {
            anyhow::bail!(
                "--command-config {}: security.protocol is SASL but no sasl.jaas.config logs in",
                path.display()
            );
        }
        return Ok(None);
    };
    jaas_user(jaas).map(Some).ok_or_else(|| {
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
