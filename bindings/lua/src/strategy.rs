//! `agentbreaker.analyze`, `agentbreaker.fingerprint`, `agentbreaker.ExitStrategy` and
//! `agentbreaker.FixPlan` (docs/contract.md).

use agentbreaker::interop::{self, ArgKind};
use agentbreaker::{ExitStrategy, StrategyConfig, analyze, fingerprint};
use mlua::{Lua, Table, Value};
use serde_json::Value as Json;

use crate::errors::wrong_argument;
use crate::{Handle, Methods, Options, convert, describe_object, none, ret, ret_json};

/// A new ExitStrategy object.
fn build(lua: &Lua, mut opts: Options, config: StrategyConfig) -> crate::Out {
    let handle = Handle::new(ExitStrategy::with_clock(config, opts.clock()));
    opts.add_listeners(lua, &handle)?;
    ret(lua, handle.into_lua(lua)?)
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<()>::new(lua, raw, "analyzer")?
        .function("analyze", |lua, (text,): (Value,)| {
            ret_json(lua, &analyze(&convert::string(&text, "analyze: text")?))
        })?
        .function("fingerprint", |lua, (text, mode): (Value, Value)| {
            let text = convert::string(&text, "fingerprint: text")?;
            let mode = interop::error_match(
                convert::optional_string(&mode, "fingerprint: mode")?.as_deref(),
            )?;
            ret(lua, fingerprint(&text, mode))
        })?;
    Methods::<()>::new(lua, raw, "FixPlan")?
        .function("new", |lua, (config,): (Value,)| {
            let opts = Options::read::<ExitStrategy>(lua, &config, false)?;
            let config = StrategyConfig::fix_plan_from_json(&opts.json)?;
            build(lua, opts, config)
        })?
        .function("fromMarkdown", |lua, (text, options): (Value, Value)| {
            let text = convert::string(&text, "FixPlan.fromMarkdown: text")?;
            let mut opts = Options::read::<ExitStrategy>(lua, &options, false)?;
            let mut config = match std::mem::take(&mut opts.json) {
                Json::Null => serde_json::Map::new(),
                Json::Object(map)
                    if !map.contains_key("markdown") && !map.contains_key("steps") =>
                {
                    map
                }
                Json::Object(_) => {
                    return Err(ArgKind::Config.error(
                        "FixPlan.fromMarkdown: the plan is the text argument; options take \
                         maxAttempts, clock and listeners",
                    ));
                }
                other => {
                    let got = interop::type_name(&other);
                    return Err(ArgKind::Config.wrong_type(
                        "FixPlan.fromMarkdown: options",
                        "a table",
                        got,
                    ));
                }
            };
            config.insert("markdown".into(), Json::String(text));
            let config = StrategyConfig::fix_plan_from_json(&Json::Object(config))?;
            build(lua, opts, config)
        })?;
    Methods::<ExitStrategy>::new(lua, raw, "ExitStrategy")?
        .function("new", |lua, (config,): (Value,)| {
            let opts = Options::read::<ExitStrategy>(lua, &config, false)?;
            let config = StrategyConfig::from_json(&opts.json)?;
            build(lua, opts, config)
        })?
        .method("shouldExit", |lua, h, (response, state): (Value, Value)| {
            let Value::String(text) = &response else {
                let hint = if response.is_table() {
                    " (pass the response text: the strategy analyzes it)"
                } else {
                    ""
                };
                return Err(wrong_argument(
                    &format!("ExitStrategy.shouldExit: the response{hint}"),
                    "a string",
                    &response,
                ));
            };
            let state = convert::optional_string(&state, "ExitStrategy.shouldExit: circuitState")?;
            let decision = h.core.should_exit(
                &analyze(&text.to_string_lossy()),
                interop::state(state.as_deref())?,
            );
            ret_json(lua, &decision)
        })?
        .method("getStatus", |lua, h, ()| match h.core.plan_status() {
            Some(status) => ret_json(lua, &status),
            None => ret(lua, Value::Nil),
        })?
        .method("reset", |_, h, ()| {
            h.core.reset();
            none()
        })?
        .listeners()?
        .method("__tostring", |lua, h, ()| {
            let kind = match h.core.config() {
                StrategyConfig::Auto { .. } => "auto",
                StrategyConfig::DoneSignals { .. } => "done_signals",
                StrategyConfig::FixPlan(_) => "fix_plan",
                StrategyConfig::CircuitBreaker => "circuit_breaker",
                StrategyConfig::Composite { .. } => "composite",
            };
            describe_object::<ExitStrategy>(lua, kind)
        })?;
    Ok(())
}
