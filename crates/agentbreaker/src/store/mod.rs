//! Shared state (contract §12): the configuration of a store (`store`, `key`, `storeTimeoutMs`,
//! `storeFailure`), the store URL with its password kept out of every message, and the status a
//! store-backed object reports. With the `redis` feature, [`link`] is the connection to Redis that
//! a store-backed object (a FailureBreaker today; a Monitor's budget counters next) runs its
//! scripts through. docs/distributed.md describes the design.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[cfg(feature = "redis")]
pub(crate) mod link;

/// A random id of `words` 64-bit parts in hex, for naming this process's writes in the store
/// (a breaker's generations, a Monitor's batches): the process id and the time, hashed with a
/// randomly keyed hasher.
#[cfg(feature = "redis")]
pub(crate) fn random_id(words: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    h.write_u128(now.map(|d| d.as_nanos()).unwrap_or(0));
    let mut out = String::with_capacity(16 * words);
    for _ in 0..words {
        let word = h.finish();
        out.push_str(&format!("{word:016x}"));
        h.write_u64(word);
    }
    out
}

/// The default of `storeTimeoutMs`: the longest a call waits for the store.
pub const DEFAULT_STORE_TIMEOUT_MS: u64 = 50;
/// The largest `storeTimeoutMs` accepted.
pub const MAX_STORE_TIMEOUT_MS: u64 = 60_000;
/// The longest `key` prefix, in bytes.
pub const MAX_KEY_BYTES: usize = 512;

/// What a store-backed object does while its store cannot be reached within `storeTimeoutMs`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreFailure {
    /// A local breaker takes over (seeded with the last shared state this process knew), one
    /// `warning` event says so, and the shared state is rejoined when the store answers again.
    #[default]
    Open,
    /// Every permission is refused (`CIRCUIT_OPEN`) until the store answers again.
    Closed,
}

impl StoreFailure {
    /// `"open"` or `"closed"`, as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreFailure::Open => "open",
            StoreFailure::Closed => "closed",
        }
    }
}

/// A store URL (`redis://[[user]:password@]host[:port][/db]` or `rediss://...`) as configured.
/// Its `Debug` and `Display` forms and its serialized form (a config getter's `store`) hide the
/// password (`redis://:***@host:6379/0`): contract §12, passwords are never shown. Only
/// [`StoreUrl::as_secret_str`] gives the URL itself, for connecting.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct StoreUrl(String);

impl Serialize for StoreUrl {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.redacted())
    }
}

impl StoreUrl {
    /// Wraps a URL; [`StoreUrl::validate`] checks it.
    pub fn new(url: impl Into<String>) -> Self {
        StoreUrl(url.into())
    }

    /// The URL with its password, for connecting. Never put it in a message.
    pub fn as_secret_str(&self) -> &str {
        &self.0
    }

    /// The URL with its password replaced by `***` (a malformed URL is not shown at all).
    pub fn redacted(&self) -> String {
        match UrlParts::parse(&self.0) {
            Ok(parts) => parts.redacted(),
            Err(_) => "<malformed store URL>".to_string(),
        }
    }

    /// Checks the URL's shape; `INVALID_CONFIG` says what is wrong without quoting it.
    pub fn validate(&self) -> Result<()> {
        UrlParts::parse(&self.0)
            .map(|_| ())
            .map_err(|why| Error::config(format_args!("store is not a valid Redis URL: {why}")))
    }

    /// `true` for `rediss://` (TLS).
    pub fn is_tls(&self) -> bool {
        UrlParts::parse(&self.0).is_ok_and(|p| p.tls)
    }

    /// The password and user name (percent-decoded too), for scrubbing messages that come from
    /// elsewhere (a client library, the server). Empty when the URL has none.
    #[cfg(any(feature = "redis", test))]
    pub(crate) fn secrets(&self) -> Vec<String> {
        let Ok(parts) = UrlParts::parse(&self.0) else {
            // A malformed URL is never quoted, so there is nothing to scrub.
            return Vec::new();
        };
        let mut out = Vec::new();
        if let Some(p) = parts.password.filter(|p| !p.is_empty()) {
            out.push(p.to_string());
            let decoded = percent_decode(p);
            if decoded != p {
                out.push(decoded);
            }
        }
        out
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreUrl({:?})", self.redacted())
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// Replaces every occurrence of a secret in `text` with `***`. Secrets shorter than 4 bytes are
/// left alone (they would match ordinary words); a password that short is not a secret anyway.
#[cfg(any(feature = "redis", test))]
pub(crate) fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "***");
        }
    }
    out
}

#[cfg(any(feature = "redis", test))]
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(any(feature = "redis", test))]
fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The parts of a store URL, borrowed from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UrlParts<'a> {
    pub tls: bool,
    pub user: Option<&'a str>,
    pub password: Option<&'a str>,
    pub host: &'a str,
    pub port: Option<u16>,
    pub db: Option<u32>,
}

impl<'a> UrlParts<'a> {
    /// Parses `redis[s]://[[user]:password@]host[:port][/db]`. The error says what is wrong and
    /// never quotes the URL (it may hold a password).
    pub(crate) fn parse(url: &'a str) -> std::result::Result<Self, &'static str> {
        const SHAPE: &str =
            "expected redis://[[user]:password@]host[:port][/db] or rediss://... (TLS)";
        let (scheme, rest) = url.split_once("://").ok_or(SHAPE)?;
        let tls = if scheme.eq_ignore_ascii_case("redis") {
            false
        } else if scheme.eq_ignore_ascii_case("rediss") {
            true
        } else {
            return Err("the scheme must be redis:// or rediss://");
        };
        if rest.contains(['?', '#']) {
            return Err("query parameters and fragments (?...#...) are not supported");
        }
        if rest.chars().any(|c| c.is_control() || c == ' ') {
            return Err("the URL must not contain spaces or control characters");
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            None => (None, None),
            Some(info) => match info.split_once(':') {
                Some((u, p)) => ((!u.is_empty()).then_some(u), Some(p)),
                None => ((!info.is_empty()).then_some(info), None),
            },
        };
        let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
            let (host, after) = inner
                .split_once(']')
                .ok_or("an IPv6 host needs its closing ]")?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or("junk after the IPv6 host")?),
            };
            (host, port)
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err("the host is missing");
        }
        if host.contains(['@', '[', ']', ':']) && !hostport.starts_with('[') {
            return Err("the host is malformed");
        }
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
                _ => return Err("the port must be a number from 1 to 65535"),
            },
        };
        let db = match path {
            "" | "/" => None,
            p => match p[1..].parse::<u32>() {
                Ok(n) if p[1..].bytes().all(|b| b.is_ascii_digit()) => Some(n),
                _ => return Err("the path must be a database number (/0, /1, ...)"),
            },
        };
        Ok(UrlParts {
            tls,
            user,
            password,
            host,
            port,
            db,
        })
    }

    /// `redis://user:***@host:6379/0`: the URL without its password, with the default port and
    /// database filled in.
    pub(crate) fn redacted(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let auth = match (self.user, self.password) {
            (None, None) => String::new(),
            (Some(u), None) => format!("{u}@"),
            (u, Some(p)) => {
                let shown = if p.is_empty() { "" } else { "***" };
                format!("{}:{shown}@", u.unwrap_or(""))
            }
        };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.to_string()
        };
        format!(
            "{scheme}://{auth}{host}:{}/{}",
            self.port.unwrap_or(6379),
            self.db.unwrap_or(0)
        )
    }
}

/// Checks a key prefix: 1 to [`MAX_KEY_BYTES`] bytes, no control characters.
pub(crate) fn validate_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(Error::config("key must not be empty"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::config(format_args!(
            "key is {} bytes long; the limit is {MAX_KEY_BYTES}",
            key.len()
        )));
    }
    if key.chars().any(char::is_control) {
        return Err(Error::config("key must not contain control characters"));
    }
    Ok(())
}

/// Checks the store keys of a config (`store`, `key`, `storeTimeoutMs`): the timeout in range,
/// `key` only with `store` and required by it, the URL's shape, and the `redis` feature.
pub(crate) fn validate_store_keys(
    store: Option<&StoreUrl>,
    key: Option<&str>,
    timeout_ms: u64,
) -> Result<()> {
    if !(1..=MAX_STORE_TIMEOUT_MS).contains(&timeout_ms) {
        return Err(Error::config(format_args!(
            "storeTimeoutMs must be from 1 to {MAX_STORE_TIMEOUT_MS}"
        )));
    }
    let Some(url) = store else {
        if key.is_some() {
            return Err(Error::config(
                "key names the shared state in a store: it needs store",
            ));
        }
        return Ok(());
    };
    if !cfg!(feature = "redis") {
        return Err(Error::config(
            "store needs agentbreaker built with the `redis` feature",
        ));
    }
    url.validate()?;
    match key {
        None => Err(Error::config(
            "store needs key (the key prefix of the shared state)",
        )),
        Some(key) => validate_key(key),
    }
}

/// Where a store-backed object's state lives right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreMode {
    /// In the store: every process on the key sees one state.
    Shared,
    /// The store is unreachable and `storeFailure` is `"open"`: a local breaker decides.
    Local,
    /// The store is unreachable and `storeFailure` is `"closed"`: every permission is refused.
    Refusing,
}

/// The store side of a store-backed object's status (`FailureBreaker::store_status`). Never
/// holds a password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreStatus {
    /// The store URL without its password.
    pub url: String,
    /// The key prefix.
    pub key: String,
    /// Where the state lives now.
    pub mode: StoreMode,
    /// Outages since construction (an outage starts when a call or the background connection
    /// finds the store unreachable, and ends when it answers again).
    pub outages: u64,
    /// Why the last connection attempt or call failed, without the password; `None` before the
    /// first failure.
    pub last_error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(url: &str) -> UrlParts<'_> {
        UrlParts::parse(url).unwrap()
    }

    #[test]
    fn parses_the_forms_users_write() {
        let p = parts("redis://127.0.0.1:6379/0");
        assert_eq!(
            (p.host, p.port, p.db, p.tls),
            ("127.0.0.1", Some(6379), Some(0), false)
        );
        let p = parts("rediss://user:pa:ss@cache.example.com/3");
        assert_eq!(p.user, Some("user"));
        assert_eq!(p.password, Some("pa:ss"));
        assert_eq!(
            (p.host, p.port, p.db, p.tls),
            ("cache.example.com", None, Some(3), true)
        );
        let p = parts("redis://:secret@localhost");
        assert_eq!((p.user, p.password), (None, Some("secret")));
        let p = parts("redis://[::1]:7000/");
        assert_eq!((p.host, p.port, p.db), ("::1", Some(7000), None));
        let p = parts("REDIS://h");
        assert_eq!((p.host, p.port), ("h", None));
        // A password may contain '@' (the last one ends the user info).
        let p = parts("redis://:p@ss@h:1");
        assert_eq!((p.password, p.host), (Some("p@ss"), "h"));
    }

    #[test]
    fn malformed_urls_are_refused_without_being_quoted() {
        for url in [
            "",
            "127.0.0.1:6379",
            "http://h:1",
            "redis//h",
            "redis://",
            "redis://:secretpw@",
            "redis://h:0",
            "redis://h:65536",
            "redis://h:x",
            "redis://h:+1",
            "redis://h/db",
            "redis://h/-1",
            "redis://h/0?protocol=resp3",
            "redis://h/0#insecure",
            "redis://h o/0",
            "redis://[::1/0",
            "redis://[::1]x/0",
            "unix:///tmp/redis.sock",
        ] {
            let e = StoreUrl::new(url).validate().unwrap_err();
            assert_eq!(e.code(), "INVALID_CONFIG", "{url}");
            if !url.is_empty() && url.len() > 8 {
                assert!(!e.message().contains(url), "{url} quoted in {e}");
            }
            assert!(!e.message().contains("secretpw"));
        }
    }

    #[test]
    fn redaction_hides_the_password_everywhere() {
        let url = StoreUrl::new("redis://alice:s3cret-pw@db.internal:6380/2");
        assert_eq!(url.redacted(), "redis://alice:***@db.internal:6380/2");
        assert_eq!(url.to_string(), url.redacted());
        assert!(!format!("{url:?}").contains("s3cret"));
        // A config getter serializes it: hidden there too, read back as configured.
        assert_eq!(serde_json::to_value(&url).unwrap(), url.redacted());
        let back: StoreUrl = serde_json::from_value("redis://:pw@h".into()).unwrap();
        assert_eq!(back.as_secret_str(), "redis://:pw@h");
        assert_eq!(
            StoreUrl::new("rediss://h").redacted(),
            "rediss://h:6379/0",
            "defaults filled in"
        );
        assert_eq!(
            StoreUrl::new("redis://u@h").redacted(),
            "redis://u@h:6379/0"
        );
        assert_eq!(
            StoreUrl::new("redis://:@h").redacted(),
            "redis://:@h:6379/0"
        );
        assert_eq!(
            StoreUrl::new("redis://[::1]:1").redacted(),
            "redis://[::1]:1/0"
        );
        assert_eq!(
            StoreUrl::new("nonsense").redacted(),
            "<malformed store URL>"
        );
        assert_eq!(
            StoreUrl::new("redis://:p%40ss@h").secrets(),
            ["p%40ss", "p@ss"]
        );
        assert_eq!(
            scrub(
                "auth p@ss failed for p%40ss",
                &StoreUrl::new("redis://:p%40ss@h").secrets()
            ),
            "auth *** failed for ***"
        );
        assert_eq!(
            scrub("abc", &["ab".to_string()]),
            "abc",
            "short secrets kept"
        );
    }

    #[test]
    fn keys_are_checked() {
        assert!(validate_key("tool:search").is_ok());
        assert!(validate_key("{tenant-7}:search").is_ok());
        assert_eq!(validate_key("").unwrap_err().code(), "INVALID_CONFIG");
        assert_eq!(validate_key("a\nb").unwrap_err().code(), "INVALID_CONFIG");
        assert_eq!(
            validate_key(&"k".repeat(MAX_KEY_BYTES + 1))
                .unwrap_err()
                .code(),
            "INVALID_CONFIG"
        );
    }
}
