//! The detectors `eval --compare` measures beside the Monitor, each written from its public
//! description or source (docs/detection.md cites file and commit):
//!
//! - the eval README's two simple rule sets (same error ×5 with numbers and paths normalized,
//!   3 near-identical outputs, no progress for 20 steps; and same error ×5 alone);
//! - OpenHands' stuck detector, V0 (`openhands/controller/stuck.py`) and the agent-sdk's
//!   (`openhands/sdk/conversation/stuck_detector.py`);
//! - Gemini CLI's loop detection (`packages/core/src/services/loopDetectionService.ts`): repeated
//!   tool-call cycles and content chanting (its LLM check is not reproduced).
//!
//! Each maps a trajectory's steps onto the events the peer sees; `docs/detection.md` lists where
//! the mapping approximates. A peer's intervention that only tells the model (Gemini's first
//! strike, the SDK's action-error nudge) counts as a warning; what stops the run as a halt.

use std::collections::{HashMap, HashSet, VecDeque};

use agentbreaker::{ErrorMatch, fingerprint};

use super::{Detector, Halted, Run, RunOutcome, Step};

fn halted(step: u64, by: &str) -> Option<Halted> {
    Some(Halted {
        step,
        by: by.to_string(),
    })
}

// ---------------------------------------------------------------------------------------------
// The eval README's simple rules.

/// "Same error ×5 after normalizing numbers and paths, 3 near-identical outputs, no progress for
/// 20 steps" (or the first rule alone).
#[derive(Debug, Clone)]
pub struct ReadmeRules {
    /// Also the output and progress rules.
    pub all_three: bool,
}

fn token_set(text: &str) -> HashSet<&str> {
    text.split_whitespace().take(512).collect()
}

fn jaccard(a: &HashSet<&str>, b: &HashSet<&str>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = a.intersection(b).count();
    inter as f64 / (a.len() + b.len() - inter) as f64
}

impl Detector for ReadmeRules {
    fn replay(&self, run: &Run) -> Result<RunOutcome, String> {
        let mut errors: HashMap<String, u32> = HashMap::new();
        let mut outputs: VecDeque<String> = VecDeque::new();
        let mut no_progress = 0;
        let mut best_tests = 0;
        for step in &run.steps {
            let progress =
                step.files_changed > 0 || step.tests_passed.is_some_and(|t| t > best_tests);
            best_tests = best_tests.max(step.tests_passed.unwrap_or(0));
            if progress {
                errors.clear();
                no_progress = 0;
            } else {
                no_progress += 1;
            }
            for e in step.error_texts() {
                let n = errors
                    .entry(fingerprint(e, ErrorMatch::Template))
                    .or_default();
                *n += 1;
                if *n >= 5 {
                    return Ok(RunOutcome {
                        halt: halted(step.number, "same_error"),
                        ..RunOutcome::default()
                    });
                }
            }
            if !self.all_three {
                continue;
            }
            if outputs.len() == 3 {
                outputs.pop_front();
            }
            outputs.push_back(step.output());
            if outputs.len() == 3 {
                let sets: Vec<HashSet<&str>> = outputs.iter().map(|o| token_set(o)).collect();
                if jaccard(&sets[0], &sets[1]) >= 0.95 && jaccard(&sets[1], &sets[2]) >= 0.95 {
                    return Ok(RunOutcome {
                        halt: halted(step.number, "output_loop"),
                        ..RunOutcome::default()
                    });
                }
            }
            if no_progress >= 20 {
                return Ok(RunOutcome {
                    halt: halted(step.number, "no_progress"),
                    ..RunOutcome::default()
                });
            }
        }
        Ok(RunOutcome::default())
    }
}

// ---------------------------------------------------------------------------------------------
// OpenHands.

/// Which OpenHands stuck detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenHandsVersion {
    /// `openhands/controller/stuck.py` (OpenHands 0.x).
    V0,
    /// `openhands/sdk/conversation/stuck_detector.py` (agent-sdk v1).
    Sdk,
}

/// OpenHands' stuck detector.
#[derive(Debug, Clone)]
pub struct OpenHands {
    /// Which one.
    pub version: OpenHandsVersion,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum OhEvent {
    /// A tool call: (tool, arguments, the thought attached to a response's first call).
    Action(String, String, String),
    /// An agent message: a response without tool calls.
    Message(String),
    /// A shell result, compared by command and exit code (V0) or with its output (SDK).
    Command(String, i64, String),
    /// An error observation (V0: a failed non-shell result or an agent error).
    Error(String),
    /// An agent-level error (SDK: only the `error` events).
    AgentError(String),
    /// Any other observation: (tool, ok, output).
    Observation(String, bool, String),
}

impl OhEvent {
    fn is_action(&self) -> bool {
        matches!(self, OhEvent::Action(..) | OhEvent::Message(_))
    }

    fn is_observation(&self) -> bool {
        !self.is_action()
    }
}

fn result_key(step: &Step, i: usize) -> String {
    step.result_sha1
        .get(i)
        .cloned()
        .flatten()
        .unwrap_or_else(|| step.results[i].1.clone())
}

/// The step's events as OpenHands records them: each call with its observation, the thought on
/// the first call only; a response without calls is a message; agent errors are observations.
fn openhands_events(step: &Step, version: OpenHandsVersion) -> Vec<OhEvent> {
    let mut events = Vec::new();
    let mut used = vec![false; step.results.len()];
    for (ci, call) in step.calls.iter().enumerate() {
        let thought = if ci == 0 {
            step.text.clone()
        } else {
            String::new()
        };
        events.push(OhEvent::Action(
            call.name.clone(),
            call.args.clone(),
            thought,
        ));
        let by_id = call.id.as_ref().and_then(|id| {
            (0..step.results.len()).find(|&i| !used[i] && step.result_ids[i].as_ref() == Some(id))
        });
        let Some(i) = by_id.or_else(|| (ci < step.results.len() && !used[ci]).then_some(ci)) else {
            continue;
        };
        used[i] = true;
        events.push(openhands_observation(step, i, &call.args, version));
    }
    if step.calls.is_empty() {
        events.push(OhEvent::Message(step.text.clone()));
    }
    for (i, was_used) in used.iter().enumerate() {
        if !was_used {
            events.push(openhands_observation(step, i, "", version));
        }
    }
    for e in &step.errors {
        events.push(match version {
            OpenHandsVersion::V0 => OhEvent::Error(e.clone()),
            OpenHandsVersion::Sdk => OhEvent::AgentError(e.clone()),
        });
    }
    events
}

fn openhands_observation(step: &Step, i: usize, command: &str, v: OpenHandsVersion) -> OhEvent {
    let (ok, _) = &step.results[i];
    let exit = step.result_exit.get(i).copied().flatten();
    match (exit, v) {
        (Some(code), OpenHandsVersion::V0) => OhEvent::Command(command.into(), code, String::new()),
        (Some(code), OpenHandsVersion::Sdk) => {
            OhEvent::Command(command.into(), code, result_key(step, i))
        }
        (None, OpenHandsVersion::V0) if *ok == Some(false) => OhEvent::Error(result_key(step, i)),
        (None, _) => OhEvent::Observation(String::new(), *ok != Some(false), result_key(step, i)),
    }
}

fn all_equal<T: PartialEq>(items: &[&T]) -> bool {
    items.windows(2).all(|w| w[0] == w[1])
}

/// The newest `n` events of a kind, newest first.
fn last_of(history: &[OhEvent], n: usize, pick: fn(&OhEvent) -> bool) -> Vec<&OhEvent> {
    history.iter().rev().filter(|e| pick(e)).take(n).collect()
}

impl OpenHands {
    /// Whether the history is stuck; `Some(true)` for a stop, `Some(false)` for the SDK's nudge.
    fn check(&self, history: &[OhEvent]) -> Option<(bool, &'static str)> {
        if history.len() < 3 {
            return None;
        }
        let sdk = self.version == OpenHandsVersion::Sdk;
        let actions = last_of(history, 4, OhEvent::is_action);
        let observations = last_of(history, 4, OhEvent::is_observation);
        // 1. The same action and observation four times.
        if actions.len() == 4
            && observations.len() == 4
            && all_equal(&actions)
            && all_equal(&observations)
        {
            return Some((true, "repeating_action_observation"));
        }
        // 2. The same action, each ending in an error.
        if sdk {
            let pairs = actions.iter().zip(observations.iter());
            let streak = pairs
                .take_while(|(a, o)| **a == actions[0] && matches!(o, OhEvent::AgentError(_)))
                .count();
            if streak >= 4 {
                return Some((true, "repeating_action_error"));
            }
            if streak == 3 {
                return Some((false, "repeating_action_error"));
            }
        } else if actions.len() >= 3
            && observations.len() >= 3
            && all_equal(&actions[..3])
            && observations[..3]
                .iter()
                .all(|o| matches!(o, OhEvent::Error(_)))
        {
            return Some((true, "repeating_action_error"));
        }
        // 3. The monologue.
        if sdk {
            let run = history
                .iter()
                .rev()
                .take_while(|e| matches!(e, OhEvent::Message(_)))
                .count();
            if run >= 3 {
                return Some((true, "monologue"));
            }
        } else {
            let messages: Vec<usize> = history
                .iter()
                .enumerate()
                .filter(|(_, e)| matches!(e, OhEvent::Message(_)))
                .map(|(i, _)| i)
                .collect();
            if messages.len() >= 3 {
                let last3 = &messages[messages.len() - 3..];
                let same = last3.iter().all(|&i| history[i] == history[last3[0]]);
                let quiet = history[last3[0]..=last3[2]]
                    .iter()
                    .all(|e| !e.is_observation());
                if same && quiet {
                    return Some((true, "monologue"));
                }
            }
        }
        // 4. A, B, A, B, A, B.
        if history.len() >= 6 {
            let a = last_of(history, 6, OhEvent::is_action);
            let o = last_of(history, 6, OhEvent::is_observation);
            if a.len() == 6 && o.len() == 6 && (0..4).all(|i| a[i] == a[i + 2] && o[i] == o[i + 2])
            {
                return Some((true, "alternating_pattern"));
            }
        }
        None
    }
}

impl Detector for OpenHands {
    fn replay(&self, run: &Run) -> Result<RunOutcome, String> {
        let mut history: Vec<OhEvent> = Vec::new();
        let mut out = RunOutcome::default();
        for step in &run.steps {
            if step.restart {
                history.clear();
            }
            history.extend(openhands_events(step, self.version));
            if self.version == OpenHandsVersion::Sdk && history.len() > 20 {
                history.drain(..history.len() - 20);
            }
            match self.check(&history) {
                Some((true, why)) => {
                    out.halt = halted(step.number, why);
                    return Ok(out);
                }
                Some((false, _)) => {
                    out.warnings += 1;
                    out.first_warning.get_or_insert(step.number);
                }
                None => {}
            }
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// Gemini CLI.

/// Gemini CLI's loop detection (heuristics only).
#[derive(Debug, Clone)]
pub struct GeminiCli;

const TOOL_REPEATS: usize = 5;
const MAX_CYCLE: usize = 5;
const CHUNK: usize = 50;
const CONTENT_REPEATS: usize = 10;
const MAX_TEXT: usize = 5000;

#[derive(Debug, Default)]
struct Chanting {
    text: Vec<char>,
    /// chunk → positions of its occurrences in `text`.
    seen: HashMap<String, Vec<usize>>,
    next: usize,
    in_code: bool,
}

impl Chanting {
    fn reset(&mut self) {
        *self = Chanting {
            in_code: self.in_code,
            ..Chanting::default()
        };
    }

    /// Feeds one streamed piece of text; true when it completes a chanting loop.
    fn feed(&mut self, piece: &str) -> bool {
        let trimmed = piece.trim();
        let fences = piece.matches("```").count();
        let markdown = fences > 0
            || (trimmed.starts_with('|') && trimmed.ends_with('|') && trimmed.len() > 1)
            || trimmed.contains("---|")
            || trimmed.starts_with("* ")
            || trimmed.starts_with("- ")
            || trimmed.starts_with("+ ")
            || trimmed
                .split_once(". ")
                .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty())
            || trimmed.starts_with('#')
            || trimmed.starts_with('>');
        let divider = !trimmed.is_empty()
            && trimmed
                .chars()
                .all(|c| matches!(c, '+' | '-' | '_' | '=' | '*' | '\u{2500}'..='\u{257F}'));
        if markdown || divider {
            self.reset();
        }
        let was_code = self.in_code;
        if fences % 2 == 1 {
            self.in_code = !self.in_code;
        }
        if was_code || self.in_code || divider {
            return false;
        }
        self.text.extend(piece.chars());
        if self.text.len() > MAX_TEXT {
            let cut = self.text.len() - MAX_TEXT;
            self.text.drain(..cut);
            self.next = self.next.saturating_sub(cut);
            for positions in self.seen.values_mut() {
                positions.retain(|p| *p >= cut);
                for p in positions.iter_mut() {
                    *p -= cut;
                }
            }
            self.seen.retain(|_, v| !v.is_empty());
        }
        while self.next + CHUNK <= self.text.len() {
            let chunk: String = self.text[self.next..self.next + CHUNK].iter().collect();
            let positions = self.seen.entry(chunk).or_default();
            positions.push(self.next);
            if positions.len() >= CONTENT_REPEATS {
                let recent = &positions[positions.len() - CONTENT_REPEATS..];
                let mean_gap = (recent[CONTENT_REPEATS - 1] - recent[0]) / (CONTENT_REPEATS - 1);
                let periods: HashSet<String> = recent
                    .windows(2)
                    .map(|w| self.text[w[0]..w[1]].iter().collect())
                    .collect();
                if mean_gap <= CHUNK * 5 && periods.len() <= 5 {
                    return true;
                }
            }
            self.next += 1;
        }
        false
    }
}

impl Detector for GeminiCli {
    fn replay(&self, run: &Run) -> Result<RunOutcome, String> {
        let mut calls: VecDeque<String> = VecDeque::new();
        let mut chanting = Chanting::default();
        let mut out = RunOutcome::default();
        let mut strikes = 0u64;
        for step in &run.steps {
            if step.restart {
                calls.clear();
                chanting = Chanting::default();
                strikes = 0;
            }
            let mut detected = false;
            for line in step.text.split_inclusive('\n') {
                if chanting.feed(line) {
                    detected = true;
                    break;
                }
            }
            if !detected {
                for call in &step.calls {
                    chanting.reset();
                    calls.push_back(format!("{}:{}", call.name, call.args));
                    if calls.len() > TOOL_REPEATS * MAX_CYCLE {
                        calls.pop_front();
                    }
                    let n = calls.len();
                    let looped = (1..=MAX_CYCLE).any(|k| {
                        n >= k * TOOL_REPEATS
                            && (0..k * TOOL_REPEATS)
                                .all(|i| calls[n - 1 - i] == calls[n - 1 - (i % k)])
                    });
                    if looped {
                        detected = true;
                        break;
                    }
                }
            }
            if detected {
                strikes += 1;
                if strikes == 1 {
                    // The first strike tells the model and drops the looping call.
                    out.warnings += 1;
                    out.first_warning.get_or_insert(step.number);
                } else {
                    out.halt = halted(step.number, "loop_detected");
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }
}
