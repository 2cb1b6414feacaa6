//! The classes and functions of the module: `ManualClock` and `SystemClock`; `CircuitBreaker`
//! (the FailureBreaker under seed 004's name, with its defaults and log lines; its readable
//! fields and `call` are the Lua side's), `StagnationBreaker`, `BudgetBreaker`, `ExitStrategy`,
//! `FixPlan`, `Loop` and `Monitor` (docs/monitor.md); `analyze`, `fingerprint`, `configFromEnv`,
//! `metricDefinitions` and `metricUpdates`. The hot methods of the three breakers are C
//! functions (`capi`) in front of the methods here.

use std::path::PathBuf;
use std::sync::Arc;

use agentbreaker::interop::{self, ArgKind};
use agentbreaker::metrics::{self, json_event_updates, vocabulary_json};
use agentbreaker::{AgentStep, Error, ExitStrategy, FailureBreaker, IterationMetrics, Loop};
use agentbreaker::{BudgetBreaker, ManualClock, Monitor, SharedClock, StagnationBreaker};
use agentbreaker::{SystemClock, analyze, fingerprint};
use agentbreaker::{config_from_env_json, config_from_process_env};
use mlua::{Lua, Table, Value};
use serde_json::{Value as Json, json};

use crate::convert::{string, to_json, wrong_argument};
use crate::{Handle, Methods, Options, Out, convert, none, ret, ret_json};

/// A clock as Lua holds it: a ManualClock, or the system clock (`None`).
#[derive(Debug)]
pub(crate) struct LuaClock(Option<Arc<ManualClock>>);

impl LuaClock {
    /// The clock as the core's objects take it.
    pub(crate) fn shared(&self) -> SharedClock {
        self.0
            .clone()
            .map_or_else(SystemClock::shared, |c| c as SharedClock)
    }

    /// A clock that code moves: `clock:set(ms)`, `clock:advance(ms)`.
    fn manual(&self, method: &str, ms: &Value) -> Result<(&ManualClock, u64), Error> {
        let clock = self.0.as_deref().ok_or_else(|| {
            let hint = "the system clock cannot be moved; use agentbreaker.ManualClock.new()";
            ArgKind::Argument.error(format_args!("clock:{method}: {hint}"))
        })?;
        Ok((clock, convert::whole(ms, &format!("clock:{method}: ms"))?))
    }
}

/// `{task = true}` of a metrics call (`what` names it in messages; `interop::metric_options`).
pub(crate) fn metric_options(
    lua: &Lua,
    options: &Value,
    what: &'static str,
) -> Result<metrics::Options, Error> {
    interop::metric_options(&to_json(lua, options, what, ArgKind::Argument)?, what)
}

/// A path argument, byte for byte (a Lua string need not be UTF-8).
fn path(value: &Value, what: &str) -> Result<PathBuf, Error> {
    let Value::String(s) = value else {
        return Err(wrong_argument(what, "a string", value));
    };
    #[cfg(unix)]
    let path = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&s.as_bytes()).into();
    #[cfg(not(unix))]
    let path = s.to_string_lossy().into();
    Ok(path)
}

/// Whether a value can be called: a function, or a table or userdata with `__call`.
fn callable(value: &Value) -> bool {
    let call = match value {
        Value::Function(_) => return true,
        Value::Table(t) => t.metatable().map(|mt| mt.raw_get::<Value>("__call")),
        Value::UserData(ud) => ud.metatable().ok().map(|mt| mt.get::<Value>("__call")),
        _ => None,
    };
    call.is_some_and(|call| call.is_ok_and(|f| !f.is_nil()))
}

/// `StagnationBreaker:recordError`'s options: `nil` or `{transient = boolean}`.
fn transient(lua: &Lua, options: &Value) -> Result<bool, Error> {
    let what = "StagnationBreaker.recordError: options";
    let options = to_json(lua, options, what, ArgKind::Argument)?;
    interop::option_flag(&options, what, "transient", true)
}

/// A FixPlan's options as its config, with the plan `text` (`fromMarkdown`).
fn from_markdown(text: String, opts: &mut Options) -> Result<Json, Error> {
    let mut config = match std::mem::take(&mut opts.json) {
        Json::Null => serde_json::Map::new(),
        Json::Object(map) if !map.contains_key("markdown") && !map.contains_key("steps") => map,
        Json::Object(_) => {
            let hint =
                "the plan is the text argument; options take maxAttempts, clock and listeners";
            return Err(ArgKind::Config.error(format_args!("FixPlan.fromMarkdown: {hint}")));
        }
        other => {
            let (what, got) = ("FixPlan.fromMarkdown: options", interop::type_name(&other));
            return Err(ArgKind::Config.wrong_type(what, "a table", got));
        }
    };
    config.insert("markdown".into(), Json::String(text));
    Ok(Json::Object(config))
}

/// A new FixPlan (an ExitStrategy) of `config`, `options` its Lua options.
fn fix_plan(
    lua: &Lua,
    options: &Value,
    config: impl FnOnce(&mut Options) -> Result<Json, Error>,
) -> Out {
    let mut opts = Options::read::<ExitStrategy>(lua, options)?;
    let core = interop::fix_plan(&config(&mut opts)?, opts.clock())?;
    opts.into_object(lua, core)?.into_lua(lua)
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    let new = |lua: &Lua, clock| Handle::new(LuaClock(clock)).into_lua(lua);
    Methods::<LuaClock>::new(lua, raw, "Clock")?
        .function("_manual", move |lua, (start,): (Value,)| {
            let start = match start {
                Value::Nil => 0,
                v => convert::whole(&v, "ManualClock.new: startMs")?,
            };
            new(lua, Some(ManualClock::shared(start)))
        })?
        .function("_system", move |lua, ()| new(lua, None))?
        .method("now", |lua, h, ()| ret(lua, h.core.shared().now_ms()))?
        .method("set", |_, h, (ms,): (Value,)| {
            let (clock, ms) = h.core.manual("set", &ms)?;
            clock.set(ms);
            none()
        })?
        .method("advance", |_, h, (ms,): (Value,)| {
            let (clock, ms) = h.core.manual("advance", &ms)?;
            clock.advance(ms);
            none()
        })?
        .method("__tostring", |lua, h, ()| {
            let name = if h.core.0.is_some() {
                "ManualClock"
            } else {
                "SystemClock"
            };
            ret(
                lua,
                format!("agentbreaker.{name}({} ms)", h.core.shared().now_ms()),
            )
        })?;

    Methods::<FailureBreaker>::new(lua, raw, "CircuitBreaker")?
        .constructor()?
        .action("recordSuccess", FailureBreaker::record_success)?
        .method("recordFailure", |_, h, (error,): (Value,)| {
            h.core
                .record_failure(&string(&error, "CircuitBreaker.recordFailure: error")?);
            none()
        })?
        .method("shouldAllowOperation", |lua, h, ()| {
            let permission = h.core.should_allow_operation();
            ret(lua, (permission.allowed, permission.message))
        })?
        // With the seed's `timestamp` (whole seconds of the clock) beside each entry's `atMs`.
        .method("getStatus", |lua, h, ()| {
            let mut status = convert::json(&h.core.status())?;
            for entry in status["failureHistory"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                entry["timestamp"] = json!(entry["atMs"].as_u64().map(|ms| ms / 1000));
            }
            ret_json(lua, &status)
        })?
        .getter("metrics", FailureBreaker::metrics)?
        .getter("storeStatus", FailureBreaker::store_status)?
        .action("reset", FailureBreaker::reset)?
        .getter("snapshot", FailureBreaker::snapshot)?
        .method("restore", |lua, h, (s,): (Value,)| {
            h.core.restore_json(&convert::snapshot(lua, &s)?)?;
            none()
        })?
        .method("save", |_, h, (p,): (Value,)| {
            h.core.save(path(&p, "CircuitBreaker.save: path")?)?;
            none()
        })?
        .method("load", |lua, h, (p,): (Value,)| {
            ret(lua, h.core.load(path(&p, "CircuitBreaker.load: path")?)?)
        })?
        .listeners()?
        // The permit of a guarded call (`call` and `pcall` are the Lua side's).
        .method("_acquire", |_, h, (f,): (Value,)| {
            if !callable(&f) {
                return Err(wrong_argument("CircuitBreaker.call: fn", "a function", &f));
            }
            h.core.try_acquire()?;
            none()
        })?;

    Methods::<StagnationBreaker>::new(lua, raw, "StagnationBreaker")?
        .constructor()?
        .method("recordProgress", |lua, h, (metrics,): (Value,)| {
            let metrics = to_json(lua, &metrics, "iteration metrics", ArgKind::Argument)?;
            h.core
                .record_progress(IterationMetrics::from_json(&metrics)?);
            none()
        })?
        .method("recordStep", |lua, h, (step,): (Value,)| {
            let step = to_json(lua, &step, "step", ArgKind::Argument)?;
            h.core.record_step(&AgentStep::from_json(&step)?);
            none()
        })?
        .method("recordError", |lua, h, (error, options): (Value, Value)| {
            let error = string(&error, "StagnationBreaker.recordError: error")?;
            h.core.record_error(&error, transient(lua, &options)?);
            none()
        })?
        .getter("check", StagnationBreaker::check)?
        .getter("getStatus", StagnationBreaker::status)?
        .action("reset", StagnationBreaker::reset)?
        .getter("snapshot", StagnationBreaker::snapshot)?
        .method("restore", |lua, h, (s,): (Value,)| {
            h.core.restore_json(&convert::snapshot(lua, &s)?)?;
            none()
        })?
        .listeners()?;

    Methods::<BudgetBreaker>::new(lua, raw, "BudgetBreaker")?
        .constructor()?
        // The halt, or nil.
        .method("ingest", |lua, h, (event,): (Value,)| {
            let event = to_json(lua, &event, "event", ArgKind::Event)?;
            ret_json(lua, &h.core.ingest(&event)?)
        })?
        .getter("tick", BudgetBreaker::tick)?
        .getter("snapshot", BudgetBreaker::snapshot)?
        .action("reset", BudgetBreaker::reset)?
        .listeners()?;

    Methods::<()>::new(lua, raw, "FixPlan")?
        .function("new", |lua, (config,): (Value,)| {
            fix_plan(lua, &config, |o| Ok(std::mem::take(&mut o.json)))
        })?
        .function("fromMarkdown", |lua, (text, options): (Value, Value)| {
            let text = string(&text, "FixPlan.fromMarkdown: text")?;
            fix_plan(lua, &options, |o| from_markdown(text, o))
        })?;
    Methods::<ExitStrategy>::new(lua, raw, "ExitStrategy")?
        .constructor()?
        // The response text (analyzed here) and the circuit state (`nil`: the core's default).
        .method("shouldExit", |lua, h, (response, state): (Value, Value)| {
            let what = "ExitStrategy.shouldExit: the response (its text: the strategy analyzes it)";
            let analysis = analyze(&string(&response, what)?);
            let state = convert::optional_string(&state, "ExitStrategy.shouldExit: circuitState")?;
            let state = interop::state(state.as_deref())?;
            ret_json(lua, &h.core.should_exit(&analysis, state))
        })?
        .getter("getStatus", ExitStrategy::plan_status)?
        .action("reset", ExitStrategy::reset)?
        .listeners()?
        .method("__tostring", |lua, h, ()| {
            let kind = h.core.config().type_name();
            ret(lua, format!("agentbreaker.ExitStrategy({kind})"))
        })?;

    Methods::<Loop>::new(lua, raw, "Loop")?
        .constructor()?
        .method("observe", |lua, h, (observation,): (Value,)| {
            let observation = to_json(lua, &observation, "observation", ArgKind::Argument)?;
            ret_json(lua, &h.core.observe_json(&observation)?)
        })?
        .getter("getStatus", Loop::status)?
        .action("reset", Loop::reset)?
        .listeners()?;

    // Every event answered with a verdict table `{action, reason, message, nudge, taskId, step,
    // detail}`.
    Methods::<Monitor>::new(lua, raw, "Monitor")?
        .constructor()?
        .method("observe", |lua, h, (event,): (Value,)| {
            let event = to_json(lua, &event, "event", ArgKind::Event)?;
            ret_json(lua, &h.core.observe(&event)?)
        })?
        .getter("tick", Monitor::tick)?
        .getter("status", Monitor::status)?
        .getter("snapshot", Monitor::snapshot)?
        .method("restore", |lua, h, (s,): (Value,)| {
            h.core.restore(&convert::snapshot(lua, &s)?)?;
            none()
        })?
        .action("reset", Monitor::reset)?
        .method("config", |lua, h, ()| ret_json(lua, h.core.config()))?
        .getter("storeStatus", Monitor::store_status)?
        .method("setMetricsRecorder", |lua, h, (f, o): (Value, Value)| {
            let options = metric_options(lua, &o, "Monitor.setMetricsRecorder: options")?;
            h.core
                .set_metrics_recorder(crate::recorder(lua, f)?, options);
            none()
        })?
        .listeners()?;

    Methods::<()>::new(lua, raw, "functions")?
        .function("analyze", |lua, (text,): (Value,)| {
            ret_json(lua, &analyze(&string(&text, "analyze: text")?))
        })?
        .function("fingerprint", |lua, (text, mode): (Value, Value)| {
            let text = string(&text, "fingerprint: text")?;
            let mode = convert::optional_string(&mode, "fingerprint: mode")?;
            ret(
                lua,
                fingerprint(&text, interop::error_match(mode.as_deref())?),
            )
        })?
        // No argument: the process environment; a table of strings: that map.
        .function("configFromEnv", |lua, (env,): (Value,)| match env {
            Value::Nil => ret_json(lua, &config_from_process_env()),
            env => {
                let env = to_json(lua, &env, "env", ArgKind::Argument)?;
                ret_json(lua, &config_from_env_json(&env)?)
            }
        })?
        .function("metricDefinitions", |lua, ()| {
            ret_json(lua, &vocabulary_json())
        })?
        .function("metricUpdates", |lua, (e, b, o): (Value, Value, Value)| {
            let event = to_json(lua, &e, "metricUpdates: event", ArgKind::Event)?;
            let breaker = string(&b, "metricUpdates: breaker")?;
            let options = metric_options(lua, &o, "metricUpdates: options")?;
            let updates = json_event_updates(&event, &breaker, options);
            ret_json(lua, &interop::updates_json(&updates))
        })?;
    Ok(())
}
