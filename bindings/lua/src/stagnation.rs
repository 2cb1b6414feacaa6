//! `agentbreaker.StagnationBreaker` (docs/contract.md). Its `recordProgress` and `check` are C
//! functions (`capi`) in front of the methods here.

use agentbreaker::interop::ArgKind;
use agentbreaker::{AgentStep, Error, IterationMetrics, StagnationBreaker, StagnationConfig};
use mlua::{Lua, Table, Value};

use crate::errors::{describe, lua_error};
use crate::{Handle, Methods, Options, convert, describe_object, none, ret_json};

/// `recordError`'s options: `nil` or `{transient = boolean}`.
fn transient(options: &Value) -> Result<bool, Error> {
    let bad = |detail: String| {
        ArgKind::Argument.error(format_args!(
            "StagnationBreaker.recordError: options must be nil or {{transient = boolean}}; {detail}"
        ))
    };
    let Value::Table(t) = options else {
        return match options {
            Value::Nil => Ok(false),
            other => Err(bad(format!("got {}", describe(other)))),
        };
    };
    for pair in t.pairs::<Value, Value>() {
        let (key, _) = pair.map_err(lua_error)?;
        if !matches!(&key, Value::String(s) if s.as_bytes().as_ref() == b"transient") {
            return Err(bad(format!("unknown option {}", describe(&key))));
        }
    }
    match t.raw_get::<Value>("transient").map_err(lua_error)? {
        Value::Nil => Ok(false),
        Value::Boolean(b) => Ok(b),
        other => Err(bad(format!("transient is {}", describe(&other)))),
    }
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<StagnationBreaker>::new(lua, raw, "StagnationBreaker")?
        .function("new", |lua, (config,): (Value,)| {
            let mut opts = Options::read::<StagnationBreaker>(lua, &config, false)?;
            let config = StagnationConfig::from_json(&opts.json)?;
            let handle = Handle::new(StagnationBreaker::with_clock(config, opts.clock())?);
            opts.add_listeners(lua, &handle)?;
            handle.into_hot(lua)
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
        .method("recordError", |_, h, (error, options): (Value, Value)| {
            let error = convert::string(&error, "StagnationBreaker.recordError: error")?;
            h.core.record_error(&error, transient(&options)?);
            none()
        })?
        .method("check", |lua, h, ()| ret_json(lua, &h.core.check()))?
        .method("getStatus", |lua, h, ()| ret_json(lua, &h.core.status()))?
        .method("reset", |_, h, ()| {
            h.core.reset();
            none()
        })?
        .method("snapshot", |lua, h, ()| ret_json(lua, &h.core.snapshot()))?
        .method("restore", |lua, h, (snapshot,): (Value,)| {
            h.core.restore_json(&convert::to_json(
                lua,
                &snapshot,
                "snapshot",
                ArgKind::Snapshot,
            )?)?;
            none()
        })?
        .listeners()?
        .method("__tostring", |lua, h, ()| {
            let s = h.core.status();
            describe_object::<StagnationBreaker>(
                lua,
                &format!(
                    "{}, {} iterations without progress",
                    s.state, s.consecutive_no_progress
                ),
            )
        })?;
    Ok(())
}
