//! `BudgetBreaker` (SPEC 4).

use napi::Env;
use napi::bindgen_prelude::Unknown;
use napi_derive::napi;

use crate::clock::{ClockArg, shared_clock};
use crate::convert::{from_js_opt, result};
use crate::error::{Code, Context, run};
use crate::listeners::{EventSource, EventTypes, JsListeners, ListenerArg};

const EVENTS: EventTypes = &["halt"];

/// Per-task halt conditions over an agent's event stream: tool calls, spend, duration, idle time
/// and near-identical outputs (seed 003).
#[napi]
#[derive(Debug)]
pub struct BudgetBreaker {
    inner: agentbreaker::BudgetBreaker,
    listeners: JsListeners,
}

#[napi]
impl BudgetBreaker {
    /// A breaker with the given config (omitted keys take the defaults) on the given clock.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "config?: BudgetConfig | null, clock?: Clock | null"
    )]
    pub fn new(
        env: &Env,
        config: Option<Unknown<'_>>,
        clock: ClockArg<'_>,
    ) -> napi::Result<Self, Code> {
        run(env, || {
            let config = from_js_opt(config.as_ref(), Context::Config, "config")?;
            let config = agentbreaker::BudgetConfig::from_json(&config)?;
            let inner = agentbreaker::BudgetBreaker::with_clock(config, shared_clock(&clock)?)?;
            Ok(BudgetBreaker {
                inner,
                listeners: JsListeners::default(),
            })
        })
    }

    /// Ingests one event; returns the halt it caused, or `null`. A malformed event is
    /// `INVALID_EVENT` and changes nothing.
    #[napi(
        catch_unwind,
        ts_args_type = "event: AgentEvent",
        ts_return_type = "Halt | null"
    )]
    pub fn ingest<'e>(
        &self,
        env: &'e Env,
        event: Option<Unknown<'_>>,
    ) -> napi::Result<Unknown<'e>, Code> {
        run(env, || {
            let event = from_js_opt(event.as_ref(), Context::Event, "event")?;
            result(env, &self.inner.ingest(&event)?)
        })
    }

    /// Checks duration and idle time of every open task (call it about once a second).
    #[napi(catch_unwind, ts_return_type = "Halt[]")]
    pub fn tick<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || result(env, &self.inner.tick()))
    }

    /// The live snapshot: open tasks, the active-task stack, ignored events.
    #[napi(catch_unwind, ts_return_type = "BudgetSnapshot")]
    pub fn snapshot<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || result(env, &self.inner.snapshot()))
    }

    /// Forgets every task, the stack and the counters.
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
