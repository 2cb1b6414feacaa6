//! `agentbreaker.StagnationBreaker` (SPEC 3).

use agentbreaker::{
    AgentStep, Error, IterationMetrics, StagnationBreaker, StagnationConfig, SystemClock,
};
use mlua::{Lua, Table, Value};

use crate::convert::{self, Ctx, lua_type};
use crate::{
    Class, FastSelf, Handle, add_listeners, core, event_source, export, export_fast,
    export_listener_methods, fast_self, hot_object, none, options, ret_json, this,
};

impl Class for StagnationBreaker {
    const NAME: &'static str = "StagnationBreaker";
}
event_source!(StagnationBreaker);

/// `recordError`'s options: `nil` or `{transient = boolean}`.
fn transient(options: &Value) -> Result<bool, Error> {
    let bad = |detail: String| {
        Error::InvalidArgument(format!(
            "StagnationBreaker.recordError: options must be nil or {{transient = boolean}}; {detail}"
        ))
    };
    match options {
        Value::Nil => Ok(false),
        Value::Table(t) => {
            for pair in t.pairs::<Value, Value>() {
                let (key, _) = pair.map_err(convert::lua_error)?;
                if !matches!(&key, Value::String(s) if s.as_bytes().as_ref() == b"transient") {
                    return Err(bad(format!("unknown option {}", convert::describe(&key))));
                }
            }
            match t
                .raw_get::<Value>("transient")
                .map_err(convert::lua_error)?
            {
                Value::Nil => Ok(false),
                Value::Boolean(b) => Ok(b),
                other => Err(bad(format!("transient is {}", convert::describe(&other)))),
            }
        }
        other => Err(bad(format!("got {}", lua_type(other)))),
    }
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    export(lua, raw, "stagnation_new", |lua, (config,): (Value,)| {
        let opts = options(&config, "StagnationBreaker", false)?;
        let clock = opts.clock.unwrap_or_else(SystemClock::shared);
        let core_config = StagnationConfig::from_json(&opts.json)?;
        let handle = Handle::new(StagnationBreaker::with_clock(core_config, clock)?);
        add_listeners(lua, &handle, opts.listeners)?;
        hot_object(lua, handle)
    })?;
    export(
        lua,
        raw,
        "stagnation_record_progress",
        |_, (s, m): (Value, Value)| {
            let breaker = core::<StagnationBreaker>(&s, "recordProgress")?;
            let metrics = convert::to_json(&m, Ctx::Argument, "iteration metrics")?;
            breaker.record_progress(IterationMetrics::from_json(&metrics)?);
            none()
        },
    )?;
    // The hot path. The Lua side passes the three counts of a plain metrics table (one with no
    // metatable and no other keys; `nil` for an absent count): `true` when recorded; `false` when
    // a count is not a whole number >= 0, and the Lua side then takes the ordinary path, which
    // reports it; `nil, error text` on an internal error or a `self` that is not a
    // StagnationBreaker.
    export_fast(
        lua,
        raw,
        "stagnation_record_progress_fast",
        |e| (None, Some(e)),
        |_, (s, files, tests, output): (FastSelf<StagnationBreaker>, Value, Value, Value)| {
            let s = fast_self(s, "recordProgress")?;
            let (Some(files_changed), Some(tests_passing), Some(output_length)) = (
                convert::count_or_zero(&files),
                convert::count_or_zero(&tests),
                convert::count_or_zero(&output),
            ) else {
                return Ok((Some(false), None));
            };
            s.core.record_progress(IterationMetrics {
                files_changed,
                tests_passing,
                output_length,
            });
            Ok((Some(true), None::<String>))
        },
    )?;
    // `allowContinue, state number, reason` (the Lua side makes the table and names the state:
    // a string made here would cost more than the rest of the call), or `nil, nil, error text`
    // (a `self` that is not a StagnationBreaker included).
    export_fast(
        lua,
        raw,
        "stagnation_check_fast",
        |e| (None, None, Some(e)),
        |_, s: FastSelf<StagnationBreaker>| {
            let decision = fast_self(s, "check")?.core.check();
            Ok((
                Some(decision.allow_continue),
                Some(convert::state_number(decision.state)),
                decision.reason,
            ))
        },
    )?;
    export(
        lua,
        raw,
        "stagnation_record_step",
        |_, (s, step): (Value, Value)| {
            let breaker = core::<StagnationBreaker>(&s, "recordStep")?;
            let step = convert::to_json(&step, Ctx::Argument, "step")?;
            breaker.record_step(&AgentStep::from_json(&step)?);
            none()
        },
    )?;
    export(
        lua,
        raw,
        "stagnation_record_error",
        |_, (s, e, o): (Value, Value, Value)| {
            let breaker = core::<StagnationBreaker>(&s, "recordError")?;
            let error = convert::to_string(&e, "StagnationBreaker.recordError: error")?;
            let transient = transient(&o)?;
            breaker.record_error(&error, transient);
            none()
        },
    )?;
    export(lua, raw, "stagnation_check", |lua, (s,): (Value,)| {
        ret_json(lua, &core::<StagnationBreaker>(&s, "check")?.check())
    })?;
    export(lua, raw, "stagnation_get_status", |lua, (s,): (Value,)| {
        ret_json(lua, &core::<StagnationBreaker>(&s, "getStatus")?.status())
    })?;
    export(lua, raw, "stagnation_reset", |_, (s,): (Value,)| {
        core::<StagnationBreaker>(&s, "reset")?.reset();
        none()
    })?;
    export(lua, raw, "stagnation_snapshot", |lua, (s,): (Value,)| {
        ret_json(lua, &core::<StagnationBreaker>(&s, "snapshot")?.snapshot())
    })?;
    export(
        lua,
        raw,
        "stagnation_restore",
        |_, (s, snap): (Value, Value)| {
            let breaker = core::<StagnationBreaker>(&s, "restore")?;
            let snapshot = convert::to_json(&snap, Ctx::Snapshot, "snapshot")?;
            breaker.restore_json(&snapshot)?;
            none()
        },
    )?;
    export(lua, raw, "stagnation_tostring", |lua, (s,): (Value,)| {
        let handle = this::<StagnationBreaker>(&s, "tostring")?;
        let status = handle.core.status();
        let detail = format!(
            "{}, {} iterations without progress",
            status.state, status.consecutive_no_progress
        );
        crate::describe_object(lua, "StagnationBreaker", &detail)
    })?;
    export_listener_methods::<StagnationBreaker>(
        lua,
        raw,
        [
            "stagnation_add_listener",
            "stagnation_remove_listener",
            "stagnation_listener_errors",
        ],
    )
}
