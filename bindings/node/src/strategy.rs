//! The response analyzer, exit strategies and fix plans (SPEC 5), and error fingerprints
//! (SPEC 6).

use std::str::FromStr;

use agentbreaker::{Analysis, ErrorMatch, State, StrategyConfig};
use napi::Env;
use napi::bindgen_prelude::Unknown;
use napi_derive::napi;
use serde_json::{Map, Value};

use crate::clock::{ClockArg, shared_clock};
use crate::convert::{describe, from_js_named, from_js_opt, result, string_arg};
use crate::error::{Code, Context, Failure, run};
use crate::listeners::{EventSource, EventTypes, JsListeners, ListenerArg};

const EVENTS: EventTypes = &["warning"];

/// Analyzes an agent's response: completion signals, confidence (0..100), the `EXIT_SIGNAL`
/// line and test summaries.
#[napi(
    catch_unwind,
    ts_args_type = "text: string",
    ts_return_type = "Analysis"
)]
pub fn analyze<'e>(env: &'e Env, text: Option<Unknown<'_>>) -> napi::Result<Unknown<'e>, Code> {
    run(env, || {
        let text = string_arg(text.as_ref(), "text")?;
        result(env, &agentbreaker::analyze(&text))
    })
}

/// The fingerprint of an error text under `errorMatch` (`'exact'`, `'normalized'` (default) or
/// `'template'`): errors with the same fingerprint count as the same error.
#[napi(
    catch_unwind,
    ts_args_type = "error: string, mode?: ErrorMatch | null",
    ts_return_type = "string"
)]
pub fn fingerprint(
    env: &Env,
    error: Option<Unknown<'_>>,
    mode: Option<Unknown<'_>>,
) -> napi::Result<String, Code> {
    run(env, || {
        let error = string_arg(error.as_ref(), "error")?;
        let mode = match from_js_opt(mode.as_ref(), Context::Argument, "mode")? {
            Value::Null => ErrorMatch::Normalized,
            Value::String(m) => ErrorMatch::from_argument(&m)?,
            other => {
                return Err(Context::Argument
                    .type_error(format!("mode must be a string, not {}", describe(&other))));
            }
        };
        Ok(agentbreaker::fingerprint(&error, mode))
    })
}

/// The analysis argument of `shouldExit` (what `analyze()` returns).
fn analysis_arg(value: Option<&Unknown<'_>>) -> Result<Analysis, Failure> {
    let value = from_js_opt(value, Context::Argument, "analysis")?;
    Ok(Analysis::from_json(&value)?)
}

fn circuit_state_arg(value: Option<&Unknown<'_>>) -> Result<State, Failure> {
    match from_js_opt(value, Context::Argument, "circuitState")? {
        Value::Null => Ok(State::Closed),
        Value::String(s) => Ok(State::from_str(&s)?),
        other => Err(Context::Argument.type_error(format!(
            "circuitState must be a string, not {}",
            describe(&other)
        ))),
    }
}

fn strategy(config: StrategyConfig, clock: &ClockArg<'_>) -> Result<Strategy, Failure> {
    Ok(Strategy {
        inner: agentbreaker::ExitStrategy::with_clock(config, shared_clock(clock)?),
        listeners: JsListeners::default(),
    })
}

#[derive(Debug)]
struct Strategy {
    inner: agentbreaker::ExitStrategy,
    listeners: JsListeners,
}

/// A stateful exit strategy: `{type: 'auto'}` (default), `'done_signals'`, `'fix_plan'`,
/// `'circuit_breaker'` or `'composite'`.
#[napi]
#[derive(Debug)]
pub struct ExitStrategy {
    strategy: Strategy,
}

#[napi]
impl ExitStrategy {
    /// A strategy from its config (`null`/`undefined`: `{type: 'auto'}`); the clock stamps the
    /// warning events of a fix plan.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "config?: StrategyConfig | null, clock?: Clock | null"
    )]
    pub fn new(
        env: &Env,
        config: Option<Unknown<'_>>,
        clock: ClockArg<'_>,
    ) -> napi::Result<Self, Code> {
        run(env, || {
            let config = from_js_opt(config.as_ref(), Context::Config, "config")?;
            Ok(ExitStrategy {
                strategy: strategy(StrategyConfig::from_json(&config)?, &clock)?,
            })
        })
    }

    /// Sees one iteration's analysis (from `analyze()`) and the circuit state (default
    /// `'CLOSED'`); says whether to exit and why.
    #[napi(
        catch_unwind,
        ts_args_type = "analysis: Analysis, circuitState?: CircuitState | null",
        ts_return_type = "ExitDecision"
    )]
    pub fn should_exit<'e>(
        &self,
        env: &'e Env,
        analysis: Option<Unknown<'_>>,
        circuit_state: Option<Unknown<'_>>,
    ) -> napi::Result<Unknown<'e>, Code> {
        run(env, || {
            let analysis = analysis_arg(analysis.as_ref())?;
            let state = circuit_state_arg(circuit_state.as_ref())?;
            result(env, &self.strategy.inner.should_exit(&analysis, state))
        })
    }

    /// The fix plan's progress for a `fix_plan` strategy, `null` for any other.
    #[napi(catch_unwind, ts_return_type = "PlanStatus | null")]
    pub fn plan_status<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || result(env, &self.strategy.inner.plan_status()))
    }

    /// Forgets everything seen.
    #[napi(catch_unwind)]
    pub fn reset(&self, env: &Env) -> napi::Result<(), Code> {
        run(env, || {
            self.strategy.inner.reset();
            Ok(())
        })
    }

    /// Listener calls that threw.
    #[napi(getter, catch_unwind)]
    pub fn listener_errors(&self) -> f64 {
        self.strategy.inner.errors() as f64
    }

    #[doc(hidden)]
    #[napi(js_name = "_addListener", catch_unwind, skip_typescript)]
    pub fn add_js_listener(
        &self,
        env: &Env,
        kind: Unknown<'_>,
        listener: ListenerArg<'_>,
    ) -> napi::Result<u32, Code> {
        run(env, || {
            let s = &self.strategy;
            s.listeners.add(&s.inner, EVENTS, &kind, &listener)
        })
    }

    #[doc(hidden)]
    #[napi(js_name = "_removeListener", catch_unwind, skip_typescript)]
    pub fn remove_js_listener(
        &self,
        env: &Env,
        id: Option<Unknown<'_>>,
    ) -> napi::Result<bool, Code> {
        run(env, || {
            self.strategy
                .listeners
                .remove(&self.strategy.inner, id.as_ref())
        })
    }
}

/// A fix plan on its own: steps worked on in order, each completed by a response that signals
/// completion or skipped after `maxAttempts` responses that do not.
#[napi]
#[derive(Debug)]
pub struct FixPlan {
    strategy: Strategy,
}

#[napi]
impl FixPlan {
    /// A plan from `{steps: [{description, completed?, attempts?, maxAttempts?}]}` or
    /// `{markdown}` (a `- [ ]` / `- [x]` checklist), with an optional plan-wide `maxAttempts`
    /// (default 3).
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "config: FixPlanConfig, clock?: Clock | null"
    )]
    pub fn new(
        env: &Env,
        config: Option<Unknown<'_>>,
        clock: ClockArg<'_>,
    ) -> napi::Result<Self, Code> {
        run(env, || {
            let config = from_js_opt(config.as_ref(), Context::Config, "config")?;
            Ok(FixPlan {
                strategy: strategy(StrategyConfig::fix_plan_from_json(&config)?, &clock)?,
            })
        })
    }

    /// A plan read from a markdown checklist (`- [ ]` open, `- [x]` done; other lines ignored).
    #[napi(
        factory,
        catch_unwind,
        ts_args_type = "markdown: string, maxAttempts?: number | null, clock?: Clock | null"
    )]
    pub fn from_markdown(
        env: &Env,
        markdown: Option<Unknown<'_>>,
        max_attempts: Option<Unknown<'_>>,
        clock: ClockArg<'_>,
    ) -> napi::Result<Self, Code> {
        run(env, || {
            let mut config = Map::new();
            config.insert(
                "markdown".into(),
                Value::String(string_arg(markdown.as_ref(), "markdown")?),
            );
            if let Some(n) = max_attempts.as_ref() {
                let n = from_js_named(n, Context::Config, "maxAttempts")?;
                if !n.is_null() {
                    config.insert("maxAttempts".into(), n);
                }
            }
            let config = StrategyConfig::fix_plan_from_json(&Value::Object(config))?;
            Ok(FixPlan {
                strategy: strategy(config, &clock)?,
            })
        })
    }

    /// Sees one iteration's analysis (from `analyze()`): a detected completion completes the
    /// current step, anything else is an attempt.
    #[napi(
        catch_unwind,
        ts_args_type = "analysis: Analysis, circuitState?: CircuitState | null",
        ts_return_type = "ExitDecision"
    )]
    pub fn should_exit<'e>(
        &self,
        env: &'e Env,
        analysis: Option<Unknown<'_>>,
        circuit_state: Option<Unknown<'_>>,
    ) -> napi::Result<Unknown<'e>, Code> {
        run(env, || {
            let analysis = analysis_arg(analysis.as_ref())?;
            let state = circuit_state_arg(circuit_state.as_ref())?;
            result(env, &self.strategy.inner.should_exit(&analysis, state))
        })
    }

    /// The steps and the index of the step being worked on (`null` when none is left).
    #[napi(catch_unwind, ts_return_type = "PlanStatus")]
    pub fn get_status<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || {
            let status = self
                .strategy
                .inner
                .plan_status()
                .ok_or_else(|| crate::error::internal("a FixPlan without a plan"))?;
            result(env, &status)
        })
    }

    /// Back to the plan as configured.
    #[napi(catch_unwind)]
    pub fn reset(&self, env: &Env) -> napi::Result<(), Code> {
        run(env, || {
            self.strategy.inner.reset();
            Ok(())
        })
    }

    /// Listener calls that threw.
    #[napi(getter, catch_unwind)]
    pub fn listener_errors(&self) -> f64 {
        self.strategy.inner.errors() as f64
    }

    #[doc(hidden)]
    #[napi(js_name = "_addListener", catch_unwind, skip_typescript)]
    pub fn add_js_listener(
        &self,
        env: &Env,
        kind: Unknown<'_>,
        listener: ListenerArg<'_>,
    ) -> napi::Result<u32, Code> {
        run(env, || {
            let s = &self.strategy;
            s.listeners.add(&s.inner, EVENTS, &kind, &listener)
        })
    }

    #[doc(hidden)]
    #[napi(js_name = "_removeListener", catch_unwind, skip_typescript)]
    pub fn remove_js_listener(
        &self,
        env: &Env,
        id: Option<Unknown<'_>>,
    ) -> napi::Result<bool, Code> {
        run(env, || {
            self.strategy
                .listeners
                .remove(&self.strategy.inner, id.as_ref())
        })
    }
}
