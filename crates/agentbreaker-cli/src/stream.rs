//! Reading an agent's output: one line at a time, into the Monitor's events (contract section
//! 11: `assistant`, `tool_use`, `tool_result`, `usage`, `error`, `progress`, `heartbeat`,
//! `alive`). The parsers decide nothing: every decision comes from the Monitor's verdicts.
//!
//! Three formats are understood (and told apart line by line in `auto` mode):
//! - Claude Code `--output-format stream-json`: per model message (one message is spread over
//!   several `assistant` lines with the same `message.id`, one content block each), an
//!   `assistant` event with its text (`""` when it only called tools) before its `tool_use`
//!   events, and its `usage` once at its largest figures (a later line of the message whose
//!   counts grew adds the growth); per `tool_result` block of a `user` line a `tool_result`
//!   (and, for a successful `Edit`, `Write`, `MultiEdit` or `NotebookEdit`, a `progress` event
//!   with the file and a digest of the edit just before it); subagent lines (`parent_tool_use_id`)
//!   count for the task named by that id, which is closed (heartbeat `done`) when its parent's
//!   `Task` call returns; the final `result` (its text is the final answer, an error result an
//!   `error` event);
//! - Codex `exec --json`: `agent_message` items → `assistant`; `command_execution`,
//!   `file_change`, `mcp_tool_call` and `web_search` items → a `tool_use` (when the item starts,
//!   or when it completes without having started) and a `tool_result` when it completes (a
//!   completed `file_change` also a `progress`); `turn.completed` → `usage`; `turn.failed` →
//!   `error`; the top-level `error` lines (retry notices like "Reconnecting... 2/5", or the
//!   message a `turn.failed` repeats) and `error` items (warnings) → transient `error` events;
//! - the Monitor's own events, one JSON object per line.
//!
//! Lines that only show the agent is alive (`system`, `thread.started`, reasoning, ...) become
//! `alive` events. Anything else (non-JSON, truncated JSON, binary, unknown shapes) is counted as
//! malformed and otherwise ignored: the supervisor passes every line through unchanged whatever it
//! says (and takes any line as a sign of life).

use std::collections::{HashMap, HashSet, VecDeque};
use std::str::FromStr;

use serde_json::{Map, Value, json};

/// The most recent message / item / tool ids remembered across lines.
const MAX_REMEMBERED_IDS: usize = 4096;
/// The most tasks with a model message in progress at once (more: the oldest is flushed).
const MAX_PENDING_MESSAGES: usize = 64;
/// The longest text kept for a message still being read (the Monitor keeps 8 KB of a step's text;
/// what matters for it is the start and the length).
const MAX_PENDING_TEXT: usize = 64 * 1024;

/// Which format the agent prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Recognise each line's format by its shape.
    Auto,
    /// Claude Code `--output-format stream-json`.
    Claude,
    /// Codex `exec --json`.
    Codex,
    /// The Monitor's events (contract section 11), one per line.
    Events,
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Format::Auto),
            "claude" => Ok(Format::Claude),
            "codex" => Ok(Format::Codex),
            "events" => Ok(Format::Events),
            other => Err(format!(
                "unknown format {other:?} (auto, claude, codex, events)"
            )),
        }
    }
}

/// A set of ids with a bounded memory (oldest forgotten first).
#[derive(Debug, Default)]
struct RecentIds {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl RecentIds {
    /// True the first time `id` is seen.
    fn first_time(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        if self.order.len() >= MAX_REMEMBERED_IDS
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.set.insert(id.to_string());
        self.order.push_back(id.to_string());
        true
    }

    fn remove(&mut self, id: &str) -> bool {
        if self.set.remove(id) {
            self.order.retain(|x| x != id);
            true
        } else {
            false
        }
    }
}

/// The token counts of a Claude message: input, output, cache creation, cache read.
type Tokens = [u64; 4];

/// The largest token counts seen per Claude message id, for a bounded number of recent ids (oldest
/// forgotten first). Claude Code repeats a message's `usage` on each of its lines, and the figures
/// may grow from one line to the next (`output_tokens` 1, 1, then 244): a message counts once, at
/// its largest figures.
#[derive(Debug, Default)]
struct UsageSeen {
    counts: HashMap<String, Tokens>,
    order: VecDeque<String>,
}

impl UsageSeen {
    /// What `now` adds to what was counted for `id` (each figure's growth; all of `now` the first
    /// time), remembering the larger figures; `None` when nothing grew on a known id.
    fn growth(&mut self, id: &str, now: Tokens) -> Option<Tokens> {
        if let Some(seen) = self.counts.get_mut(id) {
            let mut add = [0; 4];
            for ((a, s), n) in add.iter_mut().zip(seen.iter_mut()).zip(now) {
                *a = n.saturating_sub(*s);
                *s = (*s).max(n);
            }
            return add.iter().any(|&a| a > 0).then_some(add);
        }
        if self.order.len() >= MAX_REMEMBERED_IDS
            && let Some(old) = self.order.pop_front()
        {
            self.counts.remove(&old);
        }
        self.counts.insert(id.to_string(), now);
        self.order.push_back(id.to_string());
        Some(now)
    }
}

/// What a Claude `Edit`/`Write`/`MultiEdit`/`NotebookEdit` call changes: its file and a digest of
/// the path and the new content its input specifies.
#[derive(Debug, Clone, PartialEq)]
struct Edit {
    path: String,
    digest: String,
}

/// A Claude model message whose `assistant` event is not sent yet (its text may go on in the
/// next line), or was sent (its tool calls follow).
#[derive(Debug)]
struct Pending {
    task: Option<String>,
    message: String,
    text: String,
    sent: bool,
}

/// Turns lines into Monitor events, remembering what it needs across lines.
#[derive(Debug)]
pub struct StreamParser {
    format: Format,
    /// Claude message ids whose usage was counted, with the figures counted.
    usage_counted: UsageSeen,
    /// Codex item ids whose tool call was sent.
    items_started: RecentIds,
    /// Claude tool_use id → the edit it makes (for `progress` when it succeeds).
    edits: HashMap<String, Edit>,
    edit_order: VecDeque<String>,
    /// Claude messages in progress, oldest first (at most one per task).
    pending: VecDeque<Pending>,
    /// Claude subagent tasks seen and not yet closed.
    subtasks: RecentIds,
    /// Lines read.
    pub lines: u64,
    /// Lines that were not a recognised event.
    pub malformed: u64,
    /// The timestamp (ms since the epoch) of the last line that carried one.
    pub last_timestamp_ms: Option<u64>,
    /// The timestamp of the line just parsed, if it carried one.
    pub line_timestamp_ms: Option<u64>,
    /// The agent's final answer (Claude's `result`, Codex's last `agent_message`).
    pub final_text: Option<String>,
}

fn event(kind: &str, task: Option<&str>, fields: Value) -> Value {
    let mut map = match fields {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    map.insert("type".into(), json!(kind));
    if let Some(t) = task {
        map.insert("taskId".into(), json!(t));
    }
    Value::Object(map)
}

fn alive(task: Option<&str>) -> Value {
    event("alive", task, json!({}))
}

impl StreamParser {
    /// A parser for `format`.
    pub fn new(format: Format) -> Self {
        StreamParser {
            format,
            usage_counted: UsageSeen::default(),
            items_started: RecentIds::default(),
            edits: HashMap::new(),
            edit_order: VecDeque::new(),
            pending: VecDeque::new(),
            subtasks: RecentIds::default(),
            lines: 0,
            malformed: 0,
            last_timestamp_ms: None,
            line_timestamp_ms: None,
            final_text: None,
        }
    }

    /// Parses one line (without its newline) into Monitor events.
    pub fn parse_line(&mut self, line: &[u8]) -> Vec<Value> {
        self.lines += 1;
        self.line_timestamp_ms = None;
        let text = match std::str::from_utf8(line) {
            Ok(t) => t.trim(),
            Err(_) => {
                self.malformed += 1;
                return Vec::new();
            }
        };
        if text.is_empty() {
            return Vec::new();
        }
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(text) else {
            self.malformed += 1;
            return Vec::new();
        };
        self.line_timestamp_ms = timestamp_of(&obj);
        self.last_timestamp_ms = self.line_timestamp_ms.or(self.last_timestamp_ms);
        let format = match self.format {
            Format::Auto => detect(&obj),
            f => Some(f),
        };
        let events = match format {
            Some(Format::Claude) => self.claude(&obj),
            Some(Format::Codex) => self.codex(&obj),
            // The Monitor validates it: a malformed event is refused there (and counted).
            Some(Format::Events) if obj.get("type").is_some_and(Value::is_string) => {
                Some(vec![Value::Object(obj)])
            }
            _ => None,
        };
        events.unwrap_or_else(|| {
            self.malformed += 1;
            Vec::new()
        })
    }

    /// The events still held back at the end of the stream (a Claude message whose text was the
    /// last thing the agent printed).
    pub fn finish(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(p) = self.pending.pop_front() {
            push_pending(p, &mut out);
        }
        out
    }

    fn remember_edit(&mut self, id: &str, edit: Edit) {
        if self.edit_order.len() >= MAX_REMEMBERED_IDS
            && let Some(old) = self.edit_order.pop_front()
        {
            self.edits.remove(&old);
        }
        self.edits.insert(id.to_string(), edit);
        self.edit_order.push_back(id.to_string());
    }

    /// Sends (or drops, when already sent) the message in progress for `task`.
    fn flush(&mut self, task: Option<&str>, out: &mut Vec<Value>) {
        if let Some(i) = self.pending.iter().position(|p| p.task.as_deref() == task)
            && let Some(p) = self.pending.remove(i)
        {
            push_pending(p, out);
        }
    }

    /// The message in progress for `task`, made the one with id `message` (flushing another).
    fn message(&mut self, task: Option<&str>, message: &str, out: &mut Vec<Value>) -> &mut Pending {
        let same = self
            .pending
            .iter()
            .position(|p| p.task.as_deref() == task && p.message == message);
        let i = match same {
            Some(i) => i,
            None => {
                self.flush(task, out);
                if self.pending.len() >= MAX_PENDING_MESSAGES
                    && let Some(p) = self.pending.pop_front()
                {
                    push_pending(p, out);
                }
                self.pending.push_back(Pending {
                    task: task.map(str::to_string),
                    message: message.to_string(),
                    text: String::new(),
                    sent: false,
                });
                self.pending.len() - 1
            }
        };
        &mut self.pending[i]
    }

    /// A Claude Code stream-json line; `None` when it is not one.
    fn claude(&mut self, obj: &Map<String, Value>) -> Option<Vec<Value>> {
        let task_id = obj
            .get("parent_tool_use_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(truncate_id);
        let task = task_id.as_deref();
        if let Some(t) = task {
            self.subtasks.first_time(t);
        }
        let mut out = Vec::new();
        match obj.get("type").and_then(Value::as_str)? {
            "assistant" => {
                let message = obj.get("message")?.as_object()?;
                let id = match message.get("id").and_then(Value::as_str) {
                    Some(id) if !id.is_empty() => id.to_string(),
                    // No id: every line is a message of its own.
                    _ => format!("line {}", self.lines),
                };
                let mut calls = Vec::new();
                for block in content_blocks(message) {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            let t = block.get("text").and_then(Value::as_str).unwrap_or("");
                            let p = self.message(task, &id, &mut out);
                            // Text after the message's tool calls cannot join its step any more.
                            if !p.sent && p.text.len() < MAX_PENDING_TEXT {
                                if !p.text.is_empty() {
                                    p.text.push('\n');
                                }
                                p.text.push_str(t);
                            }
                        }
                        Some("tool_use") => {
                            let name = block
                                .get("name")
                                .and_then(Value::as_str)
                                .filter(|n| !n.is_empty())
                                .unwrap_or("tool");
                            let input = block.get("input").cloned().unwrap_or(Value::Null);
                            let call_id = block.get("id").and_then(Value::as_str);
                            if let (Some(cid), Some(edit)) = (call_id, edit_of(name, &input)) {
                                self.remember_edit(cid, edit);
                            }
                            let mut fields = json!({"name": name, "input": input});
                            if let Some(cid) = call_id {
                                fields["id"] = json!(cid);
                            }
                            calls.push(fields);
                        }
                        _ => {}
                    }
                }
                if !calls.is_empty() {
                    let p = self.message(task, &id, &mut out);
                    if !p.sent {
                        p.sent = true;
                        let text = std::mem::take(&mut p.text);
                        out.push(event("assistant", task, json!({"text": text})));
                    }
                    for c in calls {
                        out.push(event("tool_use", task, c));
                    }
                }
                // The message's usage once, at its largest figures: the first line's, then what
                // a later line of the same message adds to them.
                if let Some(usage) = message.get("usage").and_then(Value::as_object)
                    && let Some([input, output, creation, read]) = self.usage_counted.growth(
                        &id,
                        [
                            count(usage, "input_tokens"),
                            count(usage, "output_tokens"),
                            count(usage, "cache_creation_input_tokens"),
                            count(usage, "cache_read_input_tokens"),
                        ],
                    )
                {
                    let mut fields = json!({"usage": {
                        "input_tokens": input,
                        "output_tokens": output,
                        "cache_creation_input_tokens": creation,
                        "cache_read_input_tokens": read,
                    }});
                    if let Some(model) = message.get("model").and_then(Value::as_str) {
                        fields["model"] = json!(model);
                    }
                    out.push(event("usage", task, fields));
                }
            }
            "user" => {
                // The model call ended: its message is complete.
                self.flush(task, &mut out);
                let message = obj.get("message")?.as_object()?;
                for block in content_blocks(message) {
                    if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                        continue;
                    }
                    let ok = block.get("is_error").and_then(Value::as_bool) != Some(true);
                    let call_id = block.get("tool_use_id").and_then(Value::as_str);
                    if let Some(cid) = call_id {
                        // A Task call returned: its subagent is done.
                        let sub = truncate_id(cid);
                        if self.subtasks.remove(&sub) {
                            self.flush(Some(&sub), &mut out);
                            out.push(event("heartbeat", Some(&sub), json!({"phase": "done"})));
                        }
                    }
                    let edit = call_id.and_then(|cid| self.edits.remove(cid));
                    if ok && let Some(edit) = edit {
                        out.push(event(
                            "progress",
                            task,
                            json!({"files": [edit.path], "digest": edit.digest}),
                        ));
                    }
                    let mut fields = json!({"ok": ok, "text": result_text(block.get("content"))});
                    if let Some(cid) = call_id {
                        fields["id"] = json!(cid);
                    }
                    out.push(event("tool_result", task, fields));
                }
            }
            "result" => {
                let tasks: Vec<Option<String>> =
                    self.pending.iter().map(|p| p.task.clone()).collect();
                for t in tasks {
                    self.flush(t.as_deref(), &mut out);
                }
                let text = obj.get("result").and_then(Value::as_str);
                if let Some(t) = text {
                    self.final_text = Some(t.to_string());
                }
                if obj.get("is_error").and_then(Value::as_bool) == Some(true) {
                    let subtype = obj
                        .get("subtype")
                        .and_then(Value::as_str)
                        .unwrap_or("error");
                    // The reason: the result's text, else its `errors` (newer Claude Code).
                    let errors: Vec<&str> = obj
                        .get("errors")
                        .and_then(Value::as_array)
                        .map(|e| e.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let text = match text.filter(|t| !t.trim().is_empty()) {
                        Some(t) => format!("agent result {subtype}: {t}"),
                        None if !errors.is_empty() => {
                            format!("agent result {subtype}: {}", errors.join("; "))
                        }
                        None => format!("agent result {subtype}"),
                    };
                    out.push(event("error", task, json!({"text": text})));
                }
            }
            "system" | "stream_event" => {}
            _ => return None,
        }
        if out.is_empty() {
            out.push(alive(task));
        }
        Some(out)
    }

    /// A Codex `exec --json` line; `None` when it is not one.
    fn codex(&mut self, obj: &Map<String, Value>) -> Option<Vec<Value>> {
        let kind = obj.get("type").and_then(Value::as_str)?;
        let mut out = Vec::new();
        match kind {
            "item.started" | "item.updated" | "item.completed" => {
                let item = obj.get("item")?.as_object()?;
                let item_type = item
                    .get("type")
                    .or_else(|| item.get("item_type"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let id = item.get("id").and_then(Value::as_str).unwrap_or("");
                let completed = kind == "item.completed";
                if let Some((name, input)) = codex_call(item_type, item) {
                    // One call per item: when it starts, or when it completes without a start.
                    let first = if id.is_empty() {
                        completed
                    } else if completed {
                        !self.items_started.remove(id)
                    } else {
                        self.items_started.first_time(id)
                    };
                    if first {
                        let mut fields = json!({"name": name, "input": input});
                        if !id.is_empty() {
                            fields["id"] = json!(id);
                        }
                        out.push(event("tool_use", None, fields));
                    }
                    if completed {
                        let (ok, text) = codex_result(item_type, item);
                        if item_type == "file_change" && ok {
                            out.push(event("progress", None, file_change_progress(item)));
                        }
                        let mut fields = json!({"ok": ok, "text": text});
                        if !id.is_empty() {
                            fields["id"] = json!(id);
                        }
                        out.push(event("tool_result", None, fields));
                    }
                } else if completed {
                    match item_type {
                        "agent_message" | "assistant_message" => {
                            let text = item.get("text").and_then(Value::as_str).unwrap_or("");
                            out.push(event("assistant", None, json!({"text": text})));
                            self.final_text = Some(text.to_string());
                        }
                        // Codex's own warnings ("Falling back from WebSockets to HTTPS transport.",
                        // "Model metadata for `x` not found"): reported, never the agent's failure.
                        "error" => out.push(event(
                            "error",
                            None,
                            json!({"text": error_message(item.get("message")), "transient": true}),
                        )),
                        _ => {}
                    }
                }
            }
            "turn.completed" => {
                if let Some(usage) = obj.get("usage").and_then(Value::as_object) {
                    // OpenAI's input_tokens include the cached ones.
                    let input = count(usage, "input_tokens");
                    let cached = count(usage, "cached_input_tokens").min(input);
                    out.push(event(
                        "usage",
                        None,
                        json!({"usage": {
                            "input_tokens": input - cached,
                            "output_tokens": count(usage, "output_tokens"),
                            "cache_read_input_tokens": cached,
                        }}),
                    ));
                }
            }
            "turn.failed" => out.push(event(
                "error",
                None,
                json!({"text": error_message(obj.get("error"))}),
            )),
            // A retry notice ("Reconnecting... 2/5 (...)"), or the fatal error that the
            // `turn.failed` after it repeats: counted once, there.
            "error" => out.push(event(
                "error",
                None,
                json!({"text": error_message(obj.get("message")), "transient": true}),
            )),
            k if k.starts_with("thread.") || k.starts_with("turn.") => {}
            "token_count" => {}
            _ => return None,
        }
        if out.is_empty() {
            out.push(alive(None));
        }
        Some(out)
    }
}

fn push_pending(p: Pending, out: &mut Vec<Value>) {
    if !p.sent {
        out.push(event(
            "assistant",
            p.task.as_deref(),
            json!({"text": p.text}),
        ));
    }
}

fn truncate_id(id: &str) -> String {
    agentbreaker::text::truncate(id, agentbreaker::budget::MAX_TASK_ID_BYTES).to_string()
}

/// A 64-bit FNV-1a hash of length-prefixed parts, as 16 hex digits (stable across runs and
/// platforms).
fn digest(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in (part.len() as u64)
            .to_le_bytes()
            .iter()
            .chain(part.as_bytes())
        {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The file a Claude edit call changes and the digest of what its input writes (so the same edit
/// applied again has the same digest).
fn edit_of(name: &str, input: &Value) -> Option<Edit> {
    let s = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or("");
    let path = match name {
        "NotebookEdit" => s("notebook_path"),
        "Edit" | "Write" | "MultiEdit" => s("file_path"),
        _ => return None,
    };
    if path.is_empty() {
        return None;
    }
    let digest = match name {
        "Write" => digest(&[name, path, s("content")]),
        "Edit" => digest(&[
            name,
            path,
            s("old_string"),
            s("new_string"),
            if input.get("replace_all").and_then(Value::as_bool) == Some(true) {
                "all"
            } else {
                "one"
            },
        ]),
        "MultiEdit" => {
            let mut parts = vec![name, path];
            if let Some(edits) = input.get("edits").and_then(Value::as_array) {
                for e in edits {
                    parts.push(e.get("old_string").and_then(Value::as_str).unwrap_or(""));
                    parts.push(e.get("new_string").and_then(Value::as_str).unwrap_or(""));
                }
            }
            digest(&parts)
        }
        _ => digest(&[
            name,
            path,
            s("cell_id"),
            s("edit_mode"),
            s("cell_type"),
            s("new_source"),
        ]),
    };
    Some(Edit {
        path: path.to_string(),
        digest,
    })
}

/// A Codex tool item as a call: its tool name and input.
fn codex_call(item_type: &str, item: &Map<String, Value>) -> Option<(String, Value)> {
    let get = |k: &str| item.get(k).cloned().unwrap_or(Value::Null);
    match item_type {
        "command_execution" => Some(("shell".into(), json!({"command": get("command")}))),
        "file_change" => Some(("apply_patch".into(), json!({"changes": get("changes")}))),
        "mcp_tool_call" => Some((
            format!(
                "{}.{}",
                item.get("server").and_then(Value::as_str).unwrap_or("mcp"),
                item.get("tool").and_then(Value::as_str).unwrap_or("tool")
            ),
            get("arguments"),
        )),
        "web_search" => Some((
            "web_search".into(),
            json!({"query": get("query"), "action": get("action")}),
        )),
        _ => None,
    }
}

/// A completed Codex tool item's outcome: whether it succeeded, and its text.
fn codex_result(item_type: &str, item: &Map<String, Value>) -> (bool, String) {
    let status = item.get("status").and_then(Value::as_str).unwrap_or("");
    let status_failed = matches!(status, "failed" | "declined");
    match item_type {
        "command_execution" => {
            let exit_failed = item
                .get("exit_code")
                .and_then(Value::as_i64)
                .is_some_and(|c| c != 0);
            let output = item
                .get("aggregated_output")
                .and_then(Value::as_str)
                .unwrap_or("");
            (!(status_failed || exit_failed), output.to_string())
        }
        "file_change" => {
            let paths: Vec<&str> = item
                .get("changes")
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .filter_map(|x| x.get("path").and_then(Value::as_str))
                        .collect()
                })
                .unwrap_or_default();
            (
                status == "completed",
                format!("patch {status}: {}", paths.join(", ")),
            )
        }
        "mcp_tool_call" => {
            let error = item.get("error").filter(|e| !e.is_null());
            let text = match error {
                Some(e) => error_message(Some(e)),
                None => item.get("result").map(mcp_result_text).unwrap_or_default(),
            };
            (!status_failed && error.is_none(), text)
        }
        // web_search: the query (and what was opened) is all the item tells.
        _ => {
            let mut text = item
                .get("query")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if let Some(action) = item.get("action").filter(|a| !a.is_null()) {
                text.push(' ');
                text.push_str(&action.to_string());
            }
            (!status_failed, text)
        }
    }
}

/// The text blocks of an MCP result (`{content: [{type: "text", text}], structured_content}`),
/// else the result as JSON.
fn mcp_result_text(result: &Value) -> String {
    match result.get("content").and_then(Value::as_array) {
        Some(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        None if result.is_null() => String::new(),
        None => result.to_string(),
    }
}

/// A completed Codex `file_change` as progress: its paths, and a digest of the changes when they
/// say what was written (`exec --json` gives only `{path, kind}` per change today, which cannot
/// tell one edit of a file from the next, so then no digest is sent: every completed patch is
/// progress).
fn file_change_progress(item: &Map<String, Value>) -> Value {
    let changes = item
        .get("changes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let paths: Vec<&str> = changes
        .iter()
        .filter_map(|c| c.get("path").and_then(Value::as_str))
        .collect();
    let mut fields = if paths.is_empty() {
        json!({"files": 1})
    } else {
        json!({"files": paths})
    };
    let content = |c: &Value| {
        ["content", "diff", "unified_diff"]
            .iter()
            .find_map(|k| c.get(*k).and_then(Value::as_str).map(str::to_string))
    };
    if !changes.is_empty() && changes.iter().all(|c| content(c).is_some()) {
        let parts: Vec<String> = changes
            .iter()
            .flat_map(|c| {
                [
                    c.get("path")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    c.get("kind").map(Value::to_string).unwrap_or_default(),
                    content(c).unwrap_or_default(),
                ]
            })
            .collect();
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        fields["digest"] = json!(digest(&refs));
    }
    fields
}

/// Which format a line is in, by its shape.
fn detect(obj: &Map<String, Value>) -> Option<Format> {
    let kind = obj.get("type").and_then(Value::as_str)?;
    let claude_shaped = obj.contains_key("message")
        || obj.contains_key("session_id")
        || obj.contains_key("subtype")
        || obj.contains_key("parent_tool_use_id");
    match kind {
        "assistant" | "user" | "system" | "result" | "stream_event" if claude_shaped => {
            Some(Format::Claude)
        }
        k if k.starts_with("thread.") || k.starts_with("turn.") || k.starts_with("item.") => {
            Some(Format::Codex)
        }
        "error" if obj.contains_key("message") && !obj.contains_key("text") => Some(Format::Codex),
        "assistant" | "tool_use" | "tool_result" | "usage" | "error" | "progress" | "heartbeat"
        | "alive" => Some(Format::Events),
        _ => None,
    }
}

fn content_blocks(message: &Map<String, Value>) -> Vec<&Map<String, Value>> {
    match message.get("content") {
        Some(Value::Array(blocks)) => blocks.iter().filter_map(Value::as_object).collect(),
        _ => Vec::new(),
    }
}

fn count(usage: &Map<String, Value>, key: &str) -> u64 {
    usage.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// The text of a tool result's `content` (a string, or a list of text blocks).
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn error_message(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => o
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| Value::Object(o.clone()).to_string(), str::to_string),
        Some(Value::Null) | None => "error".to_string(),
        Some(other) => other.to_string(),
    }
}

/// A line's own time: a `timestamp` or `ts` field, as RFC 3339 text or epoch milliseconds.
fn timestamp_of(obj: &Map<String, Value>) -> Option<u64> {
    let v = obj.get("timestamp").or_else(|| obj.get("ts"))?;
    match v {
        Value::String(s) => s
            .parse::<jiff::Timestamp>()
            .ok()
            .and_then(|t| u64::try_from(t.as_millisecond()).ok()),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
