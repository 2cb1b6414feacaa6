//! `agentbreaker.analyze`, `agentbreaker.fingerprint`, `agentbreaker.ExitStrategy` and
//! `agentbreaker.FixPlan` (SPEC 5, 6).

use agentbreaker::{
    Error, ErrorMatch, ExitStrategy, State, StrategyConfig, SystemClock, analyze, fingerprint,
};
use mlua::{Lua, Table, Value};
use serde_json::Value as Json;

use crate::convert::{self, lua_type};
use crate::{
    Class, Handle, Options, add_listeners, core, event_source, export, export_listener_methods,
    none, object, options, ret, ret_json, this,
};

impl Class for ExitStrategy {
    const NAME: &'static str = "ExitStrategy";
}
event_source!(ExitStrategy);

fn build(lua: &Lua, opts: Options, config: StrategyConfig) -> crate::Out {
    let clock = opts.clock.unwrap_or_else(SystemClock::shared);
    let handle = Handle::new(ExitStrategy::with_clock(config, clock));
    add_listeners(lua, &handle, opts.listeners)?;
    let ud = object(lua, handle)?;
    ret(lua, ud)
}

/// `shouldExit`'s circuit state: `nil` is CLOSED, else one of the three state strings.
fn circuit_state(value: &Value) -> Result<State, Error> {
    match value {
        Value::Nil => Ok(State::Closed),
        Value::String(s) => s.to_string_lossy().parse::<State>(),
        other => Err(Error::InvalidArgument(format!(
            "ExitStrategy.shouldExit: circuitState must be \"CLOSED\", \"HALF_OPEN\" or \"OPEN\", \
             not {}",
            convert::describe(other)
        ))),
    }
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    export(lua, raw, "analyze", |lua, (text,): (Value,)| {
        let text = convert::to_string(&text, "analyze: text")?;
        ret_json(lua, &analyze(&text))
    })?;
    export(
        lua,
        raw,
        "fingerprint",
        |lua, (text, mode): (Value, Value)| {
            let text = convert::to_string(&text, "fingerprint: text")?;
            let mode = match convert::to_optional_string(&mode, "fingerprint: mode")? {
                None => ErrorMatch::Normalized,
                Some(m) => m
                    .parse::<ErrorMatch>()
                    .map_err(|e| Error::InvalidArgument(e.message().to_string()))?,
            };
            ret(lua, fingerprint(&text, mode))
        },
    )?;
    export(lua, raw, "strategy_new", |lua, (config,): (Value,)| {
        let opts = options(&config, "ExitStrategy", false)?;
        let parsed = StrategyConfig::from_json(&opts.json)?;
        build(lua, opts, parsed)
    })?;
    export(lua, raw, "fix_plan_new", |lua, (config,): (Value,)| {
        let opts = options(&config, "FixPlan", false)?;
        let parsed = StrategyConfig::fix_plan_from_json(&opts.json)?;
        build(lua, opts, parsed)
    })?;
    export(
        lua,
        raw,
        "fix_plan_from_markdown",
        |lua, (text, o): (Value, Value)| {
            let text = convert::to_string(&text, "FixPlan.fromMarkdown: text")?;
            let mut opts = options(&o, "FixPlan", false)?;
            let mut config = match std::mem::take(&mut opts.json) {
                Json::Null => serde_json::Map::new(),
                Json::Object(map) => map,
                _ => {
                    return Err(Error::InvalidConfig(format!(
                        "FixPlan.fromMarkdown: options must be a table, not a {}",
                        lua_type(&o)
                    )));
                }
            };
            if config.contains_key("markdown") || config.contains_key("steps") {
                return Err(Error::InvalidConfig(
                "FixPlan.fromMarkdown: the plan is the text argument; options take maxAttempts, \
                 clock and listeners"
                    .into(),
            ));
            }
            config.insert("markdown".into(), Json::String(text));
            let parsed = StrategyConfig::fix_plan_from_json(&Json::Object(config))?;
            build(lua, opts, parsed)
        },
    )?;
    export(
        lua,
        raw,
        "strategy_should_exit",
        |lua, (s, r, c): (Value, Value, Value)| {
            let strategy = core::<ExitStrategy>(&s, "shouldExit")?;
            let analysis = match &r {
                Value::String(text) => analyze(&text.to_string_lossy()),
                Value::Table(_) => {
                    return Err(Error::InvalidArgument(
                    "ExitStrategy.shouldExit: pass the response text (the strategy analyzes it); \
                     analysis tables are not accepted yet"
                        .into(),
                ));
                }
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "ExitStrategy.shouldExit: the response must be a string, not {}",
                        convert::describe(other)
                    )));
                }
            };
            let state = circuit_state(&c)?;
            ret_json(lua, &strategy.should_exit(&analysis, state))
        },
    )?;
    export(
        lua,
        raw,
        "strategy_get_status",
        |lua, (s,): (Value,)| match core::<ExitStrategy>(&s, "getStatus")?.plan_status() {
            Some(status) => ret_json(lua, &status),
            None => ret(lua, Value::Nil),
        },
    )?;
    export(lua, raw, "strategy_reset", |_, (s,): (Value,)| {
        core::<ExitStrategy>(&s, "reset")?.reset();
        none()
    })?;
    export(lua, raw, "strategy_tostring", |lua, (s,): (Value,)| {
        let handle = this::<ExitStrategy>(&s, "tostring")?;
        let kind = match handle.core.config() {
            StrategyConfig::Auto { .. } => "auto",
            StrategyConfig::DoneSignals { .. } => "done_signals",
            StrategyConfig::FixPlan(_) => "fix_plan",
            StrategyConfig::CircuitBreaker => "circuit_breaker",
            StrategyConfig::Composite { .. } => "composite",
        };
        crate::describe_object(lua, "ExitStrategy", kind)
    })?;
    export_listener_methods::<ExitStrategy>(
        lua,
        raw,
        [
            "strategy_add_listener",
            "strategy_remove_listener",
            "strategy_listener_errors",
        ],
    )
}
