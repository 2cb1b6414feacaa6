//! Error fingerprints (contract §6): which error texts count as "the same error".

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::text::cap_error;

/// How error texts are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorMatch {
    /// The trimmed text.
    Exact,
    /// Whitespace collapsed; numbers, hex ids, UUIDs, timestamps and `line:col` pairs become `#`.
    #[default]
    Normalized,
    /// Normalized, plus quoted strings become `<str>` and path-like tokens `<path>`.
    Template,
    /// The error's key line, normalized: its first non-empty line, or for a Python traceback its
    /// last one (the `ValueError: ...` line). Tools often follow one stable message line with
    /// varying detail (a code excerpt, a stack), which would otherwise split one error in many.
    KeyLine,
}

impl ErrorMatch {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorMatch::Exact => "exact",
            ErrorMatch::Normalized => "normalized",
            ErrorMatch::Template => "template",
            ErrorMatch::KeyLine => "key_line",
        }
    }
}

impl fmt::Display for ErrorMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ErrorMatch {
    /// Parses a mode given as a function's argument (not as a config field): a bad name is
    /// `INVALID_ARGUMENT` rather than `INVALID_CONFIG`.
    pub fn from_argument(s: &str) -> Result<Self, Error> {
        s.parse()
            .map_err(|e: Error| Error::InvalidArgument(e.message().to_string()))
    }
}

impl FromStr for ErrorMatch {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "exact" => Ok(ErrorMatch::Exact),
            "normalized" => Ok(ErrorMatch::Normalized),
            "template" => Ok(ErrorMatch::Template),
            "key_line" => Ok(ErrorMatch::KeyLine),
            other => Err(Error::config(format_args!(
                "errorMatch must be \"exact\", \"normalized\", \"template\" or \"key_line\", \
                 not {other:?}"
            ))),
        }
    }
}

fn re(pattern: &str) -> Regex {
    // The patterns are constants checked by the tests below.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("valid built-in pattern")
}

static UUID: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"));
static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?",
        r"|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
    ))
});
static HEX_ID: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b(?:0x)?[0-9a-f]{8,}\b"));
static LINE_COL: LazyLock<Regex> = LazyLock::new(|| re(r"\d+:\d+"));
static NUMBER: LazyLock<Regex> = LazyLock::new(|| re(r"\d+(?:\.\d+)?"));
static QUOTED: LazyLock<Regex> =
    LazyLock::new(|| re(r#"(^|[^\w])(?:'[^'\n]*'|"[^"\n]*"|`[^`\n]*`)"#));
static DOTTED: LazyLock<Regex> =
    LazyLock::new(|| re(r"^[A-Za-z0-9_#-]*[A-Za-z][A-Za-z0-9_#-]*(?:\.[A-Za-z0-9_#-]+)+$"));

/// The fingerprint of `error` under `mode`. The text is first cut to 4096 bytes.
pub fn fingerprint(error: &str, mode: ErrorMatch) -> String {
    let text = cap_error(error);
    match mode {
        ErrorMatch::Exact => text.trim().to_string(),
        ErrorMatch::Normalized => normalize(text),
        ErrorMatch::Template => template(&normalize(text)),
        ErrorMatch::KeyLine => normalize(key_line(text)),
    }
}

/// The line of an error text that says what went wrong (see [`ErrorMatch::KeyLine`]).
pub fn key_line(text: &str) -> &str {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    match lines.next() {
        Some(first) if first.starts_with("Traceback (most recent call last)") => {
            lines.next_back().unwrap_or(first)
        }
        Some(first) => first,
        None => "",
    }
}

fn normalize(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let s = UUID.replace_all(&collapsed, "#");
    let s = TIMESTAMP.replace_all(&s, "#");
    let s = HEX_ID.replace_all(&s, "#");
    let s = LINE_COL.replace_all(&s, "#");
    NUMBER.replace_all(&s, "#").into_owned()
}

fn template(normalized: &str) -> String {
    let unquoted = QUOTED.replace_all(normalized, "${1}<str>");
    unquoted
        .split(' ')
        .map(template_token)
        .collect::<Vec<_>>()
        .join(" ")
}

fn template_token(token: &str) -> String {
    const LEADING: &[char] = &['(', '[', '{', '<', ',', ';', ':'];
    const TRAILING: &[char] = &[')', ']', '}', '>', ',', ';', ':', '.'];
    let start = token.len() - token.trim_start_matches(LEADING).len();
    let core_and_tail = &token[start..];
    let core = core_and_tail.trim_end_matches(TRAILING);
    if core.is_empty() || core == "<str>" {
        return token.to_string();
    }
    let path_like = core.contains('/') || core.contains('\\') || DOTTED.is_match(core);
    if !path_like {
        return token.to_string();
    }
    format!("{}<path>{}", &token[..start], &core_and_tail[core.len()..])
}

/// A streaming, normalizing hash of text for comparing steps: the same text up to whitespace and
/// volatile tokens hashes the same, in one pass over the bytes and without allocating (the
/// Monitor runs it on every tool result).
///
/// - Whitespace runs count as one space (leading and trailing ones as none).
/// - A word (a run of ASCII letters, digits and `_`) that contains a digit and is all hex digits
///   — a hex id, a hash, a UUID's part (`550e8400`, `e29b`, `0x1f`) — becomes `#`, except a plain
///   count (below);
/// - in any other word each digit run becomes `#` (`12ms` → `#ms`, `line42` → `line#`);
/// - a **count** — a number of 1 to 8 digits standing alone, neither joined to another number by
///   `.`, `:`, `-`, `/` or `,` nor part of a word — is kept: `3 failed` and `4 failed` differ,
///   and so do `10 of 60 jobs` and `20 of 60 jobs` (a poll whose output moves is not a loop);
///   while durations (`0.52s`), timestamps (`2024-05-01T10:00:01Z`, `10:42:07`), versions,
///   `line:col` pairs, long ids and epoch times do not tell two outputs apart.
#[derive(Clone, Default)]
pub struct NormalizedHasher {
    /// The normalized text so far (hashed at once by `finish`).
    out: Vec<u8>,
    /// A word that reached the end of the last piece of text (it may go on in the next).
    word: Vec<u8>,
    /// The byte before `word` (0 at the start or after whitespace).
    before_word: u8,
    /// The byte before the next word, as things stand.
    last: u8,
    pending_space: bool,
    /// Names rather than output: words of letters and digits are kept.
    names: bool,
}

impl NormalizedHasher {
    /// A new hasher.
    pub fn new() -> Self {
        Self::default()
    }

    /// A hasher for what an agent asked for (a tool's input) rather than what it got: a word of
    /// letters and digits (`q1`, `file2.py`, `test_3`) names a thing, so it is kept; numbers
    /// joined to others (ports, dates, versions), hex ids and durations-like `12ms` forms of
    /// output do not occur there often, and are normalized as in output.
    pub fn for_names() -> Self {
        NormalizedHasher {
            names: true,
            ..Self::default()
        }
    }

    /// Adds `text`; the result of several calls is that of their concatenation.
    ///
    /// Most bytes are written as they are: words without digits, punctuation and single spaces.
    /// They are found eight at a time ([`stops`]); only digits, control bytes and whitespace
    /// other than a single space take the byte-by-byte path.
    pub fn write_str(&mut self, text: &str) {
        let bytes = text.as_bytes();
        // At first, room for a JSON value's many small pieces, rather than a reallocation each.
        let least = if self.out.capacity() == 0 { 64 } else { 0 };
        self.out.reserve((bytes.len() + 2).max(least));
        let Some(mut i) = self.end_carried_word(bytes) else {
            return;
        };
        while i < bytes.len() {
            let class = CLASS[bytes[i] as usize];
            if class & 8 != 0 {
                i += 1;
                while i < bytes.len() && CLASS[bytes[i] as usize] & 8 != 0 {
                    i += 1;
                }
                self.space_run();
                continue;
            }
            self.flush_space();
            // The run of bytes written as they are, from i (which follows a word's end, if any).
            let start = i;
            let mut k = i;
            loop {
                let chunk = match bytes.get(k..k + 8) {
                    Some(b) => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
                    None => {
                        // Padded with zeros, which stop the run at the end.
                        let mut b = [0u8; 8];
                        b[..bytes.len() - k].copy_from_slice(&bytes[k..]);
                        u64::from_le_bytes(b)
                    }
                };
                let stop = stops(chunk);
                if stop == 0 {
                    k += 8;
                    continue;
                }
                k += (stop.trailing_zeros() / 8) as usize;
                if k >= bytes.len() {
                    k = bytes.len();
                    break;
                }
                if CLASS[bytes[k] as usize] & 10 != 0 {
                    break;
                }
                // A control byte (or a false alarm of `stops`): written as it is.
                k += 1;
            }
            self.out.extend_from_slice(&bytes[start..k]);
            if k == bytes.len() || CLASS[bytes[k] as usize] & 2 != 0 {
                // A word that contains the digit at k or reaches the end of the text.
                let mut ws = k;
                while ws > start && is_word_byte(bytes[ws - 1]) {
                    ws -= 1;
                }
                let before = match ws.checked_sub(1) {
                    Some(p) if p >= start => {
                        if bytes[p] == b' ' {
                            0
                        } else {
                            bytes[p]
                        }
                    }
                    _ => self.last,
                };
                if k == bytes.len() && ws == k {
                    // The text ends with punctuation.
                    if k > start {
                        self.last = bytes[k - 1];
                    }
                    return;
                }
                self.out.truncate(self.out.len() - (k - ws));
                let (we, any, all) = scan_word(bytes, ws);
                if we == bytes.len() {
                    self.word.extend_from_slice(&bytes[ws..]);
                    self.before_word = before;
                    return;
                }
                self.write_classified(&bytes[ws..we], any, all, before, bytes[we]);
                i = we;
            } else {
                // Whitespace other than a single space: the loop's first branch.
                i = k;
            }
        }
    }

    /// A whitespace run: one space before whatever comes next, if anything came before.
    #[inline]
    fn space_run(&mut self) {
        self.pending_space = !self.out.is_empty();
        self.last = 0;
    }

    /// The space of a whitespace run, written before what follows it.
    #[inline]
    fn flush_space(&mut self) {
        if self.pending_space {
            self.out.push(b' ');
            self.pending_space = false;
        }
    }

    /// The byte-at-a-time form of [`Self::write_str`], which the tests check it against.
    #[cfg(test)]
    fn write_str_bytewise(&mut self, text: &str) {
        let bytes = text.as_bytes();
        self.out.reserve(bytes.len() + 2);
        let Some(mut i) = self.end_carried_word(bytes) else {
            return;
        };
        while i < bytes.len() {
            let b = bytes[i];
            let class = CLASS[b as usize];
            if class & 1 != 0 {
                // A word: found and classified in one pass.
                let start = i;
                let (end, any, all) = scan_word(bytes, start);
                i = end;
                self.flush_space();
                if i == bytes.len() {
                    self.word.extend_from_slice(&bytes[start..]);
                    self.before_word = self.last;
                    return;
                }
                self.write_classified(&bytes[start..i], any, all, self.last, bytes[i]);
                continue;
            }
            i += 1;
            if class & 8 != 0 {
                self.space_run();
                continue;
            }
            self.flush_space();
            self.out.push(b);
            self.last = b;
        }
    }

    /// A word carried over from the last piece goes on with the word bytes `bytes` starts with,
    /// and is written once a byte ends it. Returns where the rest of `bytes` starts, or `None`
    /// when all of `bytes` went into the word.
    fn end_carried_word(&mut self, bytes: &[u8]) -> Option<usize> {
        if self.word.is_empty() {
            return Some(0);
        }
        let end = bytes.iter().position(|&b| !is_word_byte(b));
        self.word
            .extend_from_slice(&bytes[..end.unwrap_or(bytes.len())]);
        let i = end?;
        let mut word = std::mem::take(&mut self.word);
        self.write_word(&word, self.before_word, bytes[i]);
        // Its buffer kept for the next word that crosses a piece's end.
        word.clear();
        self.word = word;
        Some(i)
    }

    /// A whole word, between the bytes `before` and `next` (0: none).
    fn write_word(&mut self, word: &[u8], before: u8, next: u8) {
        let (_, any, all) = scan_word(word, 0);
        self.write_classified(word, any, all, before, next);
    }

    /// A whole word, with the OR (`any`) and AND (`all`) of its bytes' classes.
    fn write_classified(&mut self, word: &[u8], any: u8, all: u8, before: u8, next: u8) {
        if word.len() > WORD_BUFFER {
            // Too long to be an id: written with its digit runs as `#`.
            self.digit_runs(word);
        } else {
            let (digit, all_digits, all_hex) = (any & 2 != 0, all & 2 != 0, all & 4 != 0);
            let joins = |b: u8| matches!(b, b'.' | b':' | b'-' | b'/' | b',');
            if !digit {
                self.out.extend_from_slice(word);
            } else if all_digits && word.len() <= MAX_COUNT_DIGITS && !joins(before) && !joins(next)
            {
                // A count standing alone.
                self.out.extend_from_slice(word);
            } else if all_hex
                || (word.len() > 2
                    && (word.starts_with(b"0x") || word.starts_with(b"0X"))
                    && word[2..].iter().all(u8::is_ascii_hexdigit))
            {
                self.out.push(b'#');
            } else if self.names && any & 1 != 0 && !all_digits {
                // A name with digits in it (`q1`, `file2`).
                self.out.extend_from_slice(word);
            } else {
                self.digit_runs(word);
            }
        }
        self.last = b'a';
    }

    fn digit_runs(&mut self, word: &[u8]) {
        let mut in_digits = false;
        for &b in word {
            if b.is_ascii_digit() {
                if !in_digits {
                    self.out.push(b'#');
                }
                in_digits = true;
            } else {
                self.out.push(b);
                in_digits = false;
            }
        }
    }

    /// The hash of everything written.
    pub fn finish(mut self) -> u64 {
        use std::hash::Hasher;
        if !self.word.is_empty() {
            let word = std::mem::take(&mut self.word);
            self.write_word(&word, self.before_word, 0);
        }
        let mut h = rustc_hash::FxHasher::default();
        h.write(&self.out);
        h.write_usize(self.out.len());
        h.finish()
    }
}

/// Formatted text goes in as [`NormalizedHasher::write_str`] takes it, without a `String` (a
/// number of a tool's input, hashed on every call).
impl fmt::Write for NormalizedHasher {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        NormalizedHasher::write_str(self, text);
        Ok(())
    }
}

impl fmt::Debug for NormalizedHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NormalizedHasher").finish_non_exhaustive()
    }
}

/// The longest word that may still be an id (a SHA-256 in hex is 64 digits).
const WORD_BUFFER: usize = 64;
/// The most digits a kept count has (longer numbers are ids or epoch times).
const MAX_COUNT_DIGITS: usize = 8;

/// Byte classes of the normalizing hash: 1 a word byte (ASCII letter, digit or `_`), 2 a digit
/// (also a word byte), 4 a hex digit, 8 ASCII whitespace.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let mut v = 0;
        if c.is_ascii_alphanumeric() || c == b'_' {
            v |= 1;
        }
        if c.is_ascii_digit() {
            v |= 2;
        }
        if c.is_ascii_hexdigit() {
            v |= 4;
        }
        if c == b' ' || (c >= b'\t' && c <= b'\r') {
            v |= 8;
        }
        t[b] = v;
        b += 1;
    }
    t
};

#[inline(always)]
fn is_word_byte(b: u8) -> bool {
    CLASS[b as usize] & 1 != 0
}

/// The word of `bytes` that starts at `start`: where it ends, and the OR and the AND of its
/// bytes' classes.
#[inline(always)]
fn scan_word(bytes: &[u8], start: usize) -> (usize, u8, u8) {
    let (mut end, mut any, mut all) = (start, 0u8, 0xffu8);
    while let Some(&b) = bytes.get(end) {
        let c = CLASS[b as usize];
        if c & 1 == 0 {
            break;
        }
        any |= c;
        all &= c;
        end += 1;
    }
    (end, any, all)
}

/// Where a run of bytes that [`NormalizedHasher`] writes unchanged may stop, in eight bytes read
/// little-endian: the high bit of each byte that is a digit, an ASCII control byte (tab and
/// newline among them) or a space followed by one, by a space or by nothing known (the last
/// place). Bytes of 0x80 and above (UTF-8) never stop a run.
///
/// Each test subtracts bytewise without carrying, the classic zero-byte test: a byte that
/// borrows can mark the byte above it wrongly (a `:` after a digit, a `!` after a space), but
/// never one below, so the lowest mark is always a real stop or a harmless false alarm (the
/// caller looks at the byte), and no real stop goes unmarked.
#[inline(always)]
fn stops(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let ascii = !x & HIGH;
    let digit = (x ^ (b'0' as u64 * ONES)).wrapping_sub(10 * ONES) & ascii;
    let blank = x.wrapping_sub((b' ' as u64 + 1) * ONES) & ascii;
    let space = (x ^ (b' ' as u64 * ONES)).wrapping_sub(ONES) & ascii;
    let next_blank = (blank >> 8) | (0x80 << 56);
    (digit | blank) & !(space & !next_blank)
}

/// [`NormalizedHasher`] over one text.
pub fn normalized_hash(text: &str) -> u64 {
    let mut h = NormalizedHasher::new();
    h.write_str(text);
    h.finish()
}

/// The most distinct fingerprints an error-count map keeps (contract §6).
pub const MAX_ERROR_KEYS: usize = 1024;

/// Counts per fingerprint, bounded to [`MAX_ERROR_KEYS`] keys: when a new key would exceed the
/// bound, the key inserted earliest is evicted.
#[derive(Debug, Clone, Default)]
pub(crate) struct ErrorCounts {
    counts: HashMap<String, u64>,
    order: VecDeque<String>,
}

impl ErrorCounts {
    /// Adds one to `key` and returns its new count.
    pub(crate) fn increment(&mut self, key: String) -> u64 {
        if let Some(count) = self.counts.get_mut(&key) {
            *count = count.saturating_add(1);
            return *count;
        }
        if self.order.len() >= MAX_ERROR_KEYS
            && let Some(oldest) = self.order.pop_front()
        {
            self.counts.remove(&oldest);
        }
        self.order.push_back(key.clone());
        self.counts.insert(key, 1);
        1
    }

    pub(crate) fn clear(&mut self) {
        self.counts.clear();
        self.order.clear();
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.counts.len()
    }

    /// The counts with sorted keys, as `getStatus` reports them.
    pub(crate) fn to_map(&self) -> BTreeMap<String, u64> {
        self.counts.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    /// Rebuilds from a map (a snapshot), keeping at most [`MAX_ERROR_KEYS`] keys, each cut to
    /// the error-text cap as recorded keys are (a hostile snapshot cannot hold more than
    /// 1024 x 4 KB). Keys that become equal when cut add up.
    pub(crate) fn from_map(map: &BTreeMap<String, u64>) -> Self {
        let mut out = ErrorCounts::default();
        for (k, v) in map {
            let key = crate::text::cap_error(k);
            if let Some(count) = out.counts.get_mut(key) {
                *count = count.saturating_add(*v);
                continue;
            }
            if out.order.len() >= MAX_ERROR_KEYS {
                break;
            }
            out.order.push_back(key.to_string());
            out.counts.insert(key.to_string(), *v);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text made of what the normalizing hash treats specially: digits, hex letters, the bytes
    /// that join numbers, runs of whitespace, control and multi-byte characters.
    fn tricky_text() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::string::string_regex(
            "([a-fA-F0-9_xXz]{1,12}|[ ]{1,3}|[\\t\\n\\r]|[.:/,;#%()!\"-]|\\x00|\\x7f|é|€|0x[0-9a-f]{1,9}){0,60}",
        )
        .expect("valid regex")
    }

    proptest::proptest! {
        #[test]
        fn the_fast_normalizing_hash_equals_the_bytewise_one(
            text in tricky_text(),
            cuts in proptest::collection::vec(0usize..400, 0..4),
            names in proptest::bool::ANY,
        ) {
            let mut cuts: Vec<usize> = cuts
                .into_iter()
                .map(|c| c.min(text.len()))
                .filter(|&c| text.is_char_boundary(c))
                .collect();
            cuts.push(text.len());
            cuts.sort_unstable();
            let new = || if names { NormalizedHasher::for_names() } else { NormalizedHasher::new() };
            let (mut fast, mut bytewise) = (new(), new());
            let mut from = 0;
            for c in cuts {
                fast.write_str(&text[from..c]);
                bytewise.write_str_bytewise(&text[from..c]);
                from = c;
            }
            proptest::prop_assert_eq!(
                String::from_utf8_lossy(&fast.out),
                String::from_utf8_lossy(&bytewise.out)
            );
            proptest::prop_assert_eq!(fast.finish(), bytewise.finish());
        }
    }

    fn n(s: &str) -> String {
        fingerprint(s, ErrorMatch::Normalized)
    }

    fn t(s: &str) -> String {
        fingerprint(s, ErrorMatch::Template)
    }

    #[test]
    fn normalized_hashes_ignore_whitespace_and_volatile_tokens() {
        let h = normalized_hash;
        assert_eq!(h("  a   b\n"), h("a b"));
        assert_ne!(h("a b"), h("ab"));
        assert_eq!(h("took 12ms at 10:42:07"), h("took 7ms at 11:03:59"));
        assert_eq!(
            h("id 550e8400-e29b-41d4-a716-446655440000 done"),
            h("id 6fa459ea-ee8a-3ca4-894e-db77e160355e done")
        );
        assert_eq!(
            h("commit deadbeef12 and 0x1F"),
            h("commit 0123abcd99 and 0xff")
        );
        assert_eq!(h("line42 col7"), h("line9 col100"));
        assert_eq!(h("at x.py:12:5"), h("at x.py:340:1"));
        assert_eq!(
            h("v1.2.3 took 1732012345678"),
            h("v1.2.4 took 1732012399999")
        );
        // Counts standing alone are kept: a poll whose output moves is not a repeat.
        assert_ne!(h("10 of 60 jobs done"), h("20 of 60 jobs done"));
        assert_ne!(h("File \"x.py\", line 12"), h("File \"x.py\", line 340"));
        assert_eq!(h("[ 42%] ok (pid 7)"), h("[ 42%] ok (pid 7)"));
        // Words without digits are kept, even when they are hex letters.
        assert_ne!(h("add"), h("bad"));
        assert_ne!(h("PASSED"), h("FAILED"));
        assert_ne!(h("3 passed"), h("3 failed"));
        // Long words: digit runs still collapse; the letters still count.
        let long = |d: &str| format!("x{}y{d}z", "a".repeat(80));
        assert_eq!(h(&long("1")), h(&long("9999")));
        assert_ne!(h(&long("1")), h(&format!("x{}q1z", "a".repeat(80))));
        // Pieces hash as their concatenation.
        let mut parts = NormalizedHasher::new();
        parts.write_str("pytest -q\n 3 fai");
        parts.write_str("led in 0.4s");
        assert_eq!(parts.finish(), h("pytest -q 3 failed in 0.9s"));
        assert_ne!(h(""), h("x"));
        // For names (tool inputs), words with digits are kept; ids and joined numbers are not.
        let n = |t: &str| {
            let mut h = NormalizedHasher::for_names();
            h.write_str(t);
            h.finish()
        };
        assert_ne!(n("search q1"), n("search q2"));
        assert_ne!(n("cat file1.py"), n("cat file2.py"));
        assert_eq!(n("curl localhost:8080/x"), n("curl localhost:8081/x"));
        assert_eq!(n("show 5f3a9c2e81"), n("show 77b1e0c4d2"));
        assert_eq!(h("results for q1"), h("results for q2"));
    }

    #[test]
    fn restored_keys_are_capped_in_number_and_length() {
        let long = "x".repeat(10 * crate::text::MAX_ERROR_BYTES);
        let mut map: BTreeMap<String, u64> = (0..2000).map(|i| (format!("e{i:04}"), 1)).collect();
        map.insert(long.clone(), 2);
        map.insert(format!("{long}y"), 3);
        let counts = ErrorCounts::from_map(&map);
        assert_eq!(counts.len(), MAX_ERROR_KEYS);
        let restored = counts.to_map();
        assert!(
            restored
                .keys()
                .all(|k| k.len() <= crate::text::MAX_ERROR_BYTES)
        );
        // The two long keys cut to the same text and add up ("e..." keys sort before "x...").
        let short = ErrorCounts::from_map(&BTreeMap::from([
            (long.clone(), 2),
            (format!("{long}y"), 3),
        ]));
        assert_eq!(
            short.to_map().values().copied().collect::<Vec<_>>(),
            vec![5]
        );
    }

    #[test]
    fn exact_only_trims() {
        assert_eq!(
            fingerprint("  Path not found \n", ErrorMatch::Exact),
            "Path not found"
        );
        assert_eq!(fingerprint("a  b 12", ErrorMatch::Exact), "a  b 12");
    }

    #[test]
    fn normalized_replaces_variable_parts() {
        assert_eq!(n("Timeout   after 30s\n"), "Timeout after #s");
        assert_eq!(n("error at main.rs:12:34"), "error at main.rs:#");
        assert_eq!(
            n("request 550e8400-e29b-41d4-a716-446655440000 failed"),
            "request # failed"
        );
        assert_eq!(n("at 2024-01-02T03:04:05.123Z boom"), "at # boom");
        assert_eq!(n("at 2024-01-02 03:04:05+02:00 boom"), "at # boom");
        assert_eq!(n("at 03:04:05 boom"), "at # boom");
        assert_eq!(n("object 0x7ffd5e8c gone"), "object # gone");
        assert_eq!(n("commit deadbeef1 missing"), "commit # missing");
        assert_eq!(
            n("took 1.5 seconds, 3 retries"),
            "took # seconds, # retries"
        );
        assert_eq!(n("Path not found"), "Path not found");
    }

    #[test]
    fn template_merges_paths_and_quotes() {
        assert_eq!(
            t("Path not found: ServerScriptService.MainScript"),
            "Path not found: <path>"
        );
        assert_eq!(
            t("Path not found: ServerScriptService.MainHandler"),
            t("Path not found: ServerScriptService.Scripts.Main")
        );
        assert_eq!(t("No such file: src/main.rs"), "No such file: <path>");
        assert_eq!(t("cannot open (foo.py)."), "cannot open (<path>).");
        assert_eq!(t("KeyError: 'user_id'"), "KeyError: <str>");
        assert_eq!(t(r#"File "/tmp/x.py", line 3"#), "File <str>, line #");
        assert_eq!(t("can't find module 'x'"), "can't find module <str>");
        assert_eq!(t("plain words only"), "plain words only");
        assert_eq!(t("version 1.2 bad"), "version # bad");
    }

    #[test]
    fn key_line_keeps_the_line_that_names_the_error() {
        let k = |s: &str| fingerprint(s, ErrorMatch::KeyLine);
        assert_eq!(
            k(
                "Your proposed edit has introduced new syntax error(s).\n\nERRORS:\n- E999 at line 12"
            ),
            k("Your proposed edit has introduced new syntax error(s).\n[File: a.py (40 lines)]")
        );
        assert_eq!(
            k(
                "Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n    f()\nValueError: bad value 7"
            ),
            "ValueError: bad value #"
        );
        assert_eq!(
            k("\n\n  Path not found: a.b  \nmore"),
            "Path not found: a.b"
        );
        assert_eq!(k(""), "");
        assert_eq!(
            "key_line".parse::<ErrorMatch>().unwrap(),
            ErrorMatch::KeyLine
        );
        assert_eq!(
            serde_json::to_value(ErrorMatch::KeyLine).unwrap(),
            "key_line"
        );
    }

    #[test]
    fn hostile_input_is_capped() {
        let big = "x".repeat(10 * 1024 * 1024);
        assert!(n(&big).len() <= crate::text::MAX_ERROR_BYTES);
        assert!(t(&big).len() <= crate::text::MAX_ERROR_BYTES);
    }

    #[test]
    fn error_counts_are_bounded() {
        let mut c = ErrorCounts::default();
        for i in 0..100_000 {
            c.increment(format!("e{i}"));
        }
        assert_eq!(c.len(), MAX_ERROR_KEYS);
        assert_eq!(c.increment("e99999".into()), 2);
        assert_eq!(c.increment("e0".into()), 1);
        assert_eq!(c.len(), MAX_ERROR_KEYS);
    }
}
