//! `agentbreaker.ExitStrategy` and `agentbreaker.FixPlan`.

use agentbreaker::interop::{self, ArgKind};
use agentbreaker::{ExitStrategy, StrategyConfig, analyze};
use mlua::{Lua, Table, Value};
use serde_json::Value as Json;

use crate::{Methods, Options, convert, ret, ret_json};

/// A new ExitStrategy object.
fn build(lua: &Lua, opts: Options, config: StrategyConfig) -> crate::Out {
    let core = ExitStrategy::with_clock(config, opts.clock());
    ret(lua, opts.into_object(lua, core, None)?.into_lua(lua)?)
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
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
                    let hint = "the plan is the text argument; options take maxAttempts, clock and \
                                listeners";
                    return Err(ArgKind::Config.error(format_args!("FixPlan.fromMarkdown: {hint}")));
                }
                other => {
                    let (what, got) = ("FixPlan.fromMarkdown: options", interop::type_name(&other));
                    return Err(ArgKind::Config.wrong_type(what, "a table", got));
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
        // The response text (analyzed here) and the circuit state (`nil`: the core's default).
        .method("shouldExit", |lua, h, (response, state): (Value, Value)| {
            let what = "ExitStrategy.shouldExit: the response (its text: the strategy analyzes it)";
            let analysis = analyze(&convert::string(&response, what)?);
            let state = convert::optional_string(&state, "ExitStrategy.shouldExit: circuitState")?;
            ret_json(
                lua,
                &h.core
                    .should_exit(&analysis, interop::state(state.as_deref())?),
            )
        })?
        .method("getStatus", |lua, h, ()| {
            ret_json(lua, &h.core.plan_status())
        })?
        .action("reset", ExitStrategy::reset)?
        .listeners()?
        .method("__tostring", |lua, h, ()| {
            let kind = match h.core.config() {
                StrategyConfig::Auto { .. } => "auto",
                StrategyConfig::DoneSignals { .. } => "done_signals",
                StrategyConfig::FixPlan(_) => "fix_plan",
                StrategyConfig::CircuitBreaker => "circuit_breaker",
                StrategyConfig::Composite { .. } => "composite",
            };
            ret(lua, format!("agentbreaker.ExitStrategy({kind})"))
        })?;
    Ok(())
}
