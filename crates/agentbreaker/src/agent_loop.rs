//! The Loop coordinator (contract §5): one observation per iteration; decides continue or exit.

use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::Serialize;
use serde_json::Value;

use crate::analyzer::{Analysis, analyze};
use crate::budget::{AgentEvent, BudgetBreaker, BudgetConfig, BudgetSnapshot, Halt};
use crate::clock::{SharedClock, SystemClock};
use crate::error::{Error, Result};
use crate::events::{Event, Listeners, Sink};
use crate::interop::{Fields, type_name};
use crate::stagnation::{
    IterationMetrics, StagnationBreaker, StagnationConfig, StagnationDecision, StagnationStatus,
};
use crate::strategy::{ExitReason, ExitStrategy, StrategyConfig};

/// Configuration of a [`Loop`].
#[derive(Debug, Clone, PartialEq)]
pub struct LoopConfig {
    /// Iterations before the loop gives up (>= 1). Default 50.
    pub max_iterations: u32,
    /// The exit strategy. Default `auto`.
    pub strategy: StrategyConfig,
    /// The stagnation breaker.
    pub stagnation: StagnationConfig,
    /// The budget breaker; `None` = no budget checks.
    pub budget: Option<BudgetConfig>,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            max_iterations: 50,
            strategy: StrategyConfig::default(),
            stagnation: StagnationConfig::default(),
            budget: None,
        }
    }
}

impl LoopConfig {
    /// Reads `{maxIterations, strategy, stagnation, budget}` (`null` = defaults).
    pub fn from_json(value: &Value) -> Result<Self> {
        if value.is_null() {
            return Ok(LoopConfig::default());
        }
        let f = Fields::new(
            value,
            "Loop config",
            Error::InvalidConfig,
            &["maxIterations", "strategy", "stagnation", "budget"],
        )?;
        let max_iterations = f.u64_or("maxIterations", 50)?;
        if !(1..=u64::from(u32::MAX)).contains(&max_iterations) {
            return Err(Error::config("maxIterations must be >= 1"));
        }
        Ok(LoopConfig {
            max_iterations: max_iterations as u32,
            strategy: StrategyConfig::from_json(f.get("strategy").unwrap_or(&Value::Null))?,
            stagnation: StagnationConfig::from_json(f.get("stagnation").unwrap_or(&Value::Null))?,
            budget: f.get("budget").map(BudgetConfig::from_json).transpose()?,
        })
    }
}

/// One iteration as the loop sees it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observation {
    /// The agent's response text.
    pub output: String,
    /// Files changed in the iteration.
    pub files_changed: u64,
    /// Tests passing after the iteration.
    pub tests_passing: u64,
    /// An error of the iteration, if any.
    pub error: Option<String>,
    /// Budget events of the iteration.
    pub events: Vec<AgentEvent>,
}

impl Observation {
    /// An observation of `output` alone.
    pub fn output(output: impl Into<String>) -> Self {
        Observation {
            output: output.into(),
            ..Observation::default()
        }
    }

    /// Reads `{output, filesChanged?, testsPassing?, error?, events?}`. Wrong types are
    /// `INVALID_ARGUMENT`; a malformed event is `INVALID_EVENT`.
    pub fn from_json(value: &Value) -> Result<Self> {
        let f = Fields::new(
            value,
            "observation",
            Error::InvalidArgument,
            &["output", "filesChanged", "testsPassing", "error", "events"],
        )?;
        let events = match f.get("events") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(AgentEvent::from_json)
                .collect::<Result<Vec<_>>>()?,
            Some(v) => {
                return Err(Error::argument(format_args!(
                    "observation: events must be a list, not {}",
                    type_name(v)
                )));
            }
        };
        Ok(Observation {
            output: f.str_req("output")?.to_string(),
            files_changed: f.u64_or("filesChanged", 0)?,
            tests_passing: f.u64_or("testsPassing", 0)?,
            error: f.str_opt("error")?.map(str::to_string),
            events,
        })
    }
}

/// What to do after an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Run another iteration.
    Continue,
    /// Stop.
    Exit,
}

/// How a finished loop went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// `completed`, `done_signals`, `plan_complete`.
    Success,
    /// `circuit_open`, `max_iterations`, `plan_exhausted`, `budget_exceeded`.
    Failure,
}

impl From<ExitReason> for Outcome {
    fn from(r: ExitReason) -> Self {
        if r.is_success() {
            Outcome::Success
        } else {
            Outcome::Failure
        }
    }
}

/// The result of [`Loop::observe`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopDecision {
    /// Continue or exit.
    pub action: Action,
    /// Why, when exiting.
    pub reason: Option<ExitReason>,
    /// Success or failure, when exiting.
    pub outcome: Option<Outcome>,
    /// The iteration just observed (1-based).
    pub iteration: u32,
    /// The analysis of the output.
    pub analysis: Analysis,
    /// The stagnation breaker's `check()`.
    pub breaker: StagnationDecision,
    /// The budget halt of this observation, if any.
    pub halt: Option<Halt>,
}

/// [`Loop::status`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopStatus {
    /// Iterations observed.
    pub iteration: u32,
    /// Whether the loop has exited.
    pub exited: bool,
    /// Why it exited.
    pub reason: Option<ExitReason>,
    /// How it went.
    pub outcome: Option<Outcome>,
    /// The stagnation breaker's status.
    pub breaker: StagnationStatus,
    /// The budget breaker's live snapshot.
    pub budget: Option<BudgetSnapshot>,
}

#[derive(Debug, Default)]
struct Inner {
    iteration: u32,
    exit: Option<ExitReason>,
}

/// Coordinates the analyzer, an exit strategy, a StagnationBreaker and an optional BudgetBreaker
/// over the iterations of an agent loop.
pub struct Loop {
    config: LoopConfig,
    inner: Mutex<Inner>,
    strategy: ExitStrategy,
    stagnation: StagnationBreaker,
    budget: Option<BudgetBreaker>,
    listeners: Listeners,
}

impl fmt::Debug for Loop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loop")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Loop {
    /// A loop on the system clock.
    pub fn new(config: LoopConfig) -> Result<Self> {
        Self::with_clock(config, SystemClock::shared())
    }

    /// A loop whose breakers read `clock`.
    pub fn with_clock(config: LoopConfig, clock: SharedClock) -> Result<Self> {
        if config.max_iterations < 1 {
            return Err(Error::config("maxIterations must be >= 1"));
        }
        let stagnation = StagnationBreaker::with_clock(config.stagnation.clone(), clock.clone())?;
        let budget = config
            .budget
            .clone()
            .map(|b| BudgetBreaker::with_clock(b, clock.clone()))
            .transpose()?;
        Ok(Loop {
            strategy: ExitStrategy::with_clock(config.strategy.clone(), clock.clone()),
            stagnation,
            budget,
            config,
            inner: Mutex::new(Inner::default()),
            listeners: Listeners::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LoopConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Observes one iteration (contract §5). After an exit every call is `INVALID_ARGUMENT` until
    /// [`Loop::reset`]. Input is checked before anything is recorded.
    pub fn observe(&self, observation: &Observation) -> Result<LoopDecision> {
        let decision = {
            let mut inner = self.lock();
            let mut events = Vec::new();
            let decision = self.observe_locked(&mut inner, observation, &mut events);
            self.enqueue(events);
            decision
        };
        self.deliver();
        decision
    }

    /// Queues events while the loop's lock is held: each to the listeners of the component it
    /// came from (stagnation breaker: state changes; budget breaker: halts; strategy: warnings),
    /// and all of them to the loop's own listeners.
    fn enqueue(&self, events: Vec<Event>) {
        for e in &events {
            let component = match e {
                Event::StateChange { .. } => Some(&self.stagnation.listeners),
                Event::Halt { .. } => self.budget.as_ref().map(|b| &b.listeners),
                Event::Warning { .. } => Some(&self.strategy.listeners),
                Event::Verdict { .. } => None,
            };
            if let Some(listeners) = component {
                listeners.enqueue([e.clone()]);
            }
        }
        self.listeners.enqueue(events);
    }

    /// Delivers what [`Loop::enqueue`] queued, after the loop's lock is released.
    fn deliver(&self) {
        self.stagnation.listeners.deliver();
        if let Some(b) = &self.budget {
            b.listeners.deliver();
        }
        self.strategy.listeners.deliver();
        self.listeners.deliver();
    }

    fn observe_locked(
        &self,
        inner: &mut Inner,
        o: &Observation,
        events: &mut Vec<Event>,
    ) -> Result<LoopDecision> {
        if let Some(reason) = inner.exit {
            return Err(Error::argument(format_args!(
                "the loop has exited ({reason}); call reset() to start again"
            )));
        }
        if !o.events.is_empty() && self.budget.is_none() {
            return Err(Error::argument(
                "events were given but the loop has no budget configured",
            ));
        }
        // The analysis changes nothing, so it comes first: should it fail (a bug, a panic caught
        // at a binding's boundary), the observation has not been half applied.
        let analysis = analyze(&o.output);
        let mut halts = Vec::new();
        let mut halt_events = Vec::new();
        if let Some(budget) = &self.budget {
            budget.ingest_all(&o.events, &mut halts, &mut Sink::Collect(&mut halt_events))?;
        }
        inner.iteration = inner.iteration.saturating_add(1);
        self.stagnation.record_progress_into(
            IterationMetrics {
                files_changed: o.files_changed,
                tests_passing: o.tests_passing,
                output_length: o.output.chars().count() as u64,
            },
            &mut Sink::Collect(events),
        );
        if let Some(error) = &o.error {
            self.stagnation
                .record_error_into(error, false, &mut Sink::Collect(events));
        }
        // contract §5's order: progress, error, then the budget events.
        events.extend(halt_events);
        let breaker = self.stagnation.check();
        let strategy = self
            .strategy
            .should_exit_into(&analysis, breaker.state, events);
        let reason = if strategy.exit {
            strategy.reason
        } else if !breaker.allow_continue {
            Some(ExitReason::CircuitOpen)
        } else if !halts.is_empty() {
            Some(ExitReason::BudgetExceeded)
        } else if inner.iteration >= self.config.max_iterations {
            Some(ExitReason::MaxIterations)
        } else {
            None
        };
        inner.exit = reason;
        Ok(LoopDecision {
            action: if reason.is_some() {
                Action::Exit
            } else {
                Action::Continue
            },
            reason,
            outcome: reason.map(Outcome::from),
            iteration: inner.iteration,
            analysis,
            breaker,
            halt: halts.into_iter().next(),
        })
    }

    /// Observes the iteration given as JSON (see [`Observation::from_json`]).
    pub fn observe_json(&self, observation: &Value) -> Result<LoopDecision> {
        self.observe(&Observation::from_json(observation)?)
    }

    /// Where the loop stands.
    pub fn status(&self) -> LoopStatus {
        let inner = self.lock();
        LoopStatus {
            iteration: inner.iteration,
            exited: inner.exit.is_some(),
            reason: inner.exit,
            outcome: inner.exit.map(Outcome::from),
            breaker: self.stagnation.status(),
            budget: self.budget.as_ref().map(BudgetBreaker::snapshot),
        }
    }

    /// Starts over: iteration 0, the strategy and both breakers reset.
    pub fn reset(&self) {
        {
            let mut inner = self.lock();
            *inner = Inner::default();
            let mut events = Vec::new();
            self.strategy.reset();
            self.stagnation.reset_into(&mut Sink::Collect(&mut events));
            if let Some(b) = &self.budget {
                b.reset();
            }
            self.enqueue(events);
        }
        self.deliver();
    }

    /// The loop's stagnation breaker.
    pub fn stagnation(&self) -> &StagnationBreaker {
        &self.stagnation
    }

    /// The loop's budget breaker, if configured.
    pub fn budget(&self) -> Option<&BudgetBreaker> {
        self.budget.as_ref()
    }

    // The loop's listeners receive the stagnation breaker's state changes, the fix plan's
    // warnings and the budget breaker's halts; listeners added to `stagnation()` or `budget()`
    // directly hear their own component's events too.
    crate::events::listener_methods!("every component's (`stateChange`, `warning`, `halt`)");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::HaltReason;
    use crate::clock::ManualClock;
    use crate::state::State;
    use crate::strategy::FixPlan;
    use serde_json::json;
    use std::sync::Arc;

    type Seen = Arc<Mutex<Vec<Event>>>;

    fn make(config: LoopConfig) -> (Loop, Arc<ManualClock>) {
        let clock = ManualClock::shared(0);
        let l = Loop::with_clock(config, clock.clone()).unwrap();
        (l, clock)
    }

    fn from_json(config: Value) -> (Loop, Arc<ManualClock>) {
        make(LoopConfig::from_json(&config).unwrap())
    }

    fn collect(l: &Loop) -> Seen {
        let seen: Seen = Arc::default();
        let s = Arc::clone(&seen);
        l.add_listener(Arc::new(move |e| {
            s.lock().unwrap().push(e.clone());
            Ok(())
        }));
        seen
    }

    fn tool_use() -> AgentEvent {
        AgentEvent::from_json(&json!({"type": "tool_use", "name": "Bash", "input": {}})).unwrap()
    }

    fn working() -> Observation {
        Observation {
            output: "Working on it.".into(),
            files_changed: 1,
            ..Observation::default()
        }
    }

    fn exits(d: &LoopDecision, reason: ExitReason, outcome: Outcome) {
        assert_eq!(
            (d.action, d.reason, d.outcome),
            (Action::Exit, Some(reason), Some(outcome)),
            "{d:?}"
        );
    }

    fn continues(d: &LoopDecision) {
        assert_eq!(
            (d.action, d.reason, d.outcome),
            (Action::Continue, None, None),
            "{d:?}"
        );
    }

    #[test]
    fn outcome_mapping() {
        for (reason, outcome) in [
            (ExitReason::Completed, Outcome::Success),
            (ExitReason::DoneSignals, Outcome::Success),
            (ExitReason::PlanComplete, Outcome::Success),
            (ExitReason::PlanExhausted, Outcome::Failure),
            (ExitReason::CircuitOpen, Outcome::Failure),
            (ExitReason::MaxIterations, Outcome::Failure),
            (ExitReason::BudgetExceeded, Outcome::Failure),
        ] {
            assert_eq!(Outcome::from(reason), outcome, "{reason}");
        }
        assert_eq!(serde_json::to_value(Outcome::Success).unwrap(), "success");
        assert_eq!(serde_json::to_value(Outcome::Failure).unwrap(), "failure");
        assert_eq!(serde_json::to_value(Action::Continue).unwrap(), "continue");
        assert_eq!(serde_json::to_value(Action::Exit).unwrap(), "exit");
    }

    #[test]
    fn strategy_wins_over_circuit_open() {
        let (l, _) = from_json(json!({"stagnation": {"sameErrorThreshold": 1}}));
        let d = l
            .observe(&Observation {
                output: "EXIT_SIGNAL: true".into(),
                error: Some("boom".into()),
                ..Observation::default()
            })
            .unwrap();
        exits(&d, ExitReason::Completed, Outcome::Success);
        assert_eq!(d.breaker.state, State::Open);
        assert!(!d.breaker.allow_continue);
    }

    #[test]
    fn circuit_open_wins_over_budget_and_max_iterations() {
        let (l, _) = from_json(json!({
            "maxIterations": 1,
            "stagnation": {"sameErrorThreshold": 1},
            "budget": {"maxToolCallsPerTask": 1}
        }));
        let d = l
            .observe(&Observation {
                output: "Working on it.".into(),
                error: Some("boom".into()),
                events: vec![tool_use(), tool_use()],
                ..Observation::default()
            })
            .unwrap();
        exits(&d, ExitReason::CircuitOpen, Outcome::Failure);
        assert_eq!(
            d.breaker.reason.as_deref(),
            Some("Same error repeated 1 times: \"boom\"")
        );
        let halt = d.halt.unwrap();
        assert_eq!(halt.task_id, "session");
        assert_eq!(
            halt.reason,
            HaltReason::ToolCallLimit {
                actual: 2,
                limit: 1
            }
        );
    }

    #[test]
    fn budget_wins_over_max_iterations() {
        let (l, _) = from_json(json!({"maxIterations": 1, "budget": {"maxToolCallsPerTask": 1}}));
        let d = l
            .observe(&Observation {
                events: vec![tool_use(), tool_use()],
                ..working()
            })
            .unwrap();
        exits(&d, ExitReason::BudgetExceeded, Outcome::Failure);
        assert!(d.halt.is_some());
    }

    #[test]
    fn strategy_wins_over_budget_and_max_iterations() {
        let (l, _) = from_json(json!({"maxIterations": 1, "budget": {"maxToolCallsPerTask": 1}}));
        let d = l
            .observe(&Observation {
                output: "EXIT_SIGNAL: true".into(),
                events: vec![tool_use(), tool_use()],
                ..Observation::default()
            })
            .unwrap();
        exits(&d, ExitReason::Completed, Outcome::Success);
    }

    #[test]
    fn max_iterations_is_reached_exactly() {
        let (l, _) = make(LoopConfig {
            max_iterations: 3,
            ..LoopConfig::default()
        });
        let d = l.observe(&working()).unwrap();
        continues(&d);
        assert_eq!(d.iteration, 1);
        let d = l.observe(&working()).unwrap();
        continues(&d);
        assert_eq!(d.iteration, 2);
        let d = l.observe(&working()).unwrap();
        exits(&d, ExitReason::MaxIterations, Outcome::Failure);
        assert_eq!(d.iteration, 3);
        let s = l.status();
        assert_eq!(
            (s.iteration, s.exited, s.reason, s.outcome),
            (
                3,
                true,
                Some(ExitReason::MaxIterations),
                Some(Outcome::Failure)
            )
        );
    }

    #[test]
    fn stagnation_half_open_continues_and_open_exits() {
        let (l, _) = make(LoopConfig::default());
        let idle = Observation::output("Working on it.");
        continues(&l.observe(&idle).unwrap());
        continues(&l.observe(&idle).unwrap());
        let d = l.observe(&idle).unwrap();
        continues(&d);
        assert_eq!(d.breaker.state, State::HalfOpen);
        let d = l.observe(&idle).unwrap();
        exits(&d, ExitReason::CircuitOpen, Outcome::Failure);
        assert_eq!(
            d.breaker.reason.as_deref(),
            Some("No progress in 4 consecutive iterations")
        );
    }

    #[test]
    fn success_and_failure_endings_of_strategies() {
        let (l, _) = from_json(json!({"strategy": {"type": "done_signals", "threshold": 80}}));
        continues(
            &l.observe(&Observation {
                output: "Done.".into(),
                files_changed: 1,
                ..Observation::default()
            })
            .unwrap(),
        );
        let d = l
            .observe(&Observation {
                output: "Done.".into(),
                files_changed: 1,
                ..Observation::default()
            })
            .unwrap();
        exits(&d, ExitReason::DoneSignals, Outcome::Success);

        let (l, _) = from_json(json!({"strategy": {"type": "fix_plan", "markdown": "- [ ] a"}}));
        exits(
            &l.observe(&Observation::output("EXIT_SIGNAL: true"))
                .unwrap(),
            ExitReason::PlanComplete,
            Outcome::Success,
        );
        let (l, _) = from_json(
            json!({"strategy": {"type": "fix_plan", "maxAttempts": 1, "markdown": "- [ ] a"}}),
        );
        exits(
            &l.observe(&working()).unwrap(),
            ExitReason::PlanExhausted,
            Outcome::Failure,
        );
    }

    #[test]
    fn decision_carries_analysis_and_breaker() {
        let (l, _) = make(LoopConfig::default());
        let output = "Implemented the parser. 12 tests passed.";
        let d = l.observe(&Observation::output(output)).unwrap();
        assert_eq!(d.analysis, analyze(output));
        assert_eq!(d.breaker, l.stagnation().check());
        assert_eq!(d.iteration, 1);
        assert_eq!(d.halt, None);
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["action"], "continue");
        assert_eq!(v["reason"], Value::Null);
        assert_eq!(v["outcome"], Value::Null);
        assert_eq!(v["iteration"], 1);
        assert_eq!(
            v["breaker"],
            json!({"allowContinue": true, "state": "CLOSED", "reason": null, "slug": null})
        );
        assert!(v["analysis"]["completionSignal"].is_object());
    }

    #[test]
    fn observe_after_exit_is_invalid_until_reset() {
        let (l, _) = make(LoopConfig {
            max_iterations: 1,
            ..LoopConfig::default()
        });
        exits(
            &l.observe(&working()).unwrap(),
            ExitReason::MaxIterations,
            Outcome::Failure,
        );
        let e = l.observe(&working()).unwrap_err();
        assert_eq!(e.code(), "INVALID_ARGUMENT");
        assert_eq!(
            l.observe_json(&json!({"output": "x"})).unwrap_err().code(),
            "INVALID_ARGUMENT"
        );
        let s = l.status();
        assert_eq!(s.iteration, 1);
        assert_eq!(
            s.breaker.output_trend.len(),
            1,
            "the refused observation recorded nothing"
        );
        l.reset();
        let s = l.status();
        assert_eq!(
            (s.iteration, s.exited, s.reason, s.outcome),
            (0, false, None, None)
        );
        assert!(s.breaker.output_trend.is_empty());
        let d = l.observe(&working()).unwrap();
        assert_eq!(d.iteration, 1);
        exits(&d, ExitReason::MaxIterations, Outcome::Failure);
    }

    #[test]
    fn reset_resets_strategy_and_breakers() {
        let (l, clock) = from_json(json!({
            "strategy": {"type": "fix_plan", "markdown": "- [ ] a\n- [ ] b"},
            "stagnation": {"noProgressThreshold": 1},
            "budget": {}
        }));
        let seen = collect(&l);
        let d = l
            .observe(&Observation {
                output: "Done.".into(),
                events: vec![tool_use()],
                ..Observation::default()
            })
            .unwrap();
        continues(&d);
        assert_eq!(d.breaker.state, State::HalfOpen);
        l.observe(&Observation::output("no")).unwrap();
        assert_eq!(l.status().breaker.state, State::Open);
        clock.set(99);
        l.reset();
        let s = l.status();
        assert_eq!(s.breaker.state, State::Closed);
        assert!(s.budget.unwrap().tasks.is_empty());
        assert_eq!(
            seen.lock().unwrap().last().unwrap(),
            &Event::StateChange {
                from: State::Open,
                to: State::Closed,
                reason: "reset".into(),
                slug: None,
                at_ms: 99
            }
        );
        // The plan starts over: step a again.
        let d = l.observe(&Observation::output("Done.")).unwrap();
        continues(&d);
    }

    #[test]
    fn output_length_counts_characters_not_bytes() {
        let (l, _) = make(LoopConfig::default());
        let text = "héllo wörld 🙂";
        assert_eq!(text.len(), 18);
        l.observe(&Observation::output(text)).unwrap();
        l.observe(&Observation::output("")).unwrap();
        l.observe_json(&json!({"output": "日本語", "filesChanged": 1}))
            .unwrap();
        assert_eq!(l.status().breaker.output_trend, vec![13, 0, 3]);
    }

    #[test]
    fn files_changed_tests_passing_and_error_reach_the_breaker() {
        let (l, clock) = make(LoopConfig::default());
        clock.set(5);
        l.observe_json(&json!({"output": "a", "testsPassing": 3}))
            .unwrap();
        assert_eq!(l.status().breaker.last_progress, Some(5));
        l.observe_json(&json!({"output": "a", "testsPassing": 3, "error": "E 1"}))
            .unwrap();
        let s = l.status().breaker;
        assert_eq!(s.consecutive_no_progress, 1);
        assert_eq!(s.error_counts.get("E #"), Some(&1));
        clock.set(6);
        l.observe_json(&json!({"output": "a", "filesChanged": 2}))
            .unwrap();
        assert_eq!(l.status().breaker.last_progress, Some(6));
        assert!(l.status().breaker.error_counts.is_empty());
    }

    #[test]
    fn events_reach_loop_listeners_in_order() {
        let (l, clock) = from_json(json!({
            "strategy": {"type": "fix_plan", "steps": [{"description": "step one", "maxAttempts": 1}]},
            "stagnation": {"noProgressThreshold": 1, "sameErrorThreshold": 1},
            "budget": {"maxToolCallsPerTask": 1}
        }));
        let seen = collect(&l);
        clock.set(500);
        let d = l
            .observe(&Observation {
                output: "Working on it.".into(),
                error: Some("boom".into()),
                events: vec![tool_use(), tool_use()],
                ..Observation::default()
            })
            .unwrap();
        exits(&d, ExitReason::PlanExhausted, Outcome::Failure);
        let halt = d.halt.clone().unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                Event::StateChange {
                    from: State::Closed,
                    to: State::HalfOpen,
                    reason: "No progress in 1 consecutive iterations".into(),
                    slug: Some("no_progress"),
                    at_ms: 500
                },
                Event::StateChange {
                    from: State::HalfOpen,
                    to: State::Open,
                    reason: "Same error repeated 1 times: \"boom\"".into(),
                    slug: Some("same_error"),
                    at_ms: 500
                },
                Event::Halt { halt, at_ms: 500 },
                Event::Warning {
                    message: "Step 1 skipped after 1 attempts: step one".into(),
                    at_ms: 500
                },
            ]
        );
        // A failing listener is counted, not fatal.
        l.add_listener(Arc::new(|_| Err("no".into())));
        l.reset();
        assert_eq!(l.listener_errors(), 1);
    }

    #[test]
    fn events_need_a_budget_and_bad_events_change_nothing() {
        let (l, _) = make(LoopConfig::default());
        let e = l
            .observe(&Observation {
                events: vec![tool_use()],
                ..working()
            })
            .unwrap_err();
        assert_eq!(e.code(), "INVALID_ARGUMENT");
        assert_eq!(l.status().iteration, 0);
        // An empty event list is fine without a budget.
        assert_eq!(
            l.observe_json(&json!({"output": "x", "events": []}))
                .unwrap()
                .iteration,
            1
        );

        let (l, _) = from_json(json!({"budget": {}}));
        let e = l
            .observe_json(&json!({"output": "x", "filesChanged": 1, "events": [
                {"type": "tool_use", "name": "Bash"},
                {"type": "usage", "usage": {"input_tokens": -5}}
            ]}))
            .unwrap_err();
        assert_eq!(e.code(), "INVALID_EVENT");
        let s = l.status();
        assert_eq!(s.iteration, 0);
        assert!(s.breaker.output_trend.is_empty());
        assert!(s.budget.unwrap().tasks.is_empty());
        for bad in [
            json!({"filesChanged": 1}),
            json!({"output": 3}),
            json!({"output": "x", "filesChanged": 1.5}),
            json!({"output": "x", "testsPassing": -1}),
            json!({"output": "x", "error": 42}),
            json!({"output": "x", "events": {}}),
            json!({"output": "x", "extra": true}),
        ] {
            assert_eq!(
                l.observe_json(&bad).unwrap_err().code(),
                "INVALID_ARGUMENT",
                "{bad}"
            );
        }
        assert_eq!(l.status().iteration, 0);
    }

    #[test]
    fn config_from_json() {
        assert_eq!(
            LoopConfig::from_json(&Value::Null).unwrap(),
            LoopConfig::default()
        );
        let d = LoopConfig::default();
        assert_eq!(d.max_iterations, 50);
        assert_eq!(d.strategy, StrategyConfig::Auto { threshold: 70 });
        assert_eq!(d.budget, None);
        let c = LoopConfig::from_json(&json!({
            "maxIterations": 7,
            "strategy": {"type": "fix_plan", "markdown": "- [x] a"},
            "stagnation": {"noProgressThreshold": 2},
            "budget": {"maxIdleSecs": 9}
        }))
        .unwrap();
        assert_eq!(c.max_iterations, 7);
        assert_eq!(
            c.strategy,
            StrategyConfig::FixPlan(FixPlan::from_markdown("- [x] a", 3).unwrap())
        );
        assert_eq!(c.stagnation.no_progress_threshold, 2);
        assert_eq!(c.budget.unwrap().max_idle_secs, 9);
        assert_eq!(
            LoopConfig::from_json(&json!({"budget": null}))
                .unwrap()
                .budget,
            None
        );
        for bad in [
            json!({"maxIterations": 0}),
            json!({"maxIterations": 2.5}),
            json!({"maxIteration": 5}),
            json!({"strategy": {"type": "nope"}}),
            json!({"stagnation": {"noProgressThreshold": 0}}),
            json!({"budget": {"loopWindow": 1}}),
            json!([]),
        ] {
            assert_eq!(
                LoopConfig::from_json(&bad).unwrap_err().code(),
                "INVALID_CONFIG",
                "{bad}"
            );
        }
        let zero = LoopConfig {
            max_iterations: 0,
            ..LoopConfig::default()
        };
        assert_eq!(
            Loop::with_clock(zero, ManualClock::shared(0))
                .unwrap_err()
                .code(),
            "INVALID_CONFIG"
        );
    }

    #[test]
    fn component_listeners_hear_their_own_events_when_the_loop_drives() {
        let (l, clock) = from_json(json!({
            "stagnation": {"noProgressThreshold": 1},
            "budget": {"maxToolCallsPerTask": 1}
        }));
        let stagnation_seen = Arc::new(Mutex::new(Vec::new()));
        let budget_seen = Arc::new(Mutex::new(Vec::new()));
        for (target, seen) in [
            (&l.stagnation().listeners, &stagnation_seen),
            (&l.budget().unwrap().listeners, &budget_seen),
        ] {
            let seen = Arc::clone(seen);
            target.add(Arc::new(move |e: &Event| {
                seen.lock().unwrap().push(e.clone());
                Ok(())
            }));
        }
        clock.set(10);
        l.observe(&Observation {
            output: "Working.".into(),
            events: vec![tool_use(), tool_use()],
            ..Observation::default()
        })
        .unwrap();
        let stagnation_seen = stagnation_seen.lock().unwrap();
        assert_eq!(stagnation_seen.len(), 1);
        assert!(matches!(
            stagnation_seen[0],
            Event::StateChange {
                to: State::HalfOpen,
                at_ms: 10,
                ..
            }
        ));
        let budget_seen = budget_seen.lock().unwrap();
        assert_eq!(budget_seen.len(), 1);
        assert!(matches!(budget_seen[0], Event::Halt { at_ms: 10, .. }));
    }

    #[test]
    fn loop_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Loop>();
    }
}
