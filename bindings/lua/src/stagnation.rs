//! `agentbreaker.StagnationBreaker`. `recordProgress` and `check` are C functions (`capi`) in
//! front of the methods here.

use agentbreaker::interop::{self, ArgKind};
use agentbreaker::{AgentStep, Error, IterationMetrics, StagnationBreaker, StagnationConfig};
use mlua::{Lua, Table, Value};
use serde_json::Value as Json;

use crate::{Methods, Options, convert, none, ret_json};

/// `recordError`'s options: `nil` or `{transient = boolean}`.
fn transient(lua: &Lua, options: &Value) -> Result<bool, Error> {
    let what = "StagnationBreaker.recordError: options";
    let options = convert::to_json(lua, options, what, ArgKind::Argument)?;
    let transient = match &options {
        Json::Null => Some(&Json::Bool(false)),
        Json::Object(map) if map.keys().all(|key| key == "transient") => {
            map.get("transient").or(Some(&Json::Bool(false)))
        }
        _ => None,
    };
    let expected = "nil or {transient = boolean}";
    transient
        .and_then(Json::as_bool)
        .ok_or_else(|| ArgKind::Argument.wrong_type(what, expected, interop::type_name(&options)))
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<StagnationBreaker>::new(lua, raw, "StagnationBreaker")?
        .function("new", |lua, (config, metatable): (Value, Table)| {
            let opts = Options::read::<StagnationBreaker>(lua, &config, false)?;
            let core = StagnationBreaker::with_clock(
                StagnationConfig::from_json(&opts.json)?,
                opts.clock(),
            )?;
            opts.into_object(lua, core, None)?.into_hot(lua, &metatable)
        })?
        .method("recordProgress", |lua, h, (metrics,): (Value,)| {
            let metrics = convert::to_json(lua, &metrics, "iteration metrics", ArgKind::Argument)?;
            h.core
                .record_progress(IterationMetrics::from_json(&metrics)?);
            none()
        })?
        .method("recordStep", |lua, h, (step,): (Value,)| {
            let step = convert::to_json(lua, &step, "step", ArgKind::Argument)?;
            h.core.record_step(&AgentStep::from_json(&step)?);
            none()
        })?
        .method("recordError", |lua, h, (error, options): (Value, Value)| {
            let error = convert::string(&error, "StagnationBreaker.recordError: error")?;
            h.core.record_error(&error, transient(lua, &options)?);
            none()
        })?
        .method("check", |lua, h, ()| ret_json(lua, &h.core.check()))?
        .method("getStatus", |lua, h, ()| ret_json(lua, &h.core.status()))?
        .action("reset", StagnationBreaker::reset)?
        .method("snapshot", |lua, h, ()| ret_json(lua, &h.core.snapshot()))?
        .method("restore", |lua, h, (snapshot,): (Value,)| {
            h.core.restore_json(&convert::snapshot(lua, &snapshot)?)?;
            none()
        })?
        .listeners()?;
    Ok(())
}
