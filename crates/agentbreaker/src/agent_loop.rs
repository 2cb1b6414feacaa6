//! The Loop coordinator (SPEC 5): one observation per iteration; decides continue or exit.

use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::Serialize;
use serde_json::Value;

use crate::analyzer::{Analysis, analyze};
use crate::budget::{AgentEvent, BudgetBreaker, BudgetConfig, BudgetSnapshot, Halt};
use crate::clock::{SharedClock, SystemClock};
use crate::error::{Error, Result};
use crate::events::{Event, Listener, ListenerId, Listeners};
use crate::json::{Fields, type_name};
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
                return Err(Error::argument(format!(
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
    clock: SharedClock,
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
            clock,
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

    /// Observes one iteration (SPEC 5). After an exit every call is `INVALID_ARGUMENT` until
    /// [`Loop::reset`]. Input is checked before anything is recorded.
    pub fn observe(&self, observation: &Observation) -> Result<LoopDecision> {
        let mut events = Vec::new();
        let decision = self.observe_into(observation, &mut events);
        self.listeners.emit(&events);
        decision
    }

    fn observe_into(&self, o: &Observation, events: &mut Vec<Event>) -> Result<LoopDecision> {
        let mut inner = self.lock();
        if let Some(reason) = inner.exit {
            return Err(Error::argument(format!(
                "the loop has exited ({reason}); call reset() to start again"
            )));
        }
        if !o.events.is_empty() && self.budget.is_none() {
            return Err(Error::argument(
                "events were given but the loop has no budget configured",
            ));
        }
        let mut halts = Vec::new();
        if let Some(budget) = &self.budget {
            budget.ingest_all(&o.events, &mut halts)?;
        }
        inner.iteration = inner.iteration.saturating_add(1);
        let analysis = analyze(&o.output);
        self.stagnation.record_progress_into(
            IterationMetrics {
                files_changed: o.files_changed,
                tests_passing: o.tests_passing,
                output_length: o.output.chars().count() as u64,
            },
            events,
        );
        if let Some(error) = &o.error {
            self.stagnation.record_error_into(error, false, events);
        }
        let now = self.clock.now_ms();
        events.extend(halts.iter().map(|h| Event::Halt {
            halt: h.clone(),
            at_ms: now,
        }));
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
        let mut events = Vec::new();
        {
            let mut inner = self.lock();
            *inner = Inner::default();
            self.strategy.reset();
            self.stagnation.reset_into(&mut events);
            if let Some(b) = &self.budget {
                b.reset();
            }
        }
        self.listeners.emit(&events);
    }

    /// The loop's stagnation breaker.
    pub fn stagnation(&self) -> &StagnationBreaker {
        &self.stagnation
    }

    /// The loop's budget breaker, if configured.
    pub fn budget(&self) -> Option<&BudgetBreaker> {
        self.budget.as_ref()
    }

    /// Adds a listener: it receives the stagnation breaker's state changes, the fix plan's
    /// warnings and the budget breaker's halts.
    pub fn add_listener(&self, listener: Listener) -> ListenerId {
        self.listeners.add(listener)
    }

    /// Removes a listener.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.listeners.remove(id)
    }

    /// How many listener calls failed.
    pub fn listener_errors(&self) -> u64 {
        self.listeners.error_count()
    }
}
