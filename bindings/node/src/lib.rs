//! The Node.js binding of agentbreaker (napi-rs). It converts types and errors and nothing else:
//! every rule lives in the `agentbreaker` crate.
//!
//! Every export runs inside [`error::run`]: panics are caught (`INTERNAL`), core errors are thrown
//! with their stable `code`, and listeners are called synchronously on the JavaScript thread.
//! `agentbreaker.js` (the package entry) adds `call(fn, ...args)`, `on()` and `off()`.

mod agent_loop;
mod budget;
mod clock;
mod convert;
mod env;
mod error;
mod failure;
mod listeners;
mod stagnation;
mod strategy;

pub use agent_loop::Loop;
pub use budget::BudgetBreaker;
pub use clock::{ManualClock, SystemClock};
pub use env::{config_from_env, profile, profile_names};
pub use failure::FailureBreaker;
pub use stagnation::StagnationBreaker;
pub use strategy::{ExitStrategy, FixPlan, analyze, fingerprint};
