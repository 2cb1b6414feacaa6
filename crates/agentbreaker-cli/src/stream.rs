//! Reading an agent's output: one line at a time, into signals for the breakers.
//!
//! Three formats are understood (and told apart line by line in `auto` mode):
//! - Claude Code `--output-format stream-json`: `assistant` lines (text and `tool_use` blocks, with
//!   the message's `usage` repeated on every block of one message — counted once per message id),
//!   `user` lines carrying `tool_result`s (`is_error` results are errors; a successful `Edit`,
//!   `Write`, `MultiEdit` or `NotebookEdit` is progress), and the final `result`;
//! - Codex `exec --json`: `item.*` events (`agent_message`, `command_execution`, `file_change`,
//!   `mcp_tool_call`, `web_search`, `error`), `turn.completed` usage, `turn.failed` and `error`;
//! - the plain event objects of SPEC section 4 (`heartbeat`, `assistant`, `tool_use`, `usage`).
//!
//! Anything else (non-JSON, truncated JSON, binary, unknown shapes) is counted as malformed and
//! otherwise ignored: the supervisor passes every line through unchanged whatever it says.

use std::collections::{HashMap, HashSet, VecDeque};
use std::str::FromStr;

use agentbreaker::{
    AgentEvent, AgentStep, BudgetBreaker, EventKind, IterationMetrics, StagnationBreaker, Usage,
};

use crate::report::Stop;
use serde_json::{Map, Value};

/// The most recent message / item / tool ids remembered for de-duplication.
const MAX_REMEMBERED_IDS: usize = 4096;

/// Which format the agent prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Recognise each line's format by its shape.
    Auto,
    /// Claude Code `--output-format stream-json`.
    Claude,
    /// Codex `exec --json`.
    Codex,
    /// The event objects of SPEC section 4.
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

/// What one line tells the breakers.
#[derive(Debug, Clone, PartialEq)]
pub enum Signal {
    /// An event for the BudgetBreaker.
    Event(AgentEvent),
    /// A failed tool call or agent error, for the StagnationBreaker's error counts.
    Error(String),
    /// Files changed by a successful edit, for the StagnationBreaker's progress.
    Progress(u64),
    /// The agent's final answer (Claude's `result`, Codex's last `agent_message`).
    FinalText(String),
    /// One completed tool call and its result, for the step detectors.
    Step(AgentStep),
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
}

/// Turns lines into [`Signal`]s, remembering what it needs across lines.
#[derive(Debug)]
pub struct StreamParser {
    format: Format,
    /// Claude message ids whose usage was counted.
    usage_counted: RecentIds,
    /// Codex item ids whose tool call was counted.
    items_counted: RecentIds,
    /// Claude tool_use id → (tool name, its call as text), to pair results with their calls.
    tool_names: HashMap<String, (String, String)>,
    tool_order: VecDeque<String>,
    /// Lines read.
    pub lines: u64,
    /// Lines that were not a recognised event.
    pub malformed: u64,
    /// The timestamp (ms since the epoch) of the last line that carried one.
    pub last_timestamp_ms: Option<u64>,
}

impl StreamParser {
    /// A parser for `format`.
    pub fn new(format: Format) -> Self {
        StreamParser {
            format,
            usage_counted: RecentIds::default(),
            items_counted: RecentIds::default(),
            tool_names: HashMap::new(),
            tool_order: VecDeque::new(),
            lines: 0,
            malformed: 0,
            last_timestamp_ms: None,
        }
    }

    /// Parses one line (without its newline).
    pub fn parse_line(&mut self, line: &[u8]) -> Vec<Signal> {
        self.lines += 1;
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
        self.last_timestamp_ms = timestamp_of(&obj).or(self.last_timestamp_ms);
        let format = match self.format {
            Format::Auto => detect(&obj),
            f => Some(f),
        };
        let signals = match format {
            Some(Format::Claude) => self.claude(&obj),
            Some(Format::Codex) => self.codex(&obj),
            Some(Format::Events) => match AgentEvent::from_json(&Value::Object(obj)) {
                Ok(e) => Some(vec![Signal::Event(e)]),
                Err(_) => None,
            },
            _ => None,
        };
        signals.unwrap_or_else(|| {
            self.malformed += 1;
            Vec::new()
        })
    }

    fn remember_tool(&mut self, id: &str, name: &str, call: String) {
        if self.tool_order.len() >= MAX_REMEMBERED_IDS
            && let Some(old) = self.tool_order.pop_front()
        {
            self.tool_names.remove(&old);
        }
        self.tool_names
            .insert(id.to_string(), (name.to_string(), call));
        self.tool_order.push_back(id.to_string());
    }

    /// A Claude Code stream-json line; `None` when it is not one.
    fn claude(&mut self, obj: &Map<String, Value>) -> Option<Vec<Signal>> {
        let task_id = obj
            .get("parent_tool_use_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(truncate_id);
        let event = |kind: EventKind| {
            Signal::Event(AgentEvent {
                task_id: task_id.clone(),
                kind,
            })
        };
        let mut out = Vec::new();
        match obj.get("type").and_then(Value::as_str)? {
            "assistant" => {
                let message = obj.get("message")?.as_object()?;
                let mut text = String::new();
                for block in content_blocks(message) {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            if let Some(t) = block.get("text").and_then(Value::as_str) {
                                if !text.is_empty() {
                                    text.push('\n');
                                }
                                text.push_str(t);
                            }
                        }
                        Some("tool_use") => {
                            let name = block.get("name").and_then(Value::as_str).unwrap_or("tool");
                            if let Some(id) = block.get("id").and_then(Value::as_str) {
                                let input =
                                    block.get("input").map(Value::to_string).unwrap_or_default();
                                self.remember_tool(id, name, format!("{name}: {input}"));
                            }
                            out.push(event(EventKind::ToolUse(name.to_string())));
                        }
                        _ => {}
                    }
                }
                // Only text is an output for the loop check: a tool-calling turn without text
                // must not look like "three empty outputs".
                if !text.trim().is_empty() {
                    out.insert(0, event(EventKind::Assistant(text)));
                }
                let id = message.get("id").and_then(Value::as_str).unwrap_or("");
                if let Some(usage) = message.get("usage").and_then(Value::as_object)
                    && (id.is_empty() || self.usage_counted.first_time(id))
                {
                    out.push(event(EventKind::Usage {
                        model: message
                            .get("model")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                        usage: Usage {
                            input_tokens: count(usage, "input_tokens"),
                            output_tokens: count(usage, "output_tokens"),
                            cache_creation_input_tokens: count(
                                usage,
                                "cache_creation_input_tokens",
                            ),
                            cache_read_input_tokens: count(usage, "cache_read_input_tokens"),
                        },
                    }));
                }
            }
            "user" => {
                let message = obj.get("message")?.as_object()?;
                for block in content_blocks(message) {
                    if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                        continue;
                    }
                    let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
                    let call = block
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .and_then(|id| self.tool_names.get(id))
                        .cloned();
                    let text = result_text(block.get("content"));
                    if is_error {
                        out.push(Signal::Error(text.clone()));
                    } else if call.as_ref().is_some_and(|(n, _)| {
                        matches!(n.as_str(), "Edit" | "Write" | "MultiEdit" | "NotebookEdit")
                    }) {
                        out.push(Signal::Progress(1));
                    }
                    if let Some((_, action)) = call {
                        out.push(Signal::Step(AgentStep {
                            action,
                            result: text,
                            failed: is_error,
                        }));
                    }
                }
                if out.is_empty() {
                    // A plain user message still shows the task is alive.
                    out.push(liveness(task_id.as_deref()));
                }
            }
            "result" => {
                if let Some(text) = obj.get("result").and_then(Value::as_str) {
                    out.push(Signal::FinalText(text.to_string()));
                }
                if obj.get("is_error").and_then(Value::as_bool) == Some(true) {
                    let subtype = obj
                        .get("subtype")
                        .and_then(Value::as_str)
                        .unwrap_or("error");
                    out.push(Signal::Error(format!("agent result: {subtype}")));
                }
            }
            "system" | "stream_event" => out.push(liveness(task_id.as_deref())),
            _ => return None,
        }
        Some(out)
    }

    /// A Codex `exec --json` line; `None` when it is not one.
    fn codex(&mut self, obj: &Map<String, Value>) -> Option<Vec<Signal>> {
        let kind = obj.get("type").and_then(Value::as_str)?;
        let event = |kind: EventKind| {
            Signal::Event(AgentEvent {
                task_id: None,
                kind,
            })
        };
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
                let tool = match item_type {
                    "command_execution" => Some("shell".to_string()),
                    "file_change" => Some("apply_patch".to_string()),
                    "mcp_tool_call" => Some(format!(
                        "{}.{}",
                        item.get("server").and_then(Value::as_str).unwrap_or("mcp"),
                        item.get("tool").and_then(Value::as_str).unwrap_or("tool")
                    )),
                    "web_search" => Some("web_search".to_string()),
                    _ => None,
                };
                // A tool call counts once, when it is first seen (started, or completed alone).
                if let Some(tool) = tool
                    && (id.is_empty() || self.items_counted.first_time(id))
                {
                    out.push(event(EventKind::ToolUse(tool)));
                }
                if kind == "item.completed" {
                    let status = item.get("status").and_then(Value::as_str).unwrap_or("");
                    let step_failed = status == "failed"
                        || item
                            .get("exit_code")
                            .and_then(Value::as_i64)
                            .is_some_and(|c| c != 0);
                    let step = match item_type {
                        "command_execution" => Some((
                            format!(
                                "shell: {}",
                                item.get("command").and_then(Value::as_str).unwrap_or("")
                            ),
                            item.get("aggregated_output")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        )),
                        "file_change" => Some((
                            format!(
                                "apply_patch: {}",
                                item.get("changes")
                                    .map(Value::to_string)
                                    .unwrap_or_default()
                            ),
                            status.to_string(),
                        )),
                        "mcp_tool_call" => Some((
                            format!(
                                "{}.{}: {}",
                                item.get("server").and_then(Value::as_str).unwrap_or("mcp"),
                                item.get("tool").and_then(Value::as_str).unwrap_or("tool"),
                                item.get("arguments")
                                    .map(Value::to_string)
                                    .unwrap_or_default()
                            ),
                            item.get("result")
                                .or_else(|| item.get("error"))
                                .map(Value::to_string)
                                .unwrap_or_default(),
                        )),
                        _ => None,
                    };
                    if let Some((action, result)) = step {
                        out.push(Signal::Step(AgentStep {
                            action,
                            result,
                            failed: step_failed,
                        }));
                    }
                    let failed = status == "failed"
                        || item
                            .get("exit_code")
                            .and_then(Value::as_i64)
                            .is_some_and(|c| c != 0);
                    match item_type {
                        "agent_message" => {
                            if let Some(text) = item.get("text").and_then(Value::as_str) {
                                if !text.trim().is_empty() {
                                    out.push(event(EventKind::Assistant(text.to_string())));
                                }
                                out.push(Signal::FinalText(text.to_string()));
                            }
                        }
                        "command_execution" if failed => {
                            let output = item
                                .get("aggregated_output")
                                .and_then(Value::as_str)
                                .unwrap_or("");
                            let command = item.get("command").and_then(Value::as_str).unwrap_or("");
                            out.push(Signal::Error(
                                error_tail(output)
                                    .unwrap_or_else(|| format!("command failed: {command}")),
                            ));
                        }
                        "file_change" if failed => {
                            out.push(Signal::Error("file change failed".to_string()));
                        }
                        "file_change" => {
                            let n = item
                                .get("changes")
                                .and_then(Value::as_array)
                                .map_or(1, |c| c.len().max(1) as u64);
                            out.push(Signal::Progress(n));
                        }
                        "mcp_tool_call" if failed => {
                            out.push(Signal::Error(error_message(item.get("error"))));
                        }
                        "error" => out.push(Signal::Error(error_message(item.get("message")))),
                        _ => {}
                    }
                }
                if out.is_empty() {
                    out.push(liveness(None));
                }
            }
            "turn.completed" => {
                if let Some(usage) = obj.get("usage").and_then(Value::as_object) {
                    // OpenAI's input_tokens include the cached ones.
                    let input = count(usage, "input_tokens");
                    let cached = count(usage, "cached_input_tokens").min(input);
                    out.push(event(EventKind::Usage {
                        model: None,
                        usage: Usage {
                            input_tokens: input - cached,
                            output_tokens: count(usage, "output_tokens"),
                            cache_creation_input_tokens: 0,
                            cache_read_input_tokens: cached,
                        },
                    }));
                } else {
                    out.push(liveness(None));
                }
            }
            "turn.failed" => out.push(Signal::Error(error_message(obj.get("error")))),
            "error" => out.push(Signal::Error(error_message(obj.get("message")))),
            "thread.started" | "turn.started" | "token_count" => out.push(liveness(None)),
            _ => return None,
        }
        Some(out)
    }
}

/// How many error texts a [`Feed`] keeps.
const MAX_ERRORS: usize = 32;

/// Hands [`Signal`]s to the breakers, the same way for a live agent (`run`, `loop`) and a
/// recording (`replay`), and keeps what the caller wants afterwards.
#[derive(Debug, Default)]
pub struct Feed {
    /// Feed errors and edits to the StagnationBreaker and stop when it opens.
    watch_errors: bool,
    /// The last error texts seen.
    pub errors: Vec<String>,
    /// Files changed according to the stream.
    pub files_changed: u64,
    /// The agent's final answer, when the stream has one.
    pub final_text: Option<String>,
}

impl Feed {
    /// A feed; `watch_errors` makes the StagnationBreaker part of the decision.
    pub fn new(watch_errors: bool) -> Self {
        Feed {
            watch_errors,
            ..Feed::default()
        }
    }

    /// Feeds one line's signals; returns why to stop, if the breakers say so.
    pub fn feed(
        &mut self,
        signals: Vec<Signal>,
        budget: &BudgetBreaker,
        stagnation: &StagnationBreaker,
    ) -> Option<Stop> {
        for signal in signals {
            match signal {
                Signal::Event(event) => {
                    if let Ok(Some(halt)) = budget.ingest_event(&event) {
                        return Some(Stop::Budget(halt));
                    }
                }
                Signal::Error(text) => {
                    if self.errors.len() >= MAX_ERRORS {
                        self.errors.remove(0);
                    }
                    self.errors
                        .push(agentbreaker::text::cap_error(&text).to_string());
                    if self.watch_errors {
                        stagnation.record_error(&text, false);
                        let decision = stagnation.check();
                        if !decision.allow_continue {
                            return Some(Stop::Stagnation(decision));
                        }
                    }
                }
                Signal::Progress(files) => {
                    self.files_changed += files;
                    if self.watch_errors {
                        // A successful edit is progress: it clears the error counts.
                        stagnation.record_progress(IterationMetrics {
                            files_changed: files,
                            ..IterationMetrics::default()
                        });
                    }
                }
                Signal::FinalText(text) => self.final_text = Some(text),
                Signal::Step(step) => {
                    if self.watch_errors {
                        stagnation.record_step(&step);
                        let decision = stagnation.check();
                        if !decision.allow_continue {
                            return Some(Stop::Stagnation(decision));
                        }
                    }
                }
            }
        }
        None
    }
}

/// A recognised line that carries no budget event still shows the agent is alive: a usage event
/// of zero tokens refreshes the task's idle timer and changes nothing else.
fn liveness(task_id: Option<&str>) -> Signal {
    Signal::Event(AgentEvent {
        task_id: task_id.map(str::to_string),
        kind: EventKind::Usage {
            model: None,
            usage: Usage::default(),
        },
    })
}

fn truncate_id(id: &str) -> String {
    agentbreaker::text::truncate(id, agentbreaker::budget::MAX_TASK_ID_BYTES).to_string()
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
        "error" if obj.contains_key("message") => Some(Format::Codex),
        "heartbeat" | "assistant" | "tool_use" | "usage" => Some(Format::Events),
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
        Some(other) => other.to_string(),
        None => "tool error".to_string(),
    }
}

fn error_message(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => o
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| Value::Object(o.clone()).to_string(), str::to_string),
        Some(other) => other.to_string(),
        None => "error".to_string(),
    }
}

/// The last non-empty line of a command's output (where the error usually is).
fn error_tail(output: &str) -> Option<String> {
    output
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
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
mod tests {
    use super::*;

    fn parse(p: &mut StreamParser, line: &str) -> Vec<Signal> {
        p.parse_line(line.as_bytes())
    }

    fn kinds(signals: &[Signal]) -> Vec<String> {
        signals
            .iter()
            .map(|s| match s {
                Signal::Event(e) => match &e.kind {
                    EventKind::Assistant(t) => format!("assistant:{t}"),
                    EventKind::ToolUse(n) => format!("tool_use:{n}"),
                    EventKind::Usage { usage, .. } if *usage == Usage::default() => "alive".into(),
                    EventKind::Usage { usage, .. } => format!(
                        "usage:{}/{}/{}/{}",
                        usage.input_tokens,
                        usage.output_tokens,
                        usage.cache_creation_input_tokens,
                        usage.cache_read_input_tokens
                    ),
                    EventKind::Heartbeat(_) => "heartbeat".into(),
                    EventKind::Unknown(t) => format!("unknown:{t}"),
                },
                Signal::Error(t) => format!("error:{t}"),
                Signal::Progress(n) => format!("progress:{n}"),
                Signal::FinalText(t) => format!("final:{t}"),
                Signal::Step(s) => format!("step:{}|{}|{}", s.action, s.result, s.failed),
            })
            .collect()
    }

    #[test]
    fn claude_usage_counts_once_per_message() {
        let mut p = StreamParser::new(Format::Auto);
        let text = r#"{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Looking."}],"usage":{"input_tokens":4,"output_tokens":3,"cache_creation_input_tokens":10,"cache_read_input_tokens":5}},"parent_tool_use_id":null,"session_id":"s"}"#;
        let tool = r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Edit","input":{}}],"usage":{"input_tokens":4,"output_tokens":3}},"parent_tool_use_id":null,"session_id":"s"}"#;
        assert_eq!(
            kinds(&parse(&mut p, text)),
            ["assistant:Looking.", "usage:4/3/10/5"]
        );
        assert_eq!(kinds(&parse(&mut p, tool)), ["tool_use:Edit"]);
        let ok = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"done","is_error":false}]},"session_id":"s"}"#;
        assert_eq!(
            kinds(&parse(&mut p, ok)),
            ["progress:1", "step:Edit: {}|done|false"]
        );
        let err = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t9","content":[{"type":"text","text":"Path not found"}],"is_error":true}]},"session_id":"s"}"#;
        assert_eq!(kinds(&parse(&mut p, err)), ["error:Path not found"]);
        let result =
            r#"{"type":"result","subtype":"success","is_error":false,"result":"All done."}"#;
        assert_eq!(kinds(&parse(&mut p, result)), ["final:All done."]);
        assert_eq!(p.malformed, 0);
    }

    #[test]
    fn claude_subagent_events_belong_to_their_task() {
        let mut p = StreamParser::new(Format::Claude);
        let line = r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t2","name":"Read","input":{}}]},"parent_tool_use_id":"toolu_parent","session_id":"s"}"#;
        let signals = parse(&mut p, line);
        let Signal::Event(e) = &signals[0] else {
            panic!("{signals:?}")
        };
        assert_eq!(e.task_id.as_deref(), Some("toolu_parent"));
    }

    #[test]
    fn codex_items_and_usage() {
        let mut p = StreamParser::new(Format::Auto);
        let started = r#"{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"ls","status":"in_progress"}}"#;
        let done = r#"{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"ls","aggregated_output":"ls: cannot access 'x': No such file\n","exit_code":2,"status":"failed"}}"#;
        assert_eq!(kinds(&parse(&mut p, started)), ["tool_use:shell"]);
        assert_eq!(
            kinds(&parse(&mut p, done)),
            [
                "step:shell: ls|ls: cannot access 'x': No such file\n|true",
                "error:ls: cannot access 'x': No such file"
            ]
        );
        let patch = r#"{"type":"item.completed","item":{"id":"i2","type":"file_change","changes":[{"path":"a","kind":"update"},{"path":"b","kind":"add"}],"status":"completed"}}"#;
        assert_eq!(
            kinds(&parse(&mut p, patch)),
            [
                "tool_use:apply_patch",
                r#"step:apply_patch: [{"kind":"update","path":"a"},{"kind":"add","path":"b"}]|completed|false"#,
                "progress:2"
            ]
        );
        let msg = r#"{"type":"item.completed","item":{"id":"i3","type":"agent_message","text":"Fixed."}}"#;
        assert_eq!(
            kinds(&parse(&mut p, msg)),
            ["assistant:Fixed.", "final:Fixed."]
        );
        let usage = r#"{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":200,"output_tokens":345}}"#;
        assert_eq!(kinds(&parse(&mut p, usage)), ["usage:1000/345/0/200"]);
    }

    #[test]
    fn plain_events_and_malformed_lines() {
        let mut p = StreamParser::new(Format::Auto);
        assert_eq!(
            kinds(&parse(&mut p, r#"{"type":"tool_use","name":"fetch"}"#)),
            ["tool_use:fetch"]
        );
        for bad in [
            "not json",
            r#"{"type":"assistant","#,
            "[1,2]",
            r#"{"type":"tool_use"}"#,
            r#"{"no":"type"}"#,
        ] {
            assert!(parse(&mut p, bad).is_empty(), "{bad}");
        }
        assert!(p.parse_line(&[0xff, 0xfe, 0x00]).is_empty());
        assert!(parse(&mut p, "   ").is_empty());
        assert_eq!(p.malformed, 6);
        assert_eq!(p.lines, 8);
    }

    #[test]
    fn timestamps_are_read_when_present() {
        let mut p = StreamParser::new(Format::Auto);
        parse(
            &mut p,
            r#"{"type":"tool_use","name":"x","timestamp":"2026-01-01T00:00:01.5Z"}"#,
        );
        assert_eq!(p.last_timestamp_ms, Some(1_767_225_601_500));
        parse(&mut p, r#"{"type":"tool_use","name":"x","ts":42}"#);
        assert_eq!(p.last_timestamp_ms, Some(42));
    }
}
