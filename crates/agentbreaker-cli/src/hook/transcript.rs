//! Spend from the agents' transcripts: hook inputs carry no token counts, so each hook call reads
//! what the transcript gained since the last call (a remembered byte offset) and turns it into
//! Monitor `usage` events.
//!
//! - Claude Code (`~/.claude/projects/.../<session>.jsonl`): `assistant` lines carry
//!   `message.usage`; one API response is written as several lines sharing `message.id`, and only
//!   the last has the real `output_tokens` (the others hold placeholders). Each message id is
//!   counted once, its figures raised to the largest seen (so the final line's output counts).
//!   `<synthetic>` messages are not API calls and are skipped.
//! - Codex CLI (the rollout file): `event_msg` lines of `payload.type: token_count` carry the
//!   session's cumulative `total_token_usage`; the increase since the last one counts (the same
//!   line often comes twice). `input_tokens` includes `cached_input_tokens`, which are priced as
//!   cache reads. The model comes from the hook input or the last `turn_context` line.
//! - Gemini CLI (`.../chats/session-*.jsonl`): `gemini` messages carry `tokens` and are
//!   re-appended with the same `id` when updated (the last wins); an older `.json` chat file is
//!   one object, read whole (up to 16 MB) and counted by its totals.
//!
//! Bounds: a transcript is only read, never written; at most 4 MB of it per call (the rest on the
//! next calls); a line longer than that is skipped; special files are refused without blocking;
//! a transcript over 100 MB when first seen is counted from its end.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::protocol::Agent;

/// The most bytes read from one transcript in one hook call.
pub const MAX_READ_PER_CALL: u64 = 4 * 1024 * 1024;
/// A transcript larger than this when first seen is counted from its end.
pub const HUGE_TRANSCRIPT: u64 = 100 * 1024 * 1024;
/// The largest old-style Gemini `.json` chat file read whole.
const MAX_WHOLE_FILE: u64 = 16 * 1024 * 1024;
/// Message ids remembered per transcript (for the dedup of repeated lines).
const MAX_SEEN: usize = 64;

/// Token counts, in the Monitor's `usage` terms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tokens {
    /// Uncached input.
    pub input: u64,
    /// Output (with reasoning/thoughts).
    pub output: u64,
    /// Cache writes.
    pub cache_write: u64,
    /// Cache reads.
    pub cache_read: u64,
}

impl Tokens {
    /// The increase of each figure from `before` (0 when it fell), and `before` raised to `self`.
    fn rise_from(self, before: &mut Tokens) -> Tokens {
        let d = Tokens {
            input: self.input.saturating_sub(before.input),
            output: self.output.saturating_sub(before.output),
            cache_write: self.cache_write.saturating_sub(before.cache_write),
            cache_read: self.cache_read.saturating_sub(before.cache_read),
        };
        before.input = before.input.max(self.input);
        before.output = before.output.max(self.output);
        before.cache_write = before.cache_write.max(self.cache_write);
        before.cache_read = before.cache_read.max(self.cache_read);
        d
    }

    fn add(&mut self, o: Tokens) {
        self.input = self.input.saturating_add(o.input);
        self.output = self.output.saturating_add(o.output);
        self.cache_write = self.cache_write.saturating_add(o.cache_write);
        self.cache_read = self.cache_read.saturating_add(o.cache_read);
    }

    fn is_zero(&self) -> bool {
        *self == Tokens::default()
    }
}

/// A message id and the figures already counted for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// The message id (at most 128 bytes kept).
    pub id: String,
    /// What was counted.
    pub tokens: Tokens,
}

/// Where one transcript was read up to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cursor {
    /// The transcript (at most 4 KB kept; a longer path is not read).
    pub path: String,
    /// The task its spend counts for (`None`: the session; a subagent's id for its transcript).
    pub task: Option<String>,
    /// Bytes consumed.
    pub offset: u64,
    /// The file's inode when last read (a new file starts again from 0).
    pub ino: u64,
    /// Inside a line longer than a call's read: skip up to its end.
    #[serde(default)]
    pub skip_line: bool,
    /// The last message ids counted.
    #[serde(default)]
    pub seen: Vec<Seen>,
    /// Cumulative totals already counted (Codex, old Gemini files).
    #[serde(default)]
    pub totals: Tokens,
    /// The model last named by the transcript.
    #[serde(default)]
    pub model: Option<String>,
}

/// New spend of one task and model.
#[derive(Debug, Clone, PartialEq)]
pub struct Spend {
    /// The task it counts for.
    pub task: Option<String>,
    /// The model (prices it).
    pub model: Option<String>,
    /// The tokens.
    pub tokens: Tokens,
}

impl Spend {
    /// The Monitor event.
    pub fn event(&self) -> Value {
        let mut e = json!({
            "type": "usage",
            "usage": {
                "input_tokens": self.tokens.input,
                "output_tokens": self.tokens.output,
                "cache_creation_input_tokens": self.tokens.cache_write,
                "cache_read_input_tokens": self.tokens.cache_read,
            },
        });
        if let Some(m) = &self.model {
            e["model"] = json!(m);
        }
        if let Some(t) = &self.task {
            e["taskId"] = json!(t);
        }
        e
    }
}

fn num(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn remember(cursor: &mut Cursor, id: &str, t: Tokens) -> Tokens {
    let id = agentbreaker::text::truncate(id, 128);
    if let Some(i) = cursor.seen.iter().position(|s| s.id == id) {
        let mut seen = cursor.seen.remove(i);
        let d = t.rise_from(&mut seen.tokens);
        cursor.seen.push(seen);
        return d;
    }
    if cursor.seen.len() >= MAX_SEEN {
        cursor.seen.remove(0);
    }
    cursor.seen.push(Seen {
        id: id.to_string(),
        tokens: t,
    });
    t
}

/// Reads the new part of a transcript; returns the spend it adds (per model) and, when the file
/// could not be read or was cut short, one line saying so.
pub fn read_new(
    agent: Agent,
    cursor: &mut Cursor,
    model_hint: Option<&str>,
) -> (Vec<Spend>, Option<String>) {
    let mut spend: Vec<Spend> = Vec::new();
    let note = read_into(agent, cursor, model_hint, &mut spend).err();
    spend.retain(|s| !s.tokens.is_zero());
    (spend, note)
}

fn add_spend(spend: &mut Vec<Spend>, task: &Option<String>, model: Option<String>, t: Tokens) {
    if t.is_zero() {
        return;
    }
    match spend.iter_mut().find(|s| s.model == model) {
        Some(s) => s.tokens.add(t),
        None => spend.push(Spend {
            task: task.clone(),
            model,
            tokens: t,
        }),
    }
}

fn open_transcript(path: &str) -> Result<File, String> {
    if path.len() > 4096 {
        return Err("the transcript path is longer than 4 KB; spend not counted".into());
    }
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => format!("no transcript at {path} yet; spend not counted"),
            _ => format!("cannot read the transcript {path}: {e}; spend not counted"),
        })
}

fn read_into(
    agent: Agent,
    cursor: &mut Cursor,
    model_hint: Option<&str>,
    spend: &mut Vec<Spend>,
) -> Result<(), String> {
    let mut file = open_transcript(&cursor.path)?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err(format!(
            "the transcript {} is not a regular file; spend not counted",
            cursor.path
        ));
    }
    let len = meta.len();
    let first_sight = cursor.ino == 0;
    if !first_sight && (meta.ino() != cursor.ino || len < cursor.offset) {
        // Replaced or cut: start again (message ids keep the dedup across the two).
        cursor.offset = 0;
        cursor.skip_line = false;
    }
    cursor.ino = meta.ino();
    if first_sight && len > HUGE_TRANSCRIPT {
        cursor.offset = len;
        cursor.skip_line = false;
        return Err(format!(
            "the transcript {} is larger than 100 MB; spend is counted from now on",
            cursor.path
        ));
    }
    if agent == Agent::Gemini && cursor.path.ends_with(".json") {
        return read_whole_gemini(&mut file, len, cursor, spend);
    }
    if len <= cursor.offset {
        return Ok(());
    }
    let want = (len - cursor.offset).min(MAX_READ_PER_CALL);
    file.seek(SeekFrom::Start(cursor.offset))
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::with_capacity(want as usize);
    file.take(want)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read the transcript {}: {e}", cursor.path))?;
    let Some(last_nl) = buf.iter().rposition(|&b| b == b'\n') else {
        if want == MAX_READ_PER_CALL {
            // One line longer than a call's read: skipped.
            cursor.offset += want;
            cursor.skip_line = true;
        }
        return Ok(());
    };
    let complete = &buf[..=last_nl];
    let mut lines = complete.split(|&b| b == b'\n');
    if cursor.skip_line {
        lines.next();
        cursor.skip_line = false;
    }
    for line in lines {
        if line.is_empty() {
            continue;
        }
        match agent {
            Agent::Claude => claude_line(line, cursor, spend),
            Agent::Codex => codex_line(line, cursor, model_hint, spend),
            Agent::Gemini => gemini_line(line, cursor, spend),
        }
    }
    cursor.offset += (last_nl + 1) as u64;
    Ok(())
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn claude_line(line: &[u8], cursor: &mut Cursor, spend: &mut Vec<Spend>) {
    if !contains(line, b"\"usage\"") {
        return;
    }
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    if v.get("type").and_then(Value::as_str) != Some("assistant") {
        return;
    }
    let Some(msg) = v.get("message") else { return };
    let Some(usage) = msg.get("usage").filter(|u| u.is_object()) else {
        return;
    };
    let model = msg.get("model").and_then(Value::as_str).map(str::to_string);
    if model.as_deref() == Some("<synthetic>") {
        return;
    }
    let t = Tokens {
        input: num(usage, "input_tokens"),
        output: num(usage, "output_tokens"),
        cache_write: num(usage, "cache_creation_input_tokens"),
        cache_read: num(usage, "cache_read_input_tokens"),
    };
    let id = msg
        .get("id")
        .and_then(Value::as_str)
        .or_else(|| v.get("requestId").and_then(Value::as_str));
    let d = match id {
        Some(id) => remember(cursor, id, t),
        None => t,
    };
    let task = cursor.task.clone();
    add_spend(spend, &task, model, d);
}

fn codex_line(line: &[u8], cursor: &mut Cursor, model_hint: Option<&str>, spend: &mut Vec<Spend>) {
    if contains(line, b"\"turn_context\"") {
        if let Ok(v) = serde_json::from_slice::<Value>(line)
            && let Some(m) = v.pointer("/payload/model").and_then(Value::as_str)
        {
            cursor.model = Some(agentbreaker::text::truncate(m, 128).to_string());
        }
        return;
    }
    if !contains(line, b"\"token_count\"") {
        return;
    }
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    let Some(total) = v.pointer("/payload/info/total_token_usage") else {
        return;
    };
    let input = num(total, "input_tokens");
    let cached = num(total, "cached_input_tokens").min(input);
    let t = Tokens {
        input: input - cached,
        output: num(total, "output_tokens"),
        cache_write: num(total, "cache_write_input_tokens"),
        cache_read: cached,
    };
    let d = t.rise_from(&mut cursor.totals);
    let model = model_hint
        .map(str::to_string)
        .or_else(|| cursor.model.clone());
    let task = cursor.task.clone();
    add_spend(spend, &task, model, d);
}

fn gemini_tokens(msg: &Value) -> Option<Tokens> {
    if msg.get("type").and_then(Value::as_str) != Some("gemini") {
        return None;
    }
    let tokens = msg.get("tokens").filter(|t| t.is_object())?;
    let input = num(tokens, "input");
    let cached = num(tokens, "cached").min(input);
    Some(Tokens {
        input: input - cached,
        output: num(tokens, "output").saturating_add(num(tokens, "thoughts")),
        cache_write: 0,
        cache_read: cached,
    })
}

fn gemini_line(line: &[u8], cursor: &mut Cursor, spend: &mut Vec<Spend>) {
    if !contains(line, b"\"tokens\"") {
        return;
    }
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    let Some(t) = gemini_tokens(&v) else { return };
    let d = match v.get("id").and_then(Value::as_str) {
        Some(id) => remember(cursor, id, t),
        None => t,
    };
    let model = v.get("model").and_then(Value::as_str).map(str::to_string);
    let task = cursor.task.clone();
    add_spend(spend, &task, model, d);
}

fn read_whole_gemini(
    file: &mut File,
    len: u64,
    cursor: &mut Cursor,
    spend: &mut Vec<Spend>,
) -> Result<(), String> {
    if len > MAX_WHOLE_FILE {
        return Err(format!(
            "the chat file {} is larger than 16 MB; spend not counted",
            cursor.path
        ));
    }
    if len == cursor.offset {
        return Ok(());
    }
    let mut buf = Vec::with_capacity(len as usize);
    file.take(MAX_WHOLE_FILE)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    cursor.offset = len;
    let Ok(doc) = serde_json::from_slice::<Value>(&buf) else {
        return Ok(());
    };
    let mut per_model: Vec<(Option<String>, Tokens)> = Vec::new();
    let mut total = Tokens::default();
    for msg in doc
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(t) = gemini_tokens(msg) {
            total.add(t);
            let model = msg.get("model").and_then(Value::as_str).map(str::to_string);
            if let Some(m) = per_model.iter_mut().find(|(m, _)| *m == model) {
                m.1.add(t);
            } else {
                per_model.push((model, t));
            }
        }
    }
    let d = total.rise_from(&mut cursor.totals);
    let model = per_model
        .iter()
        .max_by_key(|(_, t)| t.input + t.output)
        .and_then(|(m, _)| m.clone());
    let task = cursor.task.clone();
    add_spend(spend, &task, model, d);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn cursor(path: &std::path::Path) -> Cursor {
        Cursor {
            path: path.to_string_lossy().into_owned(),
            ..Cursor::default()
        }
    }

    #[test]
    fn claude_counts_each_message_once_with_its_final_output() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let line = |out: u64, stop: bool| {
            format!(
                "{}\n",
                json!({"type": "assistant", "message": {"id": "m1", "model": "claude-x",
                  "stop_reason": if stop { json!("end_turn") } else { Value::Null },
                  "usage": {"input_tokens": 10, "output_tokens": out,
                            "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000}}})
            )
        };
        std::fs::write(&p, line(1, false)).unwrap();
        let mut c = cursor(&p);
        let (s, note) = read_new(Agent::Claude, &mut c, None);
        assert!(note.is_none());
        assert_eq!(s[0].tokens.input, 10);
        assert_eq!(s[0].tokens.output, 1);
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(line(1, false).as_bytes()).unwrap();
        f.write_all(line(250, true).as_bytes()).unwrap();
        f.write_all(b"{\"type\":\"assistant\",\"partial").unwrap();
        let (s, _) = read_new(Agent::Claude, &mut c, None);
        assert_eq!(s.len(), 1);
        assert_eq!(
            s[0].tokens,
            Tokens {
                input: 0,
                output: 249,
                cache_write: 0,
                cache_read: 0
            }
        );
        let (s, _) = read_new(Agent::Claude, &mut c, None);
        assert!(s.is_empty());
    }

    #[test]
    fn codex_counts_the_rise_of_the_cumulative_total() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rollout-x.jsonl");
        let tc = |i: u64, o: u64| {
            format!(
                "{}\n",
                json!({"type": "event_msg", "payload": {"type": "token_count", "info": {
                    "total_token_usage": {"input_tokens": i, "cached_input_tokens": i / 2,
                                          "output_tokens": o}}}})
            )
        };
        let text = format!(
            "{}\n{}{}{}",
            json!({"type": "turn_context", "payload": {"model": "gpt-5"}}),
            tc(100, 10),
            tc(100, 10),
            tc(300, 30)
        );
        std::fs::write(&p, text).unwrap();
        let mut c = cursor(&p);
        let (s, _) = read_new(Agent::Codex, &mut c, None);
        assert_eq!(s[0].model.as_deref(), Some("gpt-5"));
        assert_eq!(s[0].tokens.input + s[0].tokens.cache_read, 300);
        assert_eq!(s[0].tokens.output, 30);
    }

    #[test]
    fn gemini_messages_re_appended_count_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("session-x.jsonl");
        let m = |o: u64| {
            format!(
                "{}\n",
                json!({"id": "g1", "type": "gemini", "model": "gemini-2.5-pro", "content": "",
                       "tokens": {"input": 50, "output": o, "cached": 10, "thoughts": 5, "total": 0}})
            )
        };
        std::fs::write(&p, format!("{{\"sessionId\":\"s\"}}\n{}{}", m(0), m(20))).unwrap();
        let mut c = cursor(&p);
        let (s, _) = read_new(Agent::Gemini, &mut c, None);
        assert_eq!(s[0].tokens.input, 40);
        assert_eq!(s[0].tokens.cache_read, 10);
        assert_eq!(s[0].tokens.output, 25);
    }

    #[test]
    fn missing_binary_and_special_files_cost_little() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cursor(&dir.path().join("nope.jsonl"));
        let (s, note) = read_new(Agent::Claude, &mut c, None);
        assert!(s.is_empty() && note.is_some());
        let p = dir.path().join("bin.jsonl");
        let junk: Vec<u8> = (0..(5 * 1024 * 1024))
            .map(|i| (i % 251) as u8 | 1)
            .collect();
        std::fs::write(&p, &junk).unwrap();
        let mut c = cursor(&p);
        for _ in 0..4 {
            let (s, _) = read_new(Agent::Claude, &mut c, None);
            assert!(s.is_empty());
        }
        assert!(c.offset <= junk.len() as u64);
        let mut c = cursor(std::path::Path::new("/dev/zero"));
        let (_, note) = read_new(Agent::Claude, &mut c, None);
        assert!(note.is_some());
    }
}
