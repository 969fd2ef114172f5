//! Kafka's listener settings, read as Kafka reads them: `listeners` (`NAME://HOST:PORT,...`),
//! `advertised.listeners` and `listener.security.protocol.map` (`NAME:PROTOCOL,...`, where the
//! four protocol names map to themselves by default). Pure: binding is the node's.

use std::collections::{BTreeMap, BTreeSet};

use broker::auth::SecurityProtocol;

/// One Kafka listener as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Its name, upper case as Kafka normalises it.
    pub name: String,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
    /// HOST:PORT to bind; an empty host binds every interface.
    pub bind: String,
    /// HOST:PORT that clients are told; `None`: the address bound.
    pub advertised: Option<String>,
}

/// The listeners of `listeners`, with `advertised` (`advertised.listeners`; by name, a subset)
/// and `map` (`listener.security.protocol.map`). Every error names its flag.
pub fn parse(listeners: &str, advertised: Option<&str>, map: Option<&str>) -> Result<Vec<ListenerSpec>, String> {
    let protocols = protocol_map(map.unwrap_or(""))?;
    let mut out: Vec<ListenerSpec> = Vec::new();
    let mut ports = BTreeSet::new();
    for (name, host, port) in entries("--listeners", listeners)? {
        if out.iter().any(|l| l.name == name) {
            return Err(format!("--listeners: listener {name} is named twice"));
        }
        if port != 0 && !ports.insert(port) {
            return Err(format!("--listeners: port {port} is used by two listeners"));
        }
        let protocol = match protocols.get(&name) {
            Some(p) => *p,
            None => SecurityProtocol::parse(&name)
                .map_err(|_| format!("--listener-security-protocol-map: no security protocol for listener {name}"))?,
        };
        let host = if host.is_empty() { "0.0.0.0".to_string() } else { host };
        out.push(ListenerSpec {
            name,
            protocol,
            bind: join(&host, port),
            advertised: None,
        });
    }
    if out.is_empty() {
        return Err("--listeners: no listener given".into());
    }
    for (name, host, port) in entries("--advertised-listeners", advertised.unwrap_or(""))? {
        let Some(l) = out.iter_mut().find(|l| l.name == name) else {
            return Err(format!(
                "--advertised-listeners: {name} is not a listener of --listeners"
            ));
        };
        if l.advertised.is_some() {
            return Err(format!("--advertised-listeners: listener {name} is named twice"));
        }
        if host.is_empty() || host == "0.0.0.0" || host == "::" {
            return Err(format!(
                "--advertised-listeners: {name} needs a host clients can reach, not {host:?}"
            ));
        }
        if port == 0 {
            return Err(format!("--advertised-listeners: {name} needs a port, not 0"));
        }
        l.advertised = Some(join(&host, port));
    }
    Ok(out)
}

/// The listener for the single-listener flags (`--kafka-listen`): named for its protocol.
pub fn single(bind: std::net::SocketAddr, advertised: Option<String>, protocol: SecurityProtocol) -> ListenerSpec {
    ListenerSpec {
        name: protocol.name().into(),
        protocol,
        bind: bind.to_string(),
        advertised,
    }
}

/// `listener.security.protocol.map` as a map by listener name.
fn protocol_map(map: &str) -> Result<BTreeMap<String, SecurityProtocol>, String> {
    let mut out = BTreeMap::new();
    for entry in map.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, protocol)) = entry.split_once(':') else {
            return Err(format!(
                "--listener-security-protocol-map: {entry:?} is not NAME:PROTOCOL"
            ));
        };
        let name = listener_name("--listener-security-protocol-map", name)?;
        let protocol = SecurityProtocol::parse(protocol.trim())
            .map_err(|e| format!("--listener-security-protocol-map: {name}: {e}"))?;
        if out.insert(name.clone(), protocol).is_some() {
            return Err(format!("--listener-security-protocol-map: {name} is mapped twice"));
        }
    }
    Ok(out)
}

/// The `NAME://HOST:PORT` entries of `flag`'s value: name, host (brackets removed; empty for
/// every interface) and port.
fn entries(flag: &str, value: &str) -> Result<Vec<(String, String, u16)>, String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let Some((name, addr)) = e.split_once("://") else {
                return Err(format!("{flag}: {e:?} is not NAME://HOST:PORT"));
            };
            let name = listener_name(flag, name)?;
            let Some((host, port)) = addr.rsplit_once(':') else {
                return Err(format!("{flag}: {e:?} has no port"));
            };
            let port = port
                .parse::<u16>()
                .map_err(|_| format!("{flag}: {e:?}: port {port:?} is not a number from 0 to 65535"))?;
            let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
            if host.contains(['/', ' ']) {
                return Err(format!("{flag}: {e:?}: {host:?} is not a host"));
            }
            Ok((name, host.to_string(), port))
        })
        .collect()
}

/// A listener name, upper case; letters, digits, `_` and `-` only.
fn listener_name(flag: &str, name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(format!("{flag}: {name:?} is not a listener name"));
    }
    Ok(name.to_ascii_uppercase())
}

/// HOST:PORT, an IPv6 host in brackets.
fn join(host: &str, port: u16) -> String {
    match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_take_their_protocols_from_the_map_or_their_names() {
        let got = parse(
            "internal://127.0.0.1:9092,SASL_SSL://:9093,EXTERNAL://[::1]:0",
            Some("INTERNAL://10.0.0.1:9092,EXTERNAL://kafka.example:19094"),
            Some("INTERNAL:PLAINTEXT, EXTERNAL:sasl_ssl"),
        )
        .unwrap();
        let brief: Vec<_> = got
            .iter()
            .map(|l| (l.name.as_str(), l.protocol, l.bind.as_str(), l.advertised.as_deref()))
            .collect();
        assert_eq!(
            brief,
            vec![
                (
                    "INTERNAL",
                    SecurityProtocol::Plaintext,
                    "127.0.0.1:9092",
                    Some("10.0.0.1:9092")
                ),
                ("SASL_SSL", SecurityProtocol::SaslSsl, "0.0.0.0:9093", None),
                (
                    "EXTERNAL",
                    SecurityProtocol::SaslSsl,
                    "[::1]:0",
                    Some("kafka.example:19094")
                ),
            ]
        );
    }

    #[test]
    fn bad_listener_settings_are_refused_naming_the_flag_and_the_listener() {
        let err = |l: &str, a: Option<&str>, m: Option<&str>| parse(l, a, m).unwrap_err();
        assert!(err("INTERNAL://:9092", None, None).contains("no security protocol for listener INTERNAL"));
        assert!(err("PLAINTEXT://:9092,plaintext://:9093", None, None).contains("PLAINTEXT is named twice"));
        assert!(err("PLAINTEXT://:9092,SSL://:9092", None, None).contains("port 9092 is used by two"));
        assert!(err("PLAINTEXT://:x", None, None).starts_with("--listeners:"));
        assert!(err("127.0.0.1:9092", None, None).contains("not NAME://HOST:PORT"));
        assert!(err("", None, None).contains("no listener"));
        assert!(err("PLAINTEXT://:9092", Some("SSL://h:9093"), None).contains("SSL is not a listener"));
        assert!(err("PLAINTEXT://:9092", Some("PLAINTEXT://0.0.0.0:9092"), None).contains("needs a host"));
        assert!(err("A://:1", None, Some("A:TLS")).contains("--listener-security-protocol-map: A:"));
        assert!(err("A://:1", None, Some("A:SSL,a:SSL")).contains("A is mapped twice"));
        assert!(err("A://:1", None, Some("A")).contains("not NAME:PROTOCOL"));
    }

    #[test]
    fn the_single_listener_flags_name_the_listener_for_its_protocol() {
        let l = single("127.0.0.1:9092".parse().unwrap(), None, SecurityProtocol::SaslSsl);
        assert_eq!((l.name.as_str(), l.bind.as_str()), ("SASL_SSL", "127.0.0.1:9092"));
    }
}
