//! `agentbreaker hook install|uninstall claude|codex|gemini`: adds agentbreaker's hook entries to
//! the agent's settings file, or removes them.
//!
//! - The file is read as JSON (comments are refused: nothing is changed then) and written back
//!   with its keys in their order, two-space indented, atomically, keeping its permissions (a
//!   symlinked settings file is written through to its target).
//! - Install appends one matcher group per event to the end of that event's list; nobody else's
//!   groups or handlers are removed or reordered. A handler of ours already there is updated in
//!   place, so installing twice changes nothing.
//! - Ours are the `command` handlers that run `agentbreaker ... hook --agent <agent>`; uninstall
//!   removes exactly those, and the groups, event lists and `hooks` object that held only them.

use std::fmt::Write as _;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::protocol::Agent;

/// A JSON value that keeps its objects' key order.
#[derive(Debug, Clone, PartialEq)]
pub enum J {
    /// `null`.
    Null,
    /// `true`/`false`.
    Bool(bool),
    /// A number, as written.
    Num(serde_json::Number),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<J>),
    /// An object, in key order.
    Obj(Vec<(String, J)>),
}

impl<'de> Deserialize<'de> for J {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<J, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = J;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<J, E> {
                Ok(J::Null)
            }
            fn visit_none<E>(self) -> Result<J, E> {
                Ok(J::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<J, E> {
                Ok(J::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<J, E> {
                Ok(J::Num(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<J, E> {
                Ok(J::Num(n.into()))
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<J, E> {
                serde_json::Number::from_f64(n)
                    .map(J::Num)
                    .ok_or_else(|| E::custom("not a finite number"))
            }
            fn visit_str<E>(self, s: &str) -> Result<J, E> {
                Ok(J::Str(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<J, E> {
                Ok(J::Str(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<J, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = a.next_element()? {
                    v.push(x);
                }
                Ok(J::Arr(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<J, A::Error> {
                let mut v: Vec<(String, J)> = Vec::new();
                while let Some((k, x)) = a.next_entry::<String, J>()? {
                    match v.iter_mut().find(|(key, _)| *key == k) {
                        Some(slot) => slot.1 = x,
                        None => v.push((k, x)),
                    }
                }
                Ok(J::Obj(v))
            }
        }
        d.deserialize_any(V)
    }
}

impl J {
    fn str(s: &str) -> J {
        J::Str(s.to_string())
    }

    fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::Obj(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            J::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The object's entry `key`, inserted (at the end) as `default` when missing.
    fn entry(&mut self, key: &str, default: J) -> Option<&mut J> {
        let J::Obj(m) = self else { return None };
        let i = match m.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                m.push((key.to_string(), default));
                m.len() - 1
            }
        };
        Some(&mut m[i].1)
    }

    /// Pretty-printed with two-space indentation (as Claude Code and Gemini CLI write).
    pub fn pretty(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, 0);
        out.push('\n');
        out
    }

    fn write(&self, out: &mut String, depth: usize) {
        let pad = |out: &mut String, d: usize| {
            for _ in 0..d {
                out.push_str("  ");
            }
        };
        match self {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Num(n) => {
                let _ = write!(out, "{n}");
            }
            J::Str(s) => out.push_str(&serde_json::to_string(s).unwrap_or_default()),
            J::Arr(v) if v.is_empty() => out.push_str("[]"),
            J::Obj(m) if m.is_empty() => out.push_str("{}"),
            J::Arr(v) => {
                out.push_str("[\n");
                for (i, x) in v.iter().enumerate() {
                    pad(out, depth + 1);
                    x.write(out, depth + 1);
                    out.push_str(if i + 1 < v.len() { ",\n" } else { "\n" });
                }
                pad(out, depth);
                out.push(']');
            }
            J::Obj(m) => {
                out.push_str("{\n");
                for (i, (k, x)) in m.iter().enumerate() {
                    pad(out, depth + 1);
                    out.push_str(&serde_json::to_string(k).unwrap_or_default());
                    out.push_str(": ");
                    x.write(out, depth + 1);
                    out.push_str(if i + 1 < m.len() { ",\n" } else { "\n" });
                }
                pad(out, depth);
                out.push('}');
            }
        }
    }
}

/// Parses a settings file's text (an empty file is an empty object).
pub fn parse(text: &str) -> Result<J, String> {
    if text.trim().is_empty() {
        return Ok(J::Obj(Vec::new()));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let v = J::deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(v)
}

/// Where install writes: the user's or the project's settings file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `~/.claude/settings.json`, `~/.codex/hooks.json` (`$CODEX_HOME`), `~/.gemini/settings.json`.
    User,
    /// `.claude/settings.json`, `.codex/hooks.json`, `.gemini/settings.json` in the current
    /// directory.
    Project,
}

/// The settings file of `agent` at `scope`.
pub fn settings_path(agent: Agent, scope: Scope, home: &Path, project: &Path) -> PathBuf {
    match (agent, scope) {
        (Agent::Claude, Scope::User) => home.join(".claude").join("settings.json"),
        (Agent::Claude, Scope::Project) => project.join(".claude").join("settings.json"),
        (Agent::Codex, Scope::User) => std::env::var_os("CODEX_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".codex"))
            .join("hooks.json"),
        (Agent::Codex, Scope::Project) => project.join(".codex").join("hooks.json"),
        (Agent::Gemini, Scope::User) => home.join(".gemini").join("settings.json"),
        (Agent::Gemini, Scope::Project) => project.join(".gemini").join("settings.json"),
    }
}

/// The events install registers for an agent: `(event, matcher, timeout)` (seconds for Claude
/// and Codex, milliseconds for Gemini).
pub fn events(agent: Agent) -> &'static [(&'static str, Option<&'static str>, u64)] {
    match agent {
        Agent::Claude => &[
            ("PreToolUse", Some("*"), 10),
            ("PostToolUse", Some("*"), 10),
            ("PostToolUseFailure", Some("*"), 10),
            ("Stop", None, 10),
            ("SubagentStop", None, 10),
            ("SessionStart", None, 10),
            ("SessionEnd", None, 5),
            ("UserPromptSubmit", None, 10),
        ],
        // The events every Codex release with hooks knows; state of sessions that never send
        // SessionEnd expires after a day.
        Agent::Codex => &[
            ("PreToolUse", Some("*"), 10),
            ("PostToolUse", Some("*"), 10),
            ("Stop", None, 10),
            ("SessionStart", None, 10),
            ("UserPromptSubmit", None, 10),
        ],
        // Gemini tests tool matchers as regular expressions (older releases had no `*`
        // shorthand), so `.*`.
        Agent::Gemini => &[
            ("BeforeTool", Some(".*"), 10_000),
            ("AfterTool", Some(".*"), 10_000),
            ("AfterAgent", None, 10_000),
            ("BeforeAgent", None, 10_000),
            ("SessionStart", None, 10_000),
            ("SessionEnd", None, 5_000),
        ],
    }
}

/// The command line a hook runs: `<program> hook --agent <agent>` (plus `--profile`).
pub fn hook_command(program: &str, agent: Agent, profile: Option<&str>) -> String {
    let mut c = format!("{} hook --agent {}", shell_word(program), agent.as_str());
    if let Some(p) = profile {
        let _ = write!(c, " --profile {}", shell_word(p));
    }
    c
}

/// `command` with `--metrics-file PATH` added.
pub fn with_metrics_file(command: &str, path: &str) -> String {
    format!("{command} --metrics-file {}", shell_word(path))
}

fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%=,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Whether a handler is one of ours for `agent`.
pub fn is_ours(handler: &J, agent: Agent) -> bool {
    let ty = handler.get("type").and_then(J::as_str).unwrap_or("command");
    let Some(cmd) = handler.get("command").and_then(J::as_str) else {
        return false;
    };
    let marker = format!(" hook --agent {}", agent.as_str());
    ty == "command"
        && cmd.contains("agentbreaker")
        && (cmd.contains(&format!("{marker} ")) || cmd.ends_with(&marker))
}

fn handler(agent: Agent, event: &str, command: &str, timeout: u64) -> J {
    let mut fields = Vec::new();
    if agent == Agent::Gemini {
        fields.push((
            "name".to_string(),
            J::Str(format!("agentbreaker-{}", event.to_ascii_lowercase())),
        ));
    }
    fields.push(("type".to_string(), J::str("command")));
    fields.push(("command".to_string(), J::str(command)));
    fields.push(("timeout".to_string(), J::Num(timeout.into())));
    J::Obj(fields)
}

/// Adds our hooks to a settings document; returns whether it changed.
pub fn install(doc: &mut J, agent: Agent, command: &str) -> Result<bool, String> {
    if !matches!(doc, J::Obj(_)) {
        return Err("the settings file is not a JSON object".into());
    }
    let hooks = doc
        .entry("hooks", J::Obj(Vec::new()))
        .ok_or("the settings file is not a JSON object")?;
    if !matches!(hooks, J::Obj(_)) {
        return Err("its \"hooks\" entry is not an object".into());
    }
    let mut changed = false;
    for &(event, matcher, timeout) in events(agent) {
        let wanted = handler(agent, event, command, timeout);
        let list = hooks
            .entry(event, J::Arr(Vec::new()))
            .ok_or("its \"hooks\" entry is not an object")?;
        let J::Arr(groups) = list else {
            return Err(format!("its hooks.{event} entry is not a list"));
        };
        let mut found = false;
        for group in groups.iter_mut() {
            if let Some(J::Arr(handlers)) = group.entry_mut_existing("hooks") {
                for h in handlers.iter_mut() {
                    if is_ours(h, agent) && !found {
                        found = true;
                        if *h != wanted {
                            *h = wanted.clone();
                            changed = true;
                        }
                    }
                }
            }
        }
        if !found {
            let mut g = Vec::new();
            if let Some(m) = matcher {
                g.push(("matcher".to_string(), J::str(m)));
            }
            g.push(("hooks".to_string(), J::Arr(vec![wanted])));
            groups.push(J::Obj(g));
            changed = true;
        }
    }
    Ok(changed)
}

impl J {
    fn entry_mut_existing(&mut self, key: &str) -> Option<&mut J> {
        match self {
            J::Obj(m) => m.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Removes our hooks from a settings document; returns whether it changed.
pub fn uninstall(doc: &mut J, agent: Agent) -> bool {
    let Some(hooks) = doc.entry_mut_existing("hooks") else {
        return false;
    };
    let J::Obj(events) = hooks else { return false };
    let mut changed = false;
    for (_, list) in events.iter_mut() {
        let J::Arr(groups) = list else { continue };
        let before = groups.len();
        let mut removed_here = false;
        groups.retain_mut(|group| {
            let Some(J::Arr(handlers)) = group.entry_mut_existing("hooks") else {
                return true;
            };
            let n = handlers.len();
            handlers.retain(|h| !is_ours(h, agent));
            if handlers.len() == n {
                return true;
            }
            removed_here = true;
            !handlers.is_empty()
        });
        changed |= removed_here || groups.len() != before;
    }
    if changed {
        events.retain(|(_, list)| !matches!(list, J::Arr(g) if g.is_empty()));
        if events.is_empty()
            && let J::Obj(m) = doc
        {
            m.retain(|(k, _)| k != "hooks");
        }
    }
    changed
}

/// A short line diff of two texts (`-`/`+` lines with two lines of context).
pub fn diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        return format!("(the new file, {} lines)\n{new}", b.len());
    }
    // Longest common subsequence table.
    let mut t = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            t[i][j] = if a[i] == b[j] {
                t[i + 1][j + 1] + 1
            } else {
                t[i + 1][j].max(t[i][j + 1])
            };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || t[i][j + 1] >= t[i + 1][j]) {
            ops.push(('+', b[j]));
            j += 1;
        } else {
            ops.push(('-', a[i]));
            i += 1;
        }
    }
    let near = |k: usize| {
        let lo = k.saturating_sub(2);
        let hi = (k + 3).min(ops.len());
        ops[lo..hi].iter().any(|(c, _)| *c != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (c, line)) in ops.iter().enumerate() {
        if *c == ' ' && !near(k) {
            if !skipped {
                out.push_str("  ...\n");
                skipped = true;
            }
            continue;
        }
        skipped = false;
        let _ = writeln!(out, "{c} {line}");
    }
    out
}

/// What `install`/`uninstall` did.
#[derive(Debug)]
pub struct Change {
    /// The settings file.
    pub path: PathBuf,
    /// Whether anything changed (or would).
    pub changed: bool,
    /// The diff (dry run) or empty.
    pub diff: String,
}

/// Reads a settings file: `Ok(None)` when it does not exist.
fn read_settings(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            "cannot read {}: {e}; nothing was changed",
            path.display()
        )),
    }
}

/// Writes a settings file atomically, keeping the old file's permissions (0600 for a new one);
/// a symlink is written through to its target.
fn write_settings(path: &Path, text: &str) -> Result<(), String> {
    let target = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(_) => path.to_path_buf(),
    };
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mode = std::fs::metadata(&target).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.agentbreaker-{}.tmp", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &target)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", target.display()));
    }
    Ok(())
}

/// Installs (`remove: false`) or uninstalls our hooks in `path`; with `dry_run` nothing is written
/// and the diff is returned.
pub fn apply(
    path: &Path,
    agent: Agent,
    command: &str,
    remove: bool,
    dry_run: bool,
) -> Result<Change, String> {
    let old = read_settings(path)?;
    let mut doc = match &old {
        Some(text) => parse(text).map_err(|e| {
            format!(
                "cannot read {} as JSON ({e}; comments are not supported); nothing was changed",
                path.display()
            )
        })?,
        None => J::Obj(Vec::new()),
    };
    let changed = if remove {
        uninstall(&mut doc, agent)
    } else {
        install(&mut doc, agent, command).map_err(|e| {
            format!(
                "cannot add hooks to {}: {e}; nothing was changed",
                path.display()
            )
        })?
    };
    let new = doc.pretty();
    let before = old.clone().unwrap_or_default();
    let diff = if changed {
        diff(&before, &new)
    } else {
        String::new()
    };
    if changed && !dry_run {
        write_settings(path, &new)?;
    }
    Ok(Change {
        path: path.to_path_buf(),
        changed,
        diff,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OTHERS: &str = r#"{
  "model": "opus",
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "my-guard.sh",
            "timeout": 30
          }
        ]
      }
    ],
    "Notification": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "notify-send hi"
          }
        ]
      }
    ]
  },
  "env": {
    "Z": "1",
    "A": "2"
  }
}
"#;

    #[test]
    fn round_trip_keeps_others_hooks_and_key_order() {
        for agent in Agent::ALL {
            let mut doc = parse(OTHERS).unwrap();
            assert_eq!(doc.pretty(), OTHERS);
            let cmd = hook_command("/opt/bin/agentbreaker", agent, None);
            assert!(install(&mut doc, agent, &cmd).unwrap());
            let once = doc.pretty();
            assert!(!install(&mut doc, agent, &cmd).unwrap(), "idempotent");
            assert_eq!(doc.pretty(), once);
            let text = doc.pretty();
            assert!(text.find("my-guard.sh") < text.find("/opt/bin/agentbreaker"));
            assert!(uninstall(&mut doc, agent));
            assert_eq!(doc.pretty(), OTHERS, "{agent:?}");
            assert!(!uninstall(&mut doc, agent));
        }
    }

    #[test]
    fn empty_and_new_files() {
        let mut doc = parse("").unwrap();
        let cmd = hook_command("agentbreaker", Agent::Claude, None);
        install(&mut doc, Agent::Claude, &cmd).unwrap();
        assert!(doc.pretty().contains("\"PostToolUseFailure\""));
        uninstall(&mut doc, Agent::Claude);
        assert_eq!(doc.pretty(), "{}\n");
        assert!(parse("{\"a\": 1} // comment").is_err());
        assert!(parse("[1]").is_ok());
        let mut arr = parse("[1]").unwrap();
        assert!(install(&mut arr, Agent::Claude, &cmd).is_err());
    }

    #[test]
    fn ours_is_recognised_by_its_command() {
        let h = |c: &str| {
            J::Obj(vec![
                ("type".into(), J::str("command")),
                ("command".into(), J::str(c)),
            ])
        };
        assert!(is_ours(
            &h("agentbreaker hook --agent claude"),
            Agent::Claude
        ));
        assert!(is_ours(
            &h("'/a b/agentbreaker' hook --agent codex --profile seed"),
            Agent::Codex
        ));
        assert!(!is_ours(
            &h("agentbreaker hook --agent claude"),
            Agent::Codex
        ));
        assert!(!is_ours(&h("my-guard.sh"), Agent::Claude));
        assert!(!is_ours(
            &h("agentbreaker hook --agent claudex"),
            Agent::Claude
        ));
        assert_eq!(shell_word("/a b/x"), "'/a b/x'");
    }

    #[test]
    fn diff_shows_changes() {
        let d = diff("a\nb\nc\n", "a\nb\nx\nc\n");
        assert!(d.contains("+ x"), "{d}");
    }
}
