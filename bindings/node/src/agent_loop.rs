//! `Loop` (SPEC 5): the coordinator of the analyzer, an exit strategy, a StagnationBreaker and an
//! optional BudgetBreaker.

use napi::Env;
use napi::bindgen_prelude::Unknown;
use napi_derive::napi;

use crate::clock::{ClockArg, shared_clock};
use crate::convert::{from_js_opt, result};
use crate::error::{Code, Context, run};
use crate::listeners::{EventSource, EventTypes, JsListeners, ListenerArg};

const EVENTS: EventTypes = &["stateChange", "warning", "halt"];

/// One observation per iteration of an agent loop; says continue or exit, with a reason and an
/// outcome.
#[napi]
#[derive(Debug)]
pub struct Loop {
    inner: agentbreaker::Loop,
    listeners: JsListeners,
}

#[napi]
impl Loop {
    /// A loop from `{maxIterations, strategy, stagnation, budget}` (omitted keys take the
    /// defaults; without `budget` there are no budget checks) on the given clock.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "config?: LoopConfig | null, clock?: Clock | null"
    )]
    pub fn new(
        env: &Env,
        config: Option<Unknown<'_>>,
        clock: ClockArg<'_>,
    ) -> napi::Result<Self, Code> {
        run(env, || {
            let config = from_js_opt(config.as_ref(), Context::Config, "config")?;
            let config = agentbreaker::LoopConfig::from_json(&config)?;
            let inner = agentbreaker::Loop::with_clock(config, shared_clock(&clock)?)?;
            Ok(Loop {
                inner,
                listeners: JsListeners::default(),
            })
        })
    }

    /// Observes one iteration: `{output, filesChanged?, testsPassing?, error?, events?}`. After an
    /// exit every call is `INVALID_ARGUMENT` until `reset()`.
    #[napi(
        catch_unwind,
        ts_args_type = "observation: Observation",
        ts_return_type = "LoopDecision"
    )]
    pub fn observe<'e>(
        &self,
        env: &'e Env,
        observation: Option<Unknown<'_>>,
    ) -> napi::Result<Unknown<'e>, Code> {
        run(env, || {
            let observation = from_js_opt(observation.as_ref(), Context::Argument, "observation")?;
            result(env, &self.inner.observe_json(&observation)?)
        })
    }

    /// Where the loop stands.
    #[napi(catch_unwind, ts_return_type = "LoopStatus")]
    pub fn get_status<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || result(env, &self.inner.status()))
    }

    /// Starts over: iteration 0, the strategy and both breakers reset.
    #[napi(catch_unwind)]
    pub fn reset(&self, env: &Env) -> napi::Result<(), Code> {
        run(env, || {
            self.inner.reset();
            Ok(())
        })
    }

    /// Listener calls that threw.
    #[napi(getter, catch_unwind)]
    pub fn listener_errors(&self) -> f64 {
        self.inner.errors() as f64
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
            self.listeners.add(&self.inner, EVENTS, &kind, &listener)
        })
    }

    #[doc(hidden)]
    #[napi(js_name = "_removeListener", catch_unwind, skip_typescript)]
    pub fn remove_js_listener(
        &self,
        env: &Env,
        id: Option<Unknown<'_>>,
    ) -> napi::Result<bool, Code> {
        run(env, || self.listeners.remove(&self.inner, id.as_ref()))
    }
}
