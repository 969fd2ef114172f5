//! Scraping a node's `/metrics` over plain HTTP and a strict parser of the Prometheus text format
//! (version 0.0.4): every line is a `# HELP`/`# TYPE` line, another comment, or a sample
//! `name{label="value",...} value [timestamp]` of a family whose type was declared before it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name (a histogram's carry `_bucket`, `_sum`, `_count`).
    pub name: String,
    /// Labels by name.
    pub labels: BTreeMap<String, String>,
    /// The value.
    pub value: f64,
}

/// A parsed exposition.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    /// Declared type of each family.
    pub types: BTreeMap<String, String>,
    /// Samples in order.
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// The value of the sample `name` whose labels include `labels`; panics unless exactly one.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let found: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect();
        assert_eq!(found.len(), 1, "{name}{labels:?}: {found:?}");
        found[0].value
    }

    /// Whether a family of this name and type was declared.
    pub fn has(&self, family: &str, kind: &str) -> bool {
        self.types.get(family).map(String::as_str) == Some(kind)
    }
}

fn is_name(s: &str, colon: bool) -> bool {
    let mut chars = s.chars();
    let ok_first = |c: char| c.is_ascii_alphabetic() || c == '_' || (colon && c == ':');
    chars.next().is_some_and(ok_first) && chars.all(|c| ok_first(c) || c.is_ascii_digit())
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => s.parse::<f64>().map_err(|_| format!("bad value {s:?}")),
    }
}

/// The family a sample belongs to: itself, or a histogram's/summary's base name.
fn family_of<'a>(name: &'a str, types: &BTreeMap<String, String>) -> Option<&'a str> {
    if types.contains_key(name) {
        return Some(name);
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if matches!(types.get(base).map(String::as_str), Some("histogram" | "summary")) {
                return Some(base);
            }
        }
    }
    None
}

/// Parses `{a="x",b="y"}` at the start of `s`; returns the labels and the rest.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = s.strip_prefix('{').ok_or("expected {")?;
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let eq = rest.find('=').ok_or("label without =")?;
        let name = rest[..eq].trim();
        if !is_name(name, false) {
            return Err(format!("bad label name {name:?}"));
        }
        let mut chars = rest[eq + 1..].char_indices();
        if chars.next().map(|(_, c)| c) != Some('"') {
            return Err("label value must be quoted".into());
        }
        let mut value = String::new();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next().map(|(_, c)| c) {
                    Some('\\') => value.push('\\'),
                    Some('"') => value.push('"'),
                    Some('n') => value.push('\n'),
                    other => return Err(format!("bad escape {other:?}")),
                },
                '"' => {
                    end = Some(eq + 1 + i + 1);
                    break;
                }
                '\n' => return Err("newline in label value".into()),
                c => value.push(c),
            }
        }
        let end = end.ok_or("unterminated label value")?;
        if labels.insert(name.to_string(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        rest = &rest[end..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// Parses an exposition strictly; the error names the line.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut e = Exposition::default();
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("the text must end with a newline".into());
    }
    for (n, line) in text.lines().enumerate() {
        let err = |m: String| format!("line {}: {m}: {line:?}", n + 1);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.trim_start().splitn(3, ' ');
            match (words.next(), words.next(), words.next()) {
                (Some("TYPE"), Some(name), Some(kind)) => {
                    if !is_name(name, true) {
                        return Err(err("bad metric name".into()));
                    }
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                        return Err(err(format!("unknown type {kind:?}")));
                    }
                    if e.types.insert(name.to_string(), kind.to_string()).is_some() {
                        return Err(err("type declared twice".into()));
                    }
                    if e.samples.iter().any(|s| family_of(&s.name, &e.types) == Some(name)) {
                        return Err(err("type declared after its samples".into()));
                    }
                }
                (Some("TYPE"), ..) => return Err(err("TYPE needs a name and a type".into())),
                (Some("HELP"), Some(name), _) if !is_name(name, true) => return Err(err("bad metric name".into())),
                _ => {}
            }
            continue;
        }
        let name_end = line.find(['{', ' ']).ok_or_else(|| err("no value".into()))?;
        let name = &line[..name_end];
        if !is_name(name, true) {
            return Err(err("bad metric name".into()));
        }
        let (labels, rest) = if line[name_end..].starts_with('{') {
            parse_labels(&line[name_end..]).map_err(err)?
        } else {
            (BTreeMap::new(), &line[name_end..])
        };
        let mut fields = rest.split_whitespace();
        let value = parse_value(fields.next().ok_or_else(|| err("no value".into()))?).map_err(err)?;
        if let Some(ts) = fields.next() {
            ts.parse::<i64>().map_err(|_| err("bad timestamp".into()))?;
        }
        if fields.next().is_some() {
            return Err(err("trailing text".into()));
        }
        let family = family_of(name, &e.types).ok_or_else(|| err("sample of an undeclared family".into()))?;
        if e.types[family] == "histogram" && name.ends_with("_bucket") {
            parse_value(labels.get("le").ok_or_else(|| err("bucket without le".into()))?).map_err(err)?;
        }
        e.samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Ok(e)
}

/// `GET /metrics` at `addr` (HOST:PORT) over HTTP/1.1; returns the status line, the
/// `Content-Type` and the body.
pub fn scrape(addr: &str) -> std::io::Result<(String, String, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{m}: {raw:?}"));
    let (head, body) = raw.split_once("\r\n\r\n").ok_or_else(|| bad("no header end"))?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default().to_string();
    let mut content_type = String::new();
    let mut chunked = false;
    for h in lines {
        if let Some((k, v)) = h.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "content-type" => content_type = v.trim().to_string(),
                "transfer-encoding" => chunked = v.trim().eq_ignore_ascii_case("chunked"),
                _ => {}
            }
        }
    }
    let body = if chunked {
        dechunk(body).ok_or_else(|| bad("bad chunked body"))?
    } else {
        body.to_string()
    };
    Ok((status, content_type, body))
}

fn dechunk(mut s: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..size)?);
        s = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// Scrapes and parses `/metrics` at `addr`, checking the status and the content type.
pub fn scrape_parsed(addr: &str) -> Result<Exposition, String> {
    let (status, content_type, body) = scrape(addr).map_err(|e| format!("scraping {addr}: {e}"))?;
    if !status.starts_with("HTTP/1.1 200") {
        return Err(format!("{addr}: {status}"));
    }
    if content_type != "text/plain; version=0.0.4" {
        return Err(format!("{addr}: content type {content_type:?}"));
    }
    parse(&body).map_err(|e| format!("{addr}: {e}\n{body}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "# HELP a_total Things.\n# TYPE a_total counter\na_total{x=\"1\",y=\"q\\\"\\\\\\n\"} 3\n\
        a_total{x=\"2\"} 4 1700000000000\n# TYPE h histogram\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 2\n\
        h_sum 0.7\nh_count 2\n# TYPE g gauge\ng NaN\n";

    #[test]
    fn a_valid_exposition_parses() {
        let e = parse(GOOD).unwrap();
        assert_eq!(e.samples.len(), 7);
        assert_eq!(e.value("a_total", &[("x", "1")]), 3.0);
        assert_eq!(e.samples[0].labels["y"], "q\"\\\n");
        assert_eq!(e.value("h_bucket", &[("le", "+Inf")]), 2.0);
        assert!(e.has("h", "histogram") && e.has("g", "gauge"));
        assert!(e.value("g", &[]).is_nan());
    }

    #[test]
    fn malformed_lines_are_refused() {
        for bad in [
            "x 1\n",                                 // no TYPE
            "# TYPE x counter\nx\n",                 // no value
            "# TYPE x counter\nx one\n",             // bad value
            "# TYPE x counter\nx{a=1} 1\n",          // unquoted label
            "# TYPE x counter\nx{a=\"1\" 1\n",       // unterminated labels
            "# TYPE x counter\nx{1a=\"1\"} 1\n",     // bad label name
            "# TYPE x counter\nx 1 2 3\n",           // trailing text
            "# TYPE x countr\nx 1\n",                // bad type
            "# TYPE 1x counter\n",                   // bad name
            "# TYPE x counter\nx 1",                 // no final newline
            "# TYPE h histogram\nh_bucket 1\n",      // bucket without le
            "# TYPE x gauge\nx 1\n# TYPE x gauge\n", // declared twice
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(dechunk("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").as_deref(), Some("abcde"));
        assert_eq!(dechunk("3\r\nab"), None);
    }
}
