//! A real browser for the web console's tests: Debian's `chromium`, headless, loads a page, lets
//! its scripts run for a budget of virtual time, and gives the DOM or saves a screenshot. Plus
//! small readers of the dumped DOM's start tags and attributes.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `chromium` binary, if installed (`tools/test.sh` installs it).
pub fn chromium() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("chromium"))
        .find(|p| p.is_file())
}

/// Chromium with the flags every run takes, on a fresh profile in `profile`, stopped (SIGTERM)
/// after two minutes if it hangs.
fn command(profile: &Path, budget_ms: u64) -> Command {
    let bin = chromium().expect("chromium is not installed (tools/test.sh installs it: apt-get install chromium)");
    let mut cmd = Command::new("timeout");
    cmd.arg("120").arg(bin).args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]);
    cmd.arg(format!("--user-data-dir={}", profile.display()));
    cmd.arg(format!("--virtual-time-budget={budget_ms}"));
    cmd
}

/// The DOM of `url` after its scripts ran for `budget_ms` of virtual time.
pub fn dump_dom(url: &str, budget_ms: u64) -> String {
    let profile = tempfile::tempdir().expect("a profile dir");
    let out = command(profile.path(), budget_ms)
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("running chromium");
    assert!(
        out.status.success(),
        "chromium --dump-dom {url} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Saves a 1280x900 screenshot of `url` to `path` after `budget_ms` of virtual time.
pub fn screenshot(url: &str, path: &Path, budget_ms: u64) {
    let profile = tempfile::tempdir().expect("a profile dir");
    let out = command(profile.path(), budget_ms)
        .arg(format!("--screenshot={}", path.display()))
        .arg("--window-size=1280,900")
        .arg(url)
        .output()
        .expect("running chromium");
    assert!(
        out.status.success() && path.is_file(),
        "chromium --screenshot {url} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every start tag of `dom`, as written between `<` and `>`.
pub fn start_tags(dom: &str) -> impl Iterator<Item = &str> {
    dom.split('<')
        .skip(1)
        .filter(|t| !t.starts_with('/') && !t.starts_with('!'))
        .filter_map(|t| t.split_once('>').map(|(tag, _)| tag))
}

/// The start tags that hold every one of `parts` (such as `data-partition="t-0"`).
pub fn tags_with<'a>(dom: &'a str, parts: &[&str]) -> Vec<&'a str> {
    start_tags(dom)
        .filter(|t| parts.iter().all(|p| t.contains(p)))
        .collect()
}

/// The first start tag holding every one of `parts`.
pub fn tag_with<'a>(dom: &'a str, parts: &[&str]) -> Option<&'a str> {
    start_tags(dom).find(|t| parts.iter().all(|p| t.contains(p)))
}

/// The value of attribute `name` in a start tag, unescaped.
pub fn attr(tag: &str, name: &str) -> Option<String> {
    let needle = format!(" {name}=\"");
    let start = tag.find(&needle)? + needle.len();
    let len = tag[start..].find('"')?;
    Some(
        tag[start..start + len]
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&"),
    )
}

/// A numeric attribute of a start tag.
pub fn num(tag: &str, name: &str) -> Option<i64> {
    attr(tag, name)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_attributes_are_read_from_a_dump() {
        let dom = r#"<!DOCTYPE html><html><body data-tab="moves"><div class="card move" data-partition="t-0" data-bytes-left="42">x</div><p data-name="a &amp; b"></p></body></html>"#;
        let t = tag_with(dom, &["data-partition=\"t-0\""]).unwrap();
        assert_eq!(num(t, "data-bytes-left"), Some(42));
        assert_eq!(attr(t, "class").as_deref(), Some("card move"));
        assert_eq!(attr(t, "data-missing"), None);
        let p = tag_with(dom, &["data-name"]).unwrap();
        assert_eq!(attr(p, "data-name").as_deref(), Some("a & b"));
        assert_eq!(start_tags(dom).count(), 4, "html, body, div, p");
    }
}
