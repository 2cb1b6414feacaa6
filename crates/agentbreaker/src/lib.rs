//! agentbreaker: a deterministic circuit breaker for autonomous AI-agent loops.
//!
//! Three breakers watch a loop and stop it without asking an LLM:
//! [`FailureBreaker`] (consecutive failures, seed 004), [`StagnationBreaker`] (no progress,
//! repeated errors, declining output, seeds 000/001) and [`BudgetBreaker`] (per-task tool calls,
//! spend, duration, idle time and output loops over an event stream, seed 003). The response
//! [`analyze`]r and the exit strategies decide when a loop is done, and [`Loop`] coordinates them.
//!
//! ```
//! use std::sync::Arc;
//! use agentbreaker::{FailureBreaker, FailureConfig, ManualClock, State};
//!
//! let clock = ManualClock::shared(0);
//! let breaker = FailureBreaker::with_clock(FailureConfig::default(), clock.clone()).unwrap();
//! for _ in 0..5 {
//!     breaker.record_failure("Path not found: ServerScriptService.Main");
//! }
//! assert_eq!(breaker.state(), State::Open);
//! let p = breaker.should_allow_operation();
//! assert!(!p.allowed);
//! assert_eq!(p.message.unwrap(), "Circuit breaker OPEN. 30 seconds remaining in cooldown. \
//!     5 consecutive failures detected. Human intervention required.");
//! clock.advance(30_000);
//! assert!(breaker.should_allow_operation().allowed); // the half-open probe
//! breaker.record_success();
//! assert_eq!(breaker.state(), State::Closed);
//! ```

pub mod agent_loop;
pub mod analyzer;
pub mod budget;
pub mod clock;
pub mod env;
pub mod error;
pub mod events;
pub mod failure;
pub mod fingerprint;
pub mod interop;
pub mod metrics;
pub mod monitor;
pub mod persist;
pub mod profiles;
pub mod stagnation;
pub mod state;
pub mod steps;
pub mod store;
pub mod strategy;
pub mod text;

pub use agent_loop::{Action, Loop, LoopConfig, LoopDecision, LoopStatus, Observation, Outcome};
pub use analyzer::{Analysis, CompletionSignal, analyze};
pub use budget::{
    AgentEvent, BudgetBreaker, BudgetConfig, BudgetSnapshot, EventKind, Halt, HaltReason,
    MAX_PRICE, Phase, Price, TaskSnapshot, Usage,
};
pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use env::{
    EnvConfig, EnvWarning, apply_env, config_from_env, config_from_env_json,
    config_from_process_env,
};
pub use error::{CallError, ERROR_CODES, Error, Result};
pub use events::{Event, Listener, ListenerId, ListenerResult, Listeners};
pub use failure::{
    FailureBreaker, FailureConfig, FailureMetrics, FailureRecord, FailureSnapshot, FailureStatus,
    Permission, SeedLogLevel, seed_log_line,
};
pub use fingerprint::{ErrorMatch, fingerprint};
pub use monitor::{
    Monitor, MonitorConfig, MonitorEvent, MonitorEventKind, Rule, Verdict, VerdictAction,
};
pub use profiles::{PROFILE_NAMES, Profile, profile};
pub use stagnation::{
    IterationMetrics, StagnationBreaker, StagnationConfig, StagnationDecision, StagnationSnapshot,
    StagnationStatus,
};
pub use state::State;
pub use steps::AgentStep;
pub use store::{StoreFailure, StoreMode, StoreStatus, StoreUrl};
pub use strategy::{
    CompositeMode, ExitDecision, ExitReason, ExitStrategy, FixPlan, FixStep, PlanStatus,
    StrategyConfig,
};

/// With the `test-panic` feature, [`FailureBreaker::record_failure`] (while holding the breaker's
/// lock) and [`analyze`] panic when given exactly this text: bindings use it to prove their panic
/// boundaries. Without the feature it is an ordinary string.
pub const TEST_PANIC_TRIGGER: &str = "agentbreaker:test-panic";

/// The README's Rust examples, compiled and run as doc tests so the README stays true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
