//! The three agents' hook protocols: what their stdin says (normalized into [`HookInput`]) and
//! what each of them accepts as a reply ([`render`]). docs/hooks.md has the tables and sources.

use serde_json::{Map, Value, json};

/// The agent CLIs whose hooks `agentbreaker hook` understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// Claude Code (`settings.json` → `hooks`).
    Claude,
    /// OpenAI Codex CLI (`hooks.json`).
    Codex,
    /// Gemini CLI (`settings.json` → `hooks`).
    Gemini,
}

impl Agent {
    /// Every agent, in the order the docs list them.
    pub const ALL: [Agent; 3] = [Agent::Claude, Agent::Codex, Agent::Gemini];

    /// `claude`, `codex` or `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
        }
    }

    /// The agent of a name (`claude`, `codex`, `gemini`).
    pub fn from_name(name: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// A person's name for the agent.
    pub fn title(self) -> &'static str {
        match self {
            Agent::Claude => "Claude Code",
            Agent::Codex => "Codex CLI",
            Agent::Gemini => "Gemini CLI",
        }
    }
}

/// Gemini CLI's event names (no other agent uses them).
const GEMINI_EVENTS: [&str; 8] = [
    "BeforeTool",
    "AfterTool",
    "BeforeAgent",
    "AfterAgent",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
    "PreCompress",
];

/// Which agent sent an event, when the command line does not say: Gemini by its event names (or
/// the ISO `timestamp` every Gemini event carries), Codex by its `turn_id` / `model` fields or its
/// rollout transcript, else Claude Code.
pub fn detect_agent(event: &Value) -> Option<Agent> {
    let map = event.as_object()?;
    let name = map.get("hook_event_name")?.as_str()?;
    if GEMINI_EVENTS.contains(&name) {
        return Some(Agent::Gemini);
    }
    if map.get("timestamp").is_some_and(Value::is_string) {
        return Some(Agent::Gemini);
    }
    let transcript = map
        .get("transcript_path")
        .and_then(Value::as_str)
        .unwrap_or("");
    if map.contains_key("turn_id")
        || map.get("model").is_some_and(Value::is_string)
        || transcript.contains("/.codex/")
        || transcript.contains("rollout-")
    {
        return Some(Agent::Codex);
    }
    if transcript.contains("/.gemini/") {
        return Some(Agent::Gemini);
    }
    Some(Agent::Claude)
}

/// What an event is, across the three agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Before a tool runs: Claude/Codex `PreToolUse`, Gemini `BeforeTool`.
    PreTool,
    /// After a tool ran: `PostToolUse`, `PostToolUseFailure` (`failure`), Gemini `AfterTool`.
    PostTool {
        /// Claude Code's `PostToolUseFailure`.
        failure: bool,
    },
    /// The agent (`subagent: false`) or a subagent finished its turn: `Stop`, `SubagentStop`,
    /// Gemini `AfterAgent`.
    Stop {
        /// `SubagentStop`.
        subagent: bool,
    },
    /// The user sent a prompt: `UserPromptSubmit`, Gemini `BeforeAgent`.
    Prompt,
    /// A session starts; `source` is `startup`, `resume`, `clear`, `compact`, ...
    SessionStart {
        /// Why it starts.
        source: String,
    },
    /// A session ends: its state is removed.
    SessionEnd,
    /// Any other event (notifications, compaction, ...): the agent is alive.
    Other,
}

/// One hook event, normalized.
#[derive(Debug, Clone)]
pub struct HookInput {
    /// Who sent it.
    pub agent: Agent,
    /// The agent's own event name (`PreToolUse`, `BeforeTool`, ...).
    pub event_name: String,
    /// What it is.
    pub kind: Kind,
    /// The session (never used as a path as it is).
    pub session_id: String,
    /// The session's transcript (read only, never written).
    pub transcript_path: Option<String>,
    /// The project directory.
    pub cwd: Option<String>,
    /// The tool of a tool event.
    pub tool_name: Option<String>,
    /// Its input (`Null` when not given).
    pub tool_input: Value,
    /// The call's id (Claude, Codex; Gemini has none).
    pub tool_use_id: Option<String>,
    /// What the tool returned (Post events).
    pub tool_response: Option<Value>,
    /// Claude's `PostToolUseFailure` error text.
    pub error: Option<String>,
    /// The subagent that made the call (its events count for its own task).
    pub agent_id: Option<String>,
    /// A subagent's own transcript (`SubagentStop`).
    pub agent_transcript_path: Option<String>,
    /// The model's last answer (`Stop`'s `last_assistant_message`, Gemini's `prompt_response`).
    pub last_message: Option<String>,
    /// The model named by the event (Codex sends it on every event).
    pub model: Option<String>,
}

fn str_field(map: &Map<String, Value>, key: &str) -> Option<String> {
    map.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Reads one event of `agent`. An event without a `hook_event_name` or a `session_id` is an error.
pub fn parse(event: &Value, agent: Agent) -> Result<HookInput, String> {
    let map = event
        .as_object()
        .ok_or("the hook input is not a JSON object")?;
    let event_name = str_field(map, "hook_event_name").ok_or("no hook_event_name in the input")?;
    let session_id = str_field(map, "session_id").ok_or("no session_id in the input")?;
    let kind = match (agent, event_name.as_str()) {
        (Agent::Gemini, "BeforeTool") | (Agent::Claude | Agent::Codex, "PreToolUse") => {
            Kind::PreTool
        }
        (Agent::Gemini, "AfterTool") | (Agent::Claude | Agent::Codex, "PostToolUse") => {
            Kind::PostTool { failure: false }
        }
        (Agent::Claude | Agent::Codex, "PostToolUseFailure") => Kind::PostTool { failure: true },
        (Agent::Gemini, "AfterAgent") | (Agent::Claude | Agent::Codex, "Stop") => {
            Kind::Stop { subagent: false }
        }
        (Agent::Claude | Agent::Codex, "SubagentStop") => Kind::Stop { subagent: true },
        (Agent::Gemini, "BeforeAgent") | (Agent::Claude | Agent::Codex, "UserPromptSubmit") => {
            Kind::Prompt
        }
        (_, "SessionStart") => Kind::SessionStart {
            source: str_field(map, "source").unwrap_or_else(|| "startup".into()),
        },
        (_, "SessionEnd") => Kind::SessionEnd,
        _ => Kind::Other,
    };
    let last_message = match agent {
        Agent::Gemini => str_field(map, "prompt_response"),
        _ => str_field(map, "last_assistant_message"),
    };
    Ok(HookInput {
        agent,
        event_name,
        kind,
        session_id,
        transcript_path: str_field(map, "transcript_path"),
        cwd: str_field(map, "cwd"),
        tool_name: str_field(map, "tool_name"),
        tool_input: map.get("tool_input").cloned().unwrap_or(Value::Null),
        tool_use_id: str_field(map, "tool_use_id"),
        tool_response: map.get("tool_response").cloned(),
        error: map.get("error").map(|e| match e {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        agent_id: str_field(map, "agent_id"),
        agent_transcript_path: str_field(map, "agent_transcript_path"),
        last_message,
        model: str_field(map, "model"),
    })
}

/// The longest tool result text handed to the Monitor: it compares results by their first and
/// last 4 KB anyway, so a 10 MB response costs no more than this.
const MAX_RESULT_TEXT: usize = 64 * 1024;

fn bounded(text: String) -> String {
    if text.len() <= MAX_RESULT_TEXT {
        return text;
    }
    let head = agentbreaker::text::truncate(&text, MAX_RESULT_TEXT / 2);
    let mut tail_start = text.len() - MAX_RESULT_TEXT / 2;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    format!("{head}\n[...]\n{}", &text[tail_start..])
}

/// A nonzero `Exit Code: N` / `exited with code N` / `Exit code: N` line in a shell tool's text.
fn shell_exit_failed(text: &str) -> bool {
    for line in text.lines().take(4096) {
        let l = line.trim();
        let lower = l.to_ascii_lowercase();
        for prefix in ["exit code:", "process exited with code", "exited with code"] {
            if let Some(rest) = lower.strip_prefix(prefix)
                && let Some(code) = rest.split_whitespace().next()
                && let Ok(n) = code.trim_end_matches(['.', ',']).parse::<i64>()
            {
                return n != 0;
            }
        }
    }
    false
}

/// The outcome of a Post event: `(ok, text)`.
///
/// - Claude: `PostToolUse` fires on success only, `PostToolUseFailure` (its `error`) on failure.
/// - Codex: no failure flag exists (a shell result is a bare string); an object response with an
///   `exit_code`/`success`/`error` field, or an `Exit code: N` line, is read when present, else
///   the call counts as ok — loops are still caught by their repeated results.
/// - Gemini: `tool_response.error` marks a failure; a shell result's `Exit Code: N` line too.
pub fn outcome(input: &HookInput) -> (bool, String) {
    if let Kind::PostTool { failure: true } = input.kind {
        return (false, bounded(claude_failure_text(input)));
    }
    let response = input.tool_response.as_ref().unwrap_or(&Value::Null);
    let text = response_text(input.agent, response);
    let ok = match response {
        Value::Object(m) => {
            let error = m.get("error").is_some_and(|e| match e {
                Value::Null | Value::Bool(false) => false,
                Value::String(s) => !s.is_empty(),
                _ => true,
            });
            let exit = ["exit_code", "exitCode"]
                .iter()
                .filter_map(|k| m.get(*k).and_then(Value::as_i64))
                .any(|c| c != 0);
            let unsuccessful = m.get("success") == Some(&Value::Bool(false));
            let interrupted = m.get("interrupted") == Some(&Value::Bool(true));
            let shell_failed = input.agent != Agent::Claude && shell_exit_failed(&text);
            !(error || exit || unsuccessful || interrupted || shell_failed)
        }
        Value::String(_) => !shell_exit_failed(&text),
        _ => true,
    };
    (ok, bounded(text))
}

/// Claude Code's `PostToolUseFailure` error of a command is `Exit code N` and then the command's
/// output. The Monitor tells errors apart by their first line, which would make every failing
/// command the same error: the exit code goes to the end instead, and a failure without output
/// is named by its command.
fn claude_failure_text(input: &HookInput) -> String {
    let error = input.error.clone().unwrap_or_default();
    let Some(rest) = error.strip_prefix("Exit code ") else {
        return error;
    };
    let (code, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let code = code.trim();
    if code.parse::<i64>().is_err() {
        return error;
    }
    if body.trim().is_empty() {
        let command = input
            .tool_input
            .get("command")
            .and_then(Value::as_str)
            .and_then(|c| c.lines().next())
            .unwrap_or("");
        return format!(
            "exit code {code} without output: {}",
            agentbreaker::text::truncate(command, 200)
        );
    }
    format!("{body}\n(exit code {code})")
}

fn response_text(agent: Agent, response: &Value) -> String {
    match response {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Object(m) => {
            // Claude's Bash: {stdout, stderr, interrupted}; Gemini: {llmContent, returnDisplay,
            // error}.
            if let Some(out) = m.get("stdout").and_then(Value::as_str) {
                let err = m.get("stderr").and_then(Value::as_str).unwrap_or("");
                return if err.is_empty() {
                    out.to_string()
                } else {
                    format!("{out}\n{err}")
                };
            }
            if agent == Agent::Gemini {
                let mut text = match m.get("llmContent") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => String::new(),
                };
                if let Some(e) = m.get("error").filter(|e| !e.is_null()) {
                    let msg = e
                        .get("message")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| e.to_string());
                    text = if text.is_empty() {
                        msg
                    } else {
                        format!("{text}\n{msg}")
                    };
                }
                return text;
            }
            response.to_string()
        }
        other => other.to_string(),
    }
}

/// The files a successful edit wrote, as the tool input names them: Claude `Edit`, `Write`,
/// `MultiEdit`, `NotebookEdit`; Codex `apply_patch` (its patch's `*** Add/Update File:` lines);
/// Gemini `write_file`, `replace`, `edit`.
pub fn edited_files(input: &HookInput) -> Vec<String> {
    let Some(tool) = input.tool_name.as_deref() else {
        return Vec::new();
    };
    let field = |k: &str| {
        input
            .tool_input
            .get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    match tool {
        "Edit" | "Write" | "MultiEdit" | "write_file" | "replace" | "edit" => field("file_path")
            .or_else(|| field("path"))
            .into_iter()
            .collect(),
        "NotebookEdit" => field("notebook_path").into_iter().collect(),
        "apply_patch" => {
            let patch = field("command")
                .or_else(|| field("patch"))
                .or_else(|| field("input"))
                .or_else(|| input.tool_input.as_str().map(str::to_string))
                .unwrap_or_default();
            let mut files = Vec::new();
            for line in patch.lines() {
                for prefix in ["*** Add File: ", "*** Update File: ", "*** Move to: "] {
                    if let Some(p) = line.strip_prefix(prefix) {
                        let p = p.trim().to_string();
                        if !p.is_empty() && !files.contains(&p) && files.len() < 64 {
                            files.push(p);
                        }
                    }
                }
            }
            files
        }
        _ => Vec::new(),
    }
}

/// What agentbreaker decided about one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Nothing to say.
    Allow,
    /// A rule is near its threshold: the nudge goes to the model as context, the message to the
    /// person.
    Warn {
        /// For the person.
        message: String,
        /// For the model.
        nudge: String,
    },
    /// A rule tripped: deny the pending call; `stop` also ends the session where the agent
    /// can.
    Halt {
        /// For the person.
        message: String,
        /// For the model.
        nudge: String,
        /// Stop the session (`continue: false`): false for a subagent's own halt.
        stop: bool,
        /// True when the halt came earlier and this call is denied because of it.
        earlier: bool,
    },
}

/// The text the model gets when its call is denied.
fn deny_reason(message: &str, nudge: &str, earlier: bool) -> String {
    if earlier {
        format!(
            "agentbreaker halted this session earlier ({message}); every further tool call is \
             denied. {nudge}"
        )
    } else {
        format!("agentbreaker stopped this tool call: {message}. {nudge}")
    }
}

/// The `stopReason` a person reads.
pub fn stop_reason(message: &str) -> String {
    format!(
        "agentbreaker stopped the session: {message}. Further tool calls in this session will be \
         denied; start a new session to go on (`agentbreaker status` shows the counters)."
    )
}

/// Adds a `systemMessage` for the person (when there is a message).
fn with_message(mut out: Value, message: &str) -> Value {
    if !message.is_empty() {
        out["systemMessage"] = json!(format!("agentbreaker: {message}"));
    }
    out
}

/// The reply to print for a decision, or `None` for an empty stdout (everything allowed).
///
/// Each agent gets only the keys it accepts on that event: Codex rejects unknown keys and
/// `continue`/`stopReason` on `PreToolUse` (the hook would fail and the tool would run), so its
/// deny carries the decision alone, and the session is ended from the next `PostToolUse`/`Stop`
/// and by denying every later call.
pub fn render(input: &HookInput, decision: &Decision) -> Option<Value> {
    let name = input.event_name.as_str();
    match (&input.kind, decision) {
        (_, Decision::Allow) => None,
        (Kind::PreTool, Decision::Warn { message, nudge }) => match input.agent {
            Agent::Claude => Some(with_message(
                json!({"hookSpecificOutput": {"hookEventName": name, "additionalContext": nudge}}),
                message,
            )),
            Agent::Codex => Some(json!({
                "hookSpecificOutput": {"hookEventName": name, "additionalContext": nudge},
            })),
            // BeforeTool takes no context: the nudge waits for the next AfterTool (the caller
            // keeps it); the person sees the message now.
            Agent::Gemini => Some(with_message(json!({}), message)),
        },
        (
            Kind::PreTool,
            Decision::Halt {
                message,
                nudge,
                stop,
                earlier,
            },
        ) => {
            let reason = deny_reason(message, nudge, *earlier);
            match input.agent {
                Agent::Claude => {
                    let mut out = json!({"hookSpecificOutput": {
                        "hookEventName": name,
                        "permissionDecision": "deny",
                        "permissionDecisionReason": reason,
                    }});
                    if *stop {
                        out["continue"] = json!(false);
                        out["stopReason"] = json!(stop_reason(message));
                    }
                    Some(out)
                }
                Agent::Codex => Some(json!({"hookSpecificOutput": {
                    "hookEventName": name,
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }})),
                Agent::Gemini => {
                    let mut out = json!({"decision": "deny", "reason": reason});
                    if *stop {
                        out["continue"] = json!(false);
                        out["stopReason"] = json!(stop_reason(message));
                    }
                    Some(out)
                }
            }
        }
        (Kind::PostTool { .. }, Decision::Warn { message, nudge }) => match input.agent {
            Agent::Codex => Some(json!({
                "hookSpecificOutput": {"hookEventName": name, "additionalContext": nudge},
            })),
            Agent::Claude | Agent::Gemini => Some(with_message(
                json!({"hookSpecificOutput": {"hookEventName": name, "additionalContext": nudge}}),
                message,
            )),
        },
        (
            Kind::PostTool { .. },
            Decision::Halt {
                message,
                nudge,
                stop,
                ..
            },
        ) => {
            let context = format!("agentbreaker halted this task: {message}. {nudge}");
            let mut out = json!({
                "hookSpecificOutput": {"hookEventName": name, "additionalContext": context},
            });
            if *stop {
                out["continue"] = json!(false);
                out["stopReason"] = json!(stop_reason(message));
            }
            Some(out)
        }
        // Stop is never blocked (no `decision: block`, no exit 2): a halted session is only told
        // to stay stopped.
        (Kind::Stop { subagent: false }, Decision::Halt { message, stop, .. }) if *stop => {
            Some(json!({"continue": false, "stopReason": stop_reason(message)}))
        }
        (Kind::Prompt, Decision::Halt { message, .. }) => {
            let context = format!(
                "agentbreaker halted this session earlier ({message}); every tool call will be \
                 denied. Tell the user to start a new session."
            );
            Some(json!({
                "systemMessage": format!(
                    "agentbreaker: this session was halted ({message}); its tool calls are \
                     denied. Start a new session to go on."
                ),
                "hookSpecificOutput": {"hookEventName": name, "additionalContext": context},
            }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(v: Value, agent: Agent) -> HookInput {
        parse(&v, agent).unwrap()
    }

    #[test]
    fn detects_each_agent() {
        let claude = json!({"hook_event_name": "PreToolUse", "session_id": "s",
                            "transcript_path": "/home/u/.claude/projects/p/s.jsonl"});
        let codex = json!({"hook_event_name": "PreToolUse", "session_id": "s", "turn_id": "t",
                           "model": "gpt-5"});
        let gemini = json!({"hook_event_name": "BeforeTool", "session_id": "s",
                            "timestamp": "2026-01-01T00:00:00Z"});
        let gemini_start = json!({"hook_event_name": "SessionStart", "session_id": "s",
                                  "timestamp": "2026-01-01T00:00:00Z"});
        assert_eq!(detect_agent(&claude), Some(Agent::Claude));
        assert_eq!(detect_agent(&codex), Some(Agent::Codex));
        assert_eq!(detect_agent(&gemini), Some(Agent::Gemini));
        assert_eq!(detect_agent(&gemini_start), Some(Agent::Gemini));
        assert_eq!(detect_agent(&json!([1])), None);
        assert_eq!(detect_agent(&json!({"session_id": "s"})), None);
    }

    #[test]
    fn outcomes() {
        let failed = input(
            json!({"hook_event_name": "PostToolUseFailure", "session_id": "s",
                   "tool_name": "Bash", "error": "Command exited with non-zero status code 1"}),
            Agent::Claude,
        );
        assert!(!outcome(&failed).0);
        let exit = |error: &str, command: &str| {
            outcome(&input(
                json!({"hook_event_name": "PostToolUseFailure", "session_id": "s",
                       "tool_name": "Bash", "tool_input": {"command": command}, "error": error}),
                Agent::Claude,
            ))
            .1
        };
        assert_eq!(
            exit("Exit code 2\nno such file\n", "cat x"),
            "no such file\n\n(exit code 2)"
        );
        assert_eq!(
            exit("Exit code 1\n", "grep -r foo ."),
            "exit code 1 without output: grep -r foo ."
        );
        assert_eq!(exit("Exit codes", "x"), "Exit codes");
        let ok = input(
            json!({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Bash",
                   "tool_response": {"stdout": "hi", "stderr": "", "interrupted": false}}),
            Agent::Claude,
        );
        assert_eq!(outcome(&ok), (true, "hi".to_string()));
        let gemini = input(
            json!({"hook_event_name": "AfterTool", "session_id": "s",
                   "tool_name": "run_shell_command",
                   "tool_response": {"llmContent": "Command: x\nExit Code: 2", "returnDisplay": ""}}),
            Agent::Gemini,
        );
        assert!(!outcome(&gemini).0);
        let gemini_err = input(
            json!({"hook_event_name": "AfterTool", "session_id": "s", "tool_name": "read_file",
                   "tool_response": {"llmContent": "", "error": {"type": "x", "message": "no file"}}}),
            Agent::Gemini,
        );
        assert_eq!(outcome(&gemini_err), (false, "no file".to_string()));
        let codex = input(
            json!({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Bash",
                   "tool_response": "ok\n"}),
            Agent::Codex,
        );
        assert!(outcome(&codex).0);
        let big = input(
            json!({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Bash",
                   "tool_response": "x".repeat(1 << 20)}),
            Agent::Codex,
        );
        assert!(outcome(&big).1.len() < MAX_RESULT_TEXT + 16);
    }

    #[test]
    fn edited_files_per_agent() {
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-x\n+y\n*** Add File: b.txt\n+hi\n*** End Patch";
        let codex = input(
            json!({"hook_event_name": "PostToolUse", "session_id": "s",
                   "tool_name": "apply_patch", "tool_input": {"command": patch}}),
            Agent::Codex,
        );
        assert_eq!(edited_files(&codex), vec!["src/a.rs", "b.txt"]);
        let claude = input(
            json!({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Write",
                   "tool_input": {"file_path": "/p/x.py", "content": "y"}}),
            Agent::Claude,
        );
        assert_eq!(edited_files(&claude), vec!["/p/x.py"]);
    }

    #[test]
    fn codex_pre_tool_replies_have_no_stop_keys() {
        let pre = input(
            json!({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash"}),
            Agent::Codex,
        );
        let halt = Decision::Halt {
            message: "m".into(),
            nudge: "n".into(),
            stop: true,
            earlier: false,
        };
        let out = render(&pre, &halt).unwrap();
        assert!(out.get("continue").is_none() && out.get("stopReason").is_none());
        assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
        let stop = input(
            json!({"hook_event_name": "Stop", "session_id": "s", "stop_hook_active": true}),
            Agent::Claude,
        );
        let out = render(&stop, &halt).unwrap();
        assert_eq!(out["continue"], false);
        assert!(out.get("decision").is_none());
    }
}
