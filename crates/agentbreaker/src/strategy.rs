//! Exit strategies and fix plans (contract §5, seed 002): when is the loop done?

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::analyzer::Analysis;
use crate::clock::{SharedClock, SystemClock};
use crate::error::{Error, Result};
use crate::events::{Event, Listeners};
use crate::interop::{Fields, type_name};
use crate::state::State;
use crate::text::truncate;

/// The most steps a fix plan holds.
pub const MAX_PLAN_STEPS: usize = 10_000;
/// The longest step description kept, in bytes.
pub const MAX_STEP_DESCRIPTION_BYTES: usize = 4096;

/// Why a loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// `auto`: the response says the work is complete.
    Completed,
    /// `done_signals`: confidence accumulated over recent iterations.
    DoneSignals,
    /// `fix_plan`: every step completed.
    PlanComplete,
    /// `fix_plan`: every step completed or skipped, some skipped.
    PlanExhausted,
    /// The circuit breaker opened.
    CircuitOpen,
    /// The loop reached `maxIterations`.
    MaxIterations,
    /// A budget halt.
    BudgetExceeded,
}

impl ExitReason {
    /// The JSON spelling (`completed`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ExitReason::Completed => "completed",
            ExitReason::DoneSignals => "done_signals",
            ExitReason::PlanComplete => "plan_complete",
            ExitReason::PlanExhausted => "plan_exhausted",
            ExitReason::CircuitOpen => "circuit_open",
            ExitReason::MaxIterations => "max_iterations",
            ExitReason::BudgetExceeded => "budget_exceeded",
        }
    }

    /// Whether this ending is a success (`completed`, `done_signals`, `plan_complete`).
    pub fn is_success(self) -> bool {
        matches!(
            self,
            ExitReason::Completed | ExitReason::DoneSignals | ExitReason::PlanComplete
        )
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A strategy's answer for one iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExitDecision {
    /// Whether to exit.
    pub exit: bool,
    /// Why, when exiting.
    pub reason: Option<ExitReason>,
}

impl ExitDecision {
    const CONTINUE: ExitDecision = ExitDecision {
        exit: false,
        reason: None,
    };

    fn exit(reason: ExitReason) -> Self {
        ExitDecision {
            exit: true,
            reason: Some(reason),
        }
    }
}

/// One step of a fix plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FixStep {
    /// What the step is.
    pub description: String,
    /// Whether a response completed it.
    pub completed: bool,
    /// Whether it was given up after `max_attempts`.
    pub skipped: bool,
    /// Responses that did not complete it.
    pub attempts: u32,
    /// Attempts before it is skipped (>= 1).
    pub max_attempts: u32,
}

impl FixStep {
    /// A fresh step.
    pub fn new(description: impl Into<String>, max_attempts: u32) -> Self {
        FixStep {
            description: truncate(&description.into(), MAX_STEP_DESCRIPTION_BYTES).to_string(),
            completed: false,
            skipped: false,
            attempts: 0,
            max_attempts,
        }
    }

    fn open(&self) -> bool {
        !self.completed && !self.skipped
    }
}

/// A fix plan: steps worked on in order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FixPlan {
    /// The steps.
    pub steps: Vec<FixStep>,
}

static CHECKLIST_ITEM: OnceLock<Regex> = OnceLock::new();

impl FixPlan {
    /// Reads a markdown checklist: `- [ ]` items are open, `- [x]` items completed (also `*`/`+`
    /// bullets and `[X]`, indented or not); other lines are ignored.
    pub fn from_markdown(text: &str, max_attempts: u32) -> Result<Self> {
        let item = CHECKLIST_ITEM.get_or_init(|| {
            #[allow(clippy::expect_used)]
            Regex::new(r"^\s*[-*+]\s+\[([ xX])\]\s*(.*?)\s*$").expect("valid built-in pattern")
        });
        let mut steps = Vec::new();
        for line in text.lines() {
            if let Some(c) = item.captures(line) {
                if steps.len() >= MAX_PLAN_STEPS {
                    return Err(Error::config(format_args!(
                        "a fix plan holds at most {MAX_PLAN_STEPS} steps"
                    )));
                }
                let mut step = FixStep::new(&c[2], max_attempts);
                step.completed = &c[1] != " ";
                steps.push(step);
            }
        }
        Ok(FixPlan { steps })
    }

    /// The index of the step being worked on, `None` when none is left.
    pub fn current_step(&self) -> Option<usize> {
        self.steps.iter().position(FixStep::open)
    }
}

/// [`ExitStrategy::plan_status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanStatus {
    /// The steps.
    pub steps: Vec<FixStep>,
    /// The index of the step being worked on.
    pub current_step: Option<usize>,
}

/// How a composite combines its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompositeMode {
    /// Exit when any member fires this iteration.
    #[default]
    Any,
    /// Exit once every member has fired at least once.
    All,
}

/// A strategy configuration (JSON: `{"type": "auto", ...}`).
#[derive(Debug, Clone, PartialEq)]
pub enum StrategyConfig {
    /// Exit when a completion signal is detected with at least `threshold` confidence.
    Auto {
        /// Default 70.
        threshold: u32,
    },
    /// Exit when the confidences of the last `window` iterations sum to `threshold`.
    DoneSignals {
        /// Default 40.
        threshold: u32,
        /// Default 5.
        window: u32,
    },
    /// Work through a fix plan.
    FixPlan(FixPlan),
    /// Exit when the circuit is OPEN.
    CircuitBreaker,
    /// Combine strategies.
    Composite {
        /// `any` or `all`.
        mode: CompositeMode,
        /// The members, in order.
        members: Vec<StrategyConfig>,
    },
}

impl Default for StrategyConfig {
    fn default() -> Self {
        StrategyConfig::Auto { threshold: 70 }
    }
}

const MAX_COMPOSITE_DEPTH: usize = 16;

impl StrategyConfig {
    /// The config's `type`: `"auto"`, `"done_signals"`, `"fix_plan"`, ...
    pub fn type_name(&self) -> &'static str {
        match self {
            StrategyConfig::Auto { .. } => "auto",
            StrategyConfig::DoneSignals { .. } => "done_signals",
            StrategyConfig::FixPlan(_) => "fix_plan",
            StrategyConfig::CircuitBreaker => "circuit_breaker",
            StrategyConfig::Composite { .. } => "composite",
        }
    }

    /// Reads `{type, ...}`; `null` is the default (`auto`). Problems are `INVALID_CONFIG`.
    pub fn from_json(value: &Value) -> Result<Self> {
        if value.is_null() {
            return Ok(StrategyConfig::default());
        }
        Self::parse(value, 0)
    }

    /// Reads a fix-plan config without `type` (`{steps}` or `{markdown}`, optional `maxAttempts`).
    pub fn fix_plan_from_json(value: &Value) -> Result<Self> {
        match value {
            Value::Null => Err(Error::config("a fix plan needs steps or markdown")),
            Value::Object(map) => match map.get("type") {
                None => parse_fix_plan(value),
                Some(Value::String(t)) if t == "fix_plan" => parse_fix_plan(value),
                Some(_) => Err(Error::config("a fix plan config's type must be fix_plan")),
            },
            other => Err(Error::config(format_args!(
                "a fix plan config must be an object, not {}",
                type_name(other)
            ))),
        }
    }

    fn parse(value: &Value, depth: usize) -> Result<Self> {
        if depth > MAX_COMPOSITE_DEPTH {
            return Err(Error::config("composite strategies nest too deeply"));
        }
        let kind = match value.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(v) => {
                return Err(Error::config(format_args!(
                    "strategy type must be a string, not {}",
                    type_name(v)
                )));
            }
            None if value.is_object() => return Err(Error::config("a strategy needs a \"type\"")),
            None => {
                return Err(Error::config(format_args!(
                    "a strategy config must be an object, not {}",
                    type_name(value)
                )));
            }
        };
        let percent = |f: &Fields<'_>, key: &str, default: u64| -> Result<u32> {
            let v = f.u64_or(key, default)?;
            if v > 100 {
                return Err(Error::config(format_args!(
                    "{key} must be between 0 and 100"
                )));
            }
            Ok(v as u32)
        };
        match kind {
            "auto" => {
                let f = Fields::new(
                    value,
                    "auto strategy",
                    Error::InvalidConfig,
                    &["type", "threshold"],
                )?;
                Ok(StrategyConfig::Auto {
                    threshold: percent(&f, "threshold", 70)?,
                })
            }
            "done_signals" => {
                let f = Fields::new(
                    value,
                    "done_signals strategy",
                    Error::InvalidConfig,
                    &["type", "threshold", "window"],
                )?;
                let threshold = f.u64_or("threshold", 40)?;
                let window = f.u64_or("window", 5)?;
                if !(1..=1000).contains(&window) {
                    return Err(Error::config(
                        "done_signals window must be between 1 and 1000",
                    ));
                }
                if threshold > 100 * window {
                    return Err(Error::config(
                        "done_signals threshold can never be reached with this window",
                    ));
                }
                Ok(StrategyConfig::DoneSignals {
                    threshold: threshold as u32,
                    window: window as u32,
                })
            }
            "fix_plan" => parse_fix_plan(value),
            "circuit_breaker" => {
                Fields::new(
                    value,
                    "circuit_breaker strategy",
                    Error::InvalidConfig,
                    &["type"],
                )?;
                Ok(StrategyConfig::CircuitBreaker)
            }
            "composite" => {
                let f = Fields::new(
                    value,
                    "composite strategy",
                    Error::InvalidConfig,
                    &["type", "mode", "members"],
                )?;
                let mode = match f.str_opt("mode")? {
                    None | Some("any") => CompositeMode::Any,
                    Some("all") => CompositeMode::All,
                    Some(other) => {
                        return Err(Error::config(format_args!(
                            "composite mode must be \"any\" or \"all\", not {other:?}"
                        )));
                    }
                };
                let members = match f.get("members") {
                    Some(Value::Array(items)) if !items.is_empty() => items
                        .iter()
                        .map(|m| Self::parse(m, depth + 1))
                        .collect::<Result<Vec<_>>>()?,
                    Some(Value::Array(_)) => {
                        return Err(Error::config("a composite needs at least one member"));
                    }
                    Some(v) => {
                        return Err(Error::config(format_args!(
                            "composite members must be a list, not {}",
                            type_name(v)
                        )));
                    }
                    None => return Err(Error::config("a composite needs \"members\"")),
                };
                Ok(StrategyConfig::Composite { mode, members })
            }
            other => Err(Error::config(format_args!(
                "unknown strategy type {other:?} (auto, done_signals, fix_plan, circuit_breaker, composite)"
            ))),
        }
    }
}

/// A `fix_plan` config (`type` optional): `{steps | markdown, maxAttempts?}`.
fn parse_fix_plan(value: &Value) -> Result<StrategyConfig> {
    let f = Fields::new(
        value,
        "fix_plan strategy",
        Error::InvalidConfig,
        &["type", "steps", "markdown", "maxAttempts"],
    )?;
    let max_attempts = f.u64_or("maxAttempts", 3)?;
    if max_attempts < 1 || max_attempts > u64::from(u32::MAX) {
        return Err(Error::config("maxAttempts must be >= 1"));
    }
    let max_attempts = max_attempts as u32;
    let plan = match (f.get("steps"), f.str_opt("markdown")?) {
        (Some(_), Some(_)) => {
            return Err(Error::config(
                "give a fix plan either steps or markdown, not both",
            ));
        }
        (None, None) => {
            return Err(Error::config("a fix plan needs steps or markdown"));
        }
        (None, Some(md)) => FixPlan::from_markdown(md, max_attempts)?,
        (Some(steps), None) => parse_steps(steps, max_attempts)?,
    };
    Ok(StrategyConfig::FixPlan(plan))
}

fn parse_steps(steps: &Value, default_max_attempts: u32) -> Result<FixPlan> {
    let Value::Array(items) = steps else {
        return Err(Error::config(format_args!(
            "fix plan steps must be a list, not {}",
            type_name(steps)
        )));
    };
    if items.len() > MAX_PLAN_STEPS {
        return Err(Error::config(format_args!(
            "a fix plan holds at most {MAX_PLAN_STEPS} steps"
        )));
    }
    let mut plan = FixPlan::default();
    for item in items {
        let f = Fields::new(
            item,
            "fix plan step",
            Error::InvalidConfig,
            &["description", "completed", "attempts", "maxAttempts"],
        )?;
        let max_attempts = f.u64_or("maxAttempts", u64::from(default_max_attempts))?;
        if max_attempts < 1 || max_attempts > u64::from(u32::MAX) {
            return Err(Error::config("a step's maxAttempts must be >= 1"));
        }
        let attempts = f.u64_or("attempts", 0)?.min(u64::from(u32::MAX)) as u32;
        let mut step = FixStep::new(f.str_req("description")?, max_attempts as u32);
        step.completed = f.bool_or("completed", false)?;
        step.attempts = attempts;
        step.skipped = !step.completed && attempts >= step.max_attempts;
        plan.steps.push(step);
    }
    Ok(plan)
}

#[derive(Debug, Clone)]
enum Runtime {
    Auto {
        threshold: u32,
    },
    DoneSignals {
        threshold: u32,
        window: usize,
        recent: VecDeque<u32>,
    },
    FixPlan(FixPlan),
    CircuitBreaker,
    Composite {
        mode: CompositeMode,
        members: Vec<Runtime>,
        /// For `all`: the reason each member gave when it first fired.
        fired: Vec<Option<ExitReason>>,
    },
}

impl Runtime {
    fn new(config: &StrategyConfig) -> Self {
        match config {
            StrategyConfig::Auto { threshold } => Runtime::Auto {
                threshold: *threshold,
            },
            StrategyConfig::DoneSignals { threshold, window } => Runtime::DoneSignals {
                threshold: *threshold,
                window: *window as usize,
                recent: VecDeque::new(),
            },
            StrategyConfig::FixPlan(plan) => Runtime::FixPlan(plan.clone()),
            StrategyConfig::CircuitBreaker => Runtime::CircuitBreaker,
            StrategyConfig::Composite { mode, members } => Runtime::Composite {
                mode: *mode,
                members: members.iter().map(Runtime::new).collect(),
                fired: vec![None; members.len()],
            },
        }
    }

    fn should_exit(
        &mut self,
        analysis: &Analysis,
        circuit: State,
        now: u64,
        events: &mut Vec<Event>,
    ) -> ExitDecision {
        match self {
            Runtime::Auto { threshold } => {
                let signal = &analysis.completion_signal;
                if signal.detected && signal.confidence >= *threshold {
                    ExitDecision::exit(ExitReason::Completed)
                } else {
                    ExitDecision::CONTINUE
                }
            }
            Runtime::DoneSignals {
                threshold,
                window,
                recent,
            } => {
                if recent.len() >= *window {
                    recent.pop_front();
                }
                recent.push_back(analysis.confidence);
                let sum: u32 = recent.iter().sum();
                if sum >= *threshold {
                    ExitDecision::exit(ExitReason::DoneSignals)
                } else {
                    ExitDecision::CONTINUE
                }
            }
            Runtime::FixPlan(plan) => fix_plan_step(plan, analysis, now, events),
            Runtime::CircuitBreaker => {
                if circuit == State::Open {
                    ExitDecision::exit(ExitReason::CircuitOpen)
                } else {
                    ExitDecision::CONTINUE
                }
            }
            Runtime::Composite {
                mode,
                members,
                fired,
            } => {
                let decisions: Vec<ExitDecision> = members
                    .iter_mut()
                    .map(|m| m.should_exit(analysis, circuit, now, events))
                    .collect();
                match mode {
                    CompositeMode::Any => decisions
                        .into_iter()
                        .find(|d| d.exit)
                        .unwrap_or(ExitDecision::CONTINUE),
                    CompositeMode::All => {
                        for (slot, d) in fired.iter_mut().zip(&decisions) {
                            if slot.is_none() && d.exit {
                                *slot = d.reason;
                            }
                        }
                        if fired.iter().all(Option::is_some) {
                            ExitDecision {
                                exit: true,
                                reason: fired[0],
                            }
                        } else {
                            ExitDecision::CONTINUE
                        }
                    }
                }
            }
        }
    }

    fn plan(&self) -> Option<&FixPlan> {
        match self {
            Runtime::FixPlan(plan) => Some(plan),
            _ => None,
        }
    }
}

fn fix_plan_step(
    plan: &mut FixPlan,
    analysis: &Analysis,
    now: u64,
    events: &mut Vec<Event>,
) -> ExitDecision {
    if let Some(i) = plan.current_step() {
        let step = &mut plan.steps[i];
        if analysis.completion_signal.detected {
            step.completed = true;
        } else {
            step.attempts = step.attempts.saturating_add(1);
            if step.attempts >= step.max_attempts {
                step.skipped = true;
                events.push(Event::Warning {
                    message: format!(
                        "Step {} skipped after {} attempts: {}",
                        i + 1,
                        step.attempts,
                        step.description
                    ),
                    at_ms: now,
                });
            }
        }
    }
    if plan.steps.iter().all(|s| s.completed) {
        ExitDecision::exit(ExitReason::PlanComplete)
    } else if plan.steps.iter().all(|s| !s.open()) {
        ExitDecision::exit(ExitReason::PlanExhausted)
    } else {
        ExitDecision::CONTINUE
    }
}

/// A stateful exit strategy (contract §5). Every method takes `&self`.
pub struct ExitStrategy {
    config: StrategyConfig,
    clock: SharedClock,
    runtime: Mutex<Runtime>,
    pub(crate) listeners: Listeners,
}

impl fmt::Debug for ExitStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExitStrategy")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ExitStrategy {
    /// A strategy on the system clock (the clock only stamps warning events).
    pub fn new(config: StrategyConfig) -> Self {
        Self::with_clock(config, SystemClock::shared())
    }

    /// A strategy stamping its events with `clock`.
    pub fn with_clock(config: StrategyConfig, clock: SharedClock) -> Self {
        ExitStrategy {
            runtime: Mutex::new(Runtime::new(&config)),
            config,
            clock,
            listeners: Listeners::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &StrategyConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, Runtime> {
        self.runtime.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sees one iteration's analysis and the circuit state; says whether to exit.
    pub fn should_exit(&self, analysis: &Analysis, circuit_state: State) -> ExitDecision {
        let now = self.clock.now_ms();
        let mut events = Vec::new();
        let decision = {
            let mut runtime = self.lock();
            let d = runtime.should_exit(analysis, circuit_state, now, &mut events);
            self.listeners.enqueue(events);
            d
        };
        self.listeners.deliver();
        decision
    }

    /// For a Loop driving the strategy under the Loop's lock: events are handed back.
    pub(crate) fn should_exit_into(
        &self,
        analysis: &Analysis,
        circuit_state: State,
        events: &mut Vec<Event>,
    ) -> ExitDecision {
        let now = self.clock.now_ms();
        self.lock()
            .should_exit(analysis, circuit_state, now, events)
    }

    /// The fix plan's progress, for a `fix_plan` strategy.
    pub fn plan_status(&self) -> Option<PlanStatus> {
        let runtime = self.lock();
        runtime.plan().map(|plan| PlanStatus {
            steps: plan.steps.clone(),
            current_step: plan.current_step(),
        })
    }

    /// Forgets everything seen: back to the configured state.
    pub fn reset(&self) {
        *self.lock() = Runtime::new(&self.config);
    }

    crate::events::listener_methods!("`warning` (a fix plan skipping a step)");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyzer::CompletionSignal;
    use crate::clock::ManualClock;
    use serde_json::json;
    use std::sync::Arc;

    fn analysis(detected: bool, confidence: u32) -> Analysis {
        Analysis {
            completion_signal: CompletionSignal {
                detected,
                confidence,
                phrases: Vec::new(),
            },
            confidence,
            exit_signal: None,
            tests_passing: None,
            tests_failing: None,
        }
    }

    fn done(confidence: u32) -> Analysis {
        analysis(true, confidence)
    }

    fn nothing() -> Analysis {
        analysis(false, 0)
    }

    fn strategy(config: Value) -> ExitStrategy {
        ExitStrategy::with_clock(
            StrategyConfig::from_json(&config).unwrap(),
            ManualClock::shared(0),
        )
    }

    fn go(reason: ExitReason) -> ExitDecision {
        ExitDecision {
            exit: true,
            reason: Some(reason),
        }
    }

    const STAY: ExitDecision = ExitDecision {
        exit: false,
        reason: None,
    };

    fn collect(s: &ExitStrategy) -> Arc<Mutex<Vec<Event>>> {
        let seen: Arc<Mutex<Vec<Event>>> = Arc::default();
        let c = Arc::clone(&seen);
        s.add_listener(Arc::new(move |e| {
            c.lock().unwrap().push(e.clone());
            Ok(())
        }));
        seen
    }

    fn plan(markdown: &str) -> Vec<(String, bool)> {
        FixPlan::from_markdown(markdown, 3)
            .unwrap()
            .steps
            .into_iter()
            .map(|s| (s.description, s.completed))
            .collect()
    }

    #[test]
    fn exit_reasons_spelling_and_success() {
        let all = [
            (ExitReason::Completed, "completed", true),
            (ExitReason::DoneSignals, "done_signals", true),
            (ExitReason::PlanComplete, "plan_complete", true),
            (ExitReason::PlanExhausted, "plan_exhausted", false),
            (ExitReason::CircuitOpen, "circuit_open", false),
            (ExitReason::MaxIterations, "max_iterations", false),
            (ExitReason::BudgetExceeded, "budget_exceeded", false),
        ];
        for (reason, text, success) in all {
            assert_eq!(reason.as_str(), text);
            assert_eq!(reason.to_string(), text);
            assert_eq!(serde_json::to_value(reason).unwrap(), text);
            assert_eq!(reason.is_success(), success, "{text}");
        }
        assert_eq!(
            serde_json::to_value(go(ExitReason::Completed)).unwrap(),
            json!({"exit": true, "reason": "completed"})
        );
        assert_eq!(
            serde_json::to_value(STAY).unwrap(),
            json!({"exit": false, "reason": null})
        );
    }

    #[test]
    fn auto_needs_detection_and_threshold() {
        let s = strategy(json!({"type": "auto"}));
        assert_eq!(
            s.should_exit(&done(70), State::Closed),
            go(ExitReason::Completed)
        );
        assert_eq!(s.should_exit(&done(69), State::Closed), STAY);
        assert_eq!(s.should_exit(&analysis(false, 100), State::Closed), STAY);
        assert_eq!(
            s.should_exit(&done(100), State::Open),
            go(ExitReason::Completed)
        );
        let low = strategy(json!({"type": "auto", "threshold": 40}));
        assert_eq!(
            low.should_exit(&done(40), State::Closed),
            go(ExitReason::Completed)
        );
        assert_eq!(low.should_exit(&done(39), State::Closed), STAY);
        let zero = strategy(json!({"type": "auto", "threshold": 0}));
        assert_eq!(
            zero.should_exit(&done(0), State::Closed),
            go(ExitReason::Completed)
        );
        assert_eq!(zero.should_exit(&nothing(), State::Closed), STAY);
    }

    #[test]
    fn done_signals_sums_a_sliding_window() {
        let s = strategy(json!({"type": "done_signals"}));
        for _ in 0..3 {
            assert_eq!(s.should_exit(&analysis(false, 10), State::Closed), STAY);
        }
        assert_eq!(
            s.should_exit(&analysis(false, 10), State::Closed),
            go(ExitReason::DoneSignals)
        );
        // The window is the last 5: 39 then four zeros then 1 -> only 1 remains of the 39.
        let s = strategy(json!({"type": "done_signals"}));
        for c in [39, 0, 0, 0, 0, 1] {
            assert_eq!(
                s.should_exit(&analysis(false, c), State::Closed),
                STAY,
                "{c}"
            );
        }
        let w2 = strategy(json!({"type": "done_signals", "threshold": 100, "window": 2}));
        assert_eq!(w2.should_exit(&done(60), State::Closed), STAY);
        assert_eq!(
            w2.should_exit(&done(40), State::Closed),
            go(ExitReason::DoneSignals)
        );
        assert_eq!(w2.should_exit(&done(59), State::Closed), STAY);
    }

    #[test]
    fn circuit_breaker_exits_only_when_open() {
        let s = strategy(json!({"type": "circuit_breaker"}));
        assert_eq!(s.should_exit(&done(100), State::Closed), STAY);
        assert_eq!(s.should_exit(&done(100), State::HalfOpen), STAY);
        assert_eq!(
            s.should_exit(&nothing(), State::Open),
            go(ExitReason::CircuitOpen)
        );
    }

    #[test]
    fn composite_any_takes_the_first_member_in_list_order() {
        let s = strategy(json!({"type": "composite",
            "members": [{"type": "auto"}, {"type": "circuit_breaker"}]}));
        assert_eq!(
            s.should_exit(&done(80), State::Open),
            go(ExitReason::Completed)
        );
        assert_eq!(
            s.should_exit(&nothing(), State::Open),
            go(ExitReason::CircuitOpen)
        );
        assert_eq!(
            s.should_exit(&done(80), State::Closed),
            go(ExitReason::Completed)
        );
        assert_eq!(s.should_exit(&done(50), State::HalfOpen), STAY);
        let reversed = strategy(json!({"type": "composite", "mode": "any",
            "members": [{"type": "circuit_breaker"}, {"type": "auto"}]}));
        assert_eq!(
            reversed.should_exit(&done(80), State::Open),
            go(ExitReason::CircuitOpen)
        );
    }

    #[test]
    fn composite_members_all_see_every_iteration() {
        let s = strategy(json!({"type": "composite",
            "members": [{"type": "circuit_breaker"}, {"type": "done_signals"}]}));
        // The first member fires, but done_signals still counts this 20.
        assert_eq!(
            s.should_exit(&analysis(false, 20), State::Open),
            go(ExitReason::CircuitOpen)
        );
        assert_eq!(
            s.should_exit(&analysis(false, 20), State::Closed),
            go(ExitReason::DoneSignals)
        );
    }

    #[test]
    fn composite_all_remembers_who_fired_until_reset() {
        let s = strategy(json!({"type": "composite", "mode": "all",
            "members": [{"type": "auto"}, {"type": "circuit_breaker"}]}));
        assert_eq!(s.should_exit(&done(80), State::Closed), STAY);
        assert_eq!(s.should_exit(&nothing(), State::Closed), STAY);
        // Not in the same iteration: the reason is the first member's.
        assert_eq!(
            s.should_exit(&nothing(), State::Open),
            go(ExitReason::Completed)
        );
        s.reset();
        assert_eq!(s.should_exit(&nothing(), State::Open), STAY);
        assert_eq!(
            s.should_exit(&done(90), State::Closed),
            go(ExitReason::Completed)
        );

        let reversed = strategy(json!({"type": "composite", "mode": "all",
            "members": [{"type": "circuit_breaker"}, {"type": "auto"}]}));
        assert_eq!(reversed.should_exit(&done(80), State::Closed), STAY);
        assert_eq!(
            reversed.should_exit(&nothing(), State::Open),
            go(ExitReason::CircuitOpen)
        );
        // Both in one iteration.
        let once = strategy(json!({"type": "composite", "mode": "all",
            "members": [{"type": "auto"}, {"type": "circuit_breaker"}]}));
        assert_eq!(
            once.should_exit(&done(80), State::Open),
            go(ExitReason::Completed)
        );
    }

    #[test]
    fn markdown_checklists() {
        let md = "# Fix plan\n\
                  - [ ] first step\n\
                  * [x] second step\n\
                  + [X] third step\n\
                  \x20   - [ ]   indented step  \n\
                  \t* [ ] tab indented\n\
                  - plain bullet\n\
                  1. [ ] numbered\n\
                  some text - [ ] not at start\n\
                  - [y] odd mark\n\
                  \n\
                  -   [x] spaced bullet\n";
        assert_eq!(
            plan(md),
            vec![
                ("first step".to_string(), false),
                ("second step".to_string(), true),
                ("third step".to_string(), true),
                ("indented step".to_string(), false),
                ("tab indented".to_string(), false),
                ("spaced bullet".to_string(), true),
            ]
        );
        assert!(plan("no items here\n- item without box").is_empty());
        let p = FixPlan::from_markdown("- [ ] a\n- [x] b", 7).unwrap();
        assert!(
            p.steps
                .iter()
                .all(|s| s.max_attempts == 7 && s.attempts == 0)
        );
        assert!(p.steps.iter().all(|s| !s.skipped));
        assert_eq!(p.current_step(), Some(0));
        let p = FixPlan::from_markdown("- [x] a\n- [ ] b", 3).unwrap();
        assert_eq!(p.current_step(), Some(1));
    }

    #[test]
    fn markdown_plan_is_capped() {
        let md = "- [ ] s\n".repeat(MAX_PLAN_STEPS);
        assert_eq!(
            FixPlan::from_markdown(&md, 3).unwrap().steps.len(),
            MAX_PLAN_STEPS
        );
        let md = "- [ ] s\n".repeat(MAX_PLAN_STEPS + 1);
        assert_eq!(
            FixPlan::from_markdown(&md, 3).unwrap_err().code(),
            "INVALID_CONFIG"
        );
    }

    #[test]
    fn fix_plan_completes_steps_in_order() {
        let s = strategy(json!({"type": "fix_plan", "markdown": "- [ ] a\n- [x] b\n- [ ] c"}));
        assert_eq!(s.plan_status().unwrap().current_step, Some(0));
        assert_eq!(s.should_exit(&nothing(), State::Closed), STAY);
        assert_eq!(s.plan_status().unwrap().steps[0].attempts, 1);
        assert_eq!(s.should_exit(&done(10), State::Closed), STAY);
        let st = s.plan_status().unwrap();
        assert!(st.steps[0].completed);
        // The completing response is not an attempt.
        assert_eq!(st.steps[0].attempts, 1);
        // b was already done: c is next.
        assert_eq!(st.current_step, Some(2));
        assert_eq!(
            s.should_exit(&done(10), State::Closed),
            go(ExitReason::PlanComplete)
        );
        assert_eq!(s.plan_status().unwrap().current_step, None);
        // Only fix plans have a plan status.
        assert_eq!(strategy(json!({"type": "auto"})).plan_status(), None);
    }

    #[test]
    fn fix_plan_skips_with_a_warning_and_ends_exhausted() {
        let clock = ManualClock::shared(0);
        let s = ExitStrategy::with_clock(
            StrategyConfig::from_json(&json!({"type": "fix_plan", "steps": [
                {"description": "reproduce the bug"},
                {"description": "write tests", "maxAttempts": 2},
            ]}))
            .unwrap(),
            clock.clone(),
        );
        let seen = collect(&s);
        assert_eq!(s.should_exit(&done(50), State::Closed), STAY);
        assert_eq!(s.should_exit(&nothing(), State::Closed), STAY);
        clock.set(1234);
        assert_eq!(
            s.should_exit(&nothing(), State::Closed),
            go(ExitReason::PlanExhausted)
        );
        let st = s.plan_status().unwrap();
        assert!(st.steps[1].skipped && !st.steps[1].completed);
        assert_eq!(st.steps[1].attempts, 2);
        assert_eq!(
            *seen.lock().unwrap(),
            vec![Event::Warning {
                message: "Step 2 skipped after 2 attempts: write tests".into(),
                at_ms: 1234
            }]
        );
    }

    #[test]
    fn fix_plan_mixed_skipped_and_completed_is_exhausted() {
        let s = strategy(json!({"type": "fix_plan", "maxAttempts": 1,
            "markdown": "- [ ] a\n- [ ] b\n- [ ] c"}));
        let seen = collect(&s);
        assert_eq!(s.should_exit(&nothing(), State::Closed), STAY); // a skipped
        assert_eq!(s.should_exit(&done(40), State::Closed), STAY); // b completed
        assert_eq!(
            s.should_exit(&done(40), State::Closed),
            go(ExitReason::PlanExhausted)
        );
        assert_eq!(
            *seen.lock().unwrap(),
            vec![Event::Warning {
                message: "Step 1 skipped after 1 attempts: a".into(),
                at_ms: 0
            }]
        );
        // Once over, it keeps saying so.
        assert_eq!(
            s.should_exit(&nothing(), State::Closed),
            go(ExitReason::PlanExhausted)
        );
    }

    #[test]
    fn fix_plan_edge_plans() {
        let empty = strategy(json!({"type": "fix_plan", "steps": []}));
        assert_eq!(
            empty.should_exit(&nothing(), State::Closed),
            go(ExitReason::PlanComplete)
        );
        let checked = strategy(json!({"type": "fix_plan", "markdown": "- [x] a\n* [X] b"}));
        assert_eq!(
            checked.should_exit(&nothing(), State::Closed),
            go(ExitReason::PlanComplete)
        );
        // A step given with attempts >= maxAttempts starts skipped.
        let given = strategy(json!({"type": "fix_plan", "steps": [
            {"description": "old", "attempts": 3},
            {"description": "new", "completed": false}
        ]}));
        let st = given.plan_status().unwrap();
        assert!(st.steps[0].skipped);
        assert_eq!(st.current_step, Some(1));
        assert_eq!(
            given.should_exit(&done(40), State::Closed),
            go(ExitReason::PlanExhausted)
        );
    }

    #[test]
    fn reset_returns_to_the_configured_state() {
        let s = strategy(json!({"type": "fix_plan", "markdown": "- [x] a\n- [ ] b"}));
        let configured = s.plan_status().unwrap();
        s.should_exit(&nothing(), State::Closed);
        assert_ne!(s.plan_status().unwrap(), configured);
        s.reset();
        assert_eq!(s.plan_status().unwrap(), configured);

        let d = strategy(json!({"type": "done_signals"}));
        d.should_exit(&analysis(false, 30), State::Closed);
        d.reset();
        assert_eq!(d.should_exit(&analysis(false, 30), State::Closed), STAY);
        assert_eq!(
            d.should_exit(&analysis(false, 10), State::Closed),
            go(ExitReason::DoneSignals)
        );
    }

    #[test]
    fn from_json_builds_each_type() {
        assert_eq!(
            StrategyConfig::from_json(&Value::Null).unwrap(),
            StrategyConfig::Auto { threshold: 70 }
        );
        assert_eq!(
            StrategyConfig::default(),
            StrategyConfig::Auto { threshold: 70 }
        );
        assert_eq!(
            StrategyConfig::from_json(&json!({"type": "done_signals"})).unwrap(),
            StrategyConfig::DoneSignals {
                threshold: 40,
                window: 5
            }
        );
        assert_eq!(
            StrategyConfig::from_json(&json!({"type": "circuit_breaker"})).unwrap(),
            StrategyConfig::CircuitBreaker
        );
        let StrategyConfig::FixPlan(p) =
            StrategyConfig::from_json(&json!({"type": "fix_plan", "steps": [
                {"description": "x", "maxAttempts": 5, "attempts": 2, "completed": false}
            ]}))
            .unwrap()
        else {
            panic!("expected a fix plan");
        };
        assert_eq!(
            p.steps,
            vec![FixStep {
                description: "x".into(),
                completed: false,
                skipped: false,
                attempts: 2,
                max_attempts: 5
            }]
        );
        assert_eq!(
            StrategyConfig::from_json(
                &json!({"type": "composite", "members": [{"type": "auto", "threshold": 90}]})
            )
            .unwrap(),
            StrategyConfig::Composite {
                mode: CompositeMode::Any,
                members: vec![StrategyConfig::Auto { threshold: 90 }]
            }
        );
        assert_eq!(
            StrategyConfig::fix_plan_from_json(&json!({"markdown": "- [ ] a"})).unwrap(),
            StrategyConfig::FixPlan(FixPlan {
                steps: vec![FixStep::new("a", 3)]
            })
        );
    }

    #[test]
    fn from_json_errors() {
        for bad in [
            json!("auto"),
            json!({}),
            json!({"type": 1}),
            json!({"type": "magic"}),
            json!({"type": "auto", "threshold": 101}),
            json!({"type": "auto", "threshold": -1}),
            json!({"type": "auto", "threshold": 70.5}),
            json!({"type": "auto", "treshold": 70}),
            json!({"type": "done_signals", "window": 0}),
            json!({"type": "fix_plan"}),
            json!({"type": "fix_plan", "steps": [], "markdown": ""}),
            json!({"type": "fix_plan", "steps": "- [ ] a"}),
            json!({"type": "fix_plan", "steps": [{"completed": true}]}),
            json!({"type": "fix_plan", "steps": [{"description": "a", "maxAttempts": 0}]}),
            json!({"type": "fix_plan", "markdown": "- [ ] a", "maxAttempts": 0}),
            json!({"type": "circuit_breaker", "threshold": 1}),
            json!({"type": "composite"}),
            json!({"type": "composite", "members": []}),
            json!({"type": "composite", "members": {"type": "auto"}}),
            json!({"type": "composite", "mode": "some", "members": [{"type": "auto"}]}),
            json!({"type": "composite", "members": [{"type": "nope"}]}),
        ] {
            assert_eq!(
                StrategyConfig::from_json(&bad).unwrap_err().code(),
                "INVALID_CONFIG",
                "{bad}"
            );
        }
        assert_eq!(
            StrategyConfig::fix_plan_from_json(&json!({"type": "auto", "markdown": ""}))
                .unwrap_err()
                .code(),
            "INVALID_CONFIG"
        );
        let mut deep = json!({"type": "auto"});
        for _ in 0..40 {
            deep = json!({"type": "composite", "members": [deep]});
        }
        assert_eq!(
            StrategyConfig::from_json(&deep).unwrap_err().code(),
            "INVALID_CONFIG"
        );
    }
}
