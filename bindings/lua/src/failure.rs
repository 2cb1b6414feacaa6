//! `agentbreaker.CircuitBreaker`: the FailureBreaker (SPEC 2) with seed 004's name, defaults,
//! log lines and readable fields (SPEC 9).

use std::path::PathBuf;

use agentbreaker::{Error, FailureBreaker, FailureConfig, SystemClock};
use mlua::{Function, Lua, Table, Value};
use serde_json::{Value as Json, json};

use crate::convert::{self, Ctx, lua_error};
use crate::{
    Class, FastSelf, Handle, add_listeners, core, event_source, export, export_fast,
    export_listener_methods, fast_self, hot_object, none, options, ret, ret_json, this,
};

/// Registry name of the Lua side's default seed logger (print / warn).
pub(crate) const SEED_LOG_KEY: &str = "agentbreaker.seed_log";

impl Class for FailureBreaker {
    const NAME: &'static str = "CircuitBreaker";
}
event_source!(FailureBreaker);

/// The seed's `timestamp`: whole seconds of a clock time in ms (the seed used `os.time()`).
fn seconds(ms: u64) -> u64 {
    ms / 1000
}

/// Seconds as a Lua number: an integer when whole (`30`), else a float (`2.5`).
fn seconds_value(ms: u64) -> Json {
    if ms.is_multiple_of(1000) {
        json!(ms / 1000)
    } else {
        json!(ms as f64 / 1000.0)
    }
}

/// The failure history with the seed's `timestamp` (seconds) beside the SPEC's `atMs`.
fn history_with_timestamps(history: &mut Json) {
    if let Json::Array(entries) = history {
        for entry in entries {
            if let Some(at) = entry.get("atMs").and_then(Json::as_u64)
                && let Json::Object(map) = entry
            {
                map.insert("timestamp".into(), json!(seconds(at)));
            }
        }
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<Json, Error> {
    serde_json::to_value(value).map_err(|e| Error::Internal(format!("cannot serialize: {e}")))
}

/// A path argument, byte for byte (a Lua string need not be UTF-8).
fn path(value: &Value, what: &str) -> Result<PathBuf, Error> {
    match value {
        Value::String(s) => {
            #[cfg(unix)]
            {
                use std::os::unix::ffi::OsStrExt;
                Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&s.as_bytes())))
            }
            #[cfg(not(unix))]
            {
                Ok(PathBuf::from(s.to_string_lossy()))
            }
        }
        other => Err(Error::InvalidArgument(format!(
            "{what} must be a string, not {}",
            convert::describe(other)
        ))),
    }
}

/// Whether a value can be called (a function, or a table with `__call`).
fn callable(value: &Value) -> bool {
    match value {
        Value::Function(_) => true,
        Value::Table(t) => t
            .metatable()
            .is_some_and(|mt| !matches!(mt.raw_get::<Value>("__call"), Ok(Value::Nil) | Err(_))),
        Value::UserData(ud) => ud
            .metatable()
            .is_ok_and(|mt| !matches!(mt.get::<Value>("__call"), Ok(Value::Nil) | Err(_))),
        _ => false,
    }
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    export(lua, raw, "failure_new", |lua, (config,): (Value,)| {
        let opts = options(&config, "CircuitBreaker", true)?;
        let core_config = FailureConfig::from_json(&opts.json)?;
        let threshold = core_config.failure_threshold;
        let clock = opts.clock.unwrap_or_else(SystemClock::shared);
        let handle = Handle::new(FailureBreaker::with_clock(core_config, clock)?);
        if !opts.quiet {
            let log = match opts.log {
                Some(f) => f,
                None => lua
                    .named_registry_value::<Function>(SEED_LOG_KEY)
                    .map_err(lua_error)?,
            };
            handle
                .listeners
                .add_seed_log(lua, log, threshold, |l| handle.core.add_listener(l))?;
        }
        add_listeners(lua, &handle, opts.listeners)?;
        // (Its Lua listeners include the seed's log line.)
        hot_object(lua, handle)
    })?;
    export(lua, raw, "failure_record_success", |_, (s,): (Value,)| {
        core::<FailureBreaker>(&s, "recordSuccess")?.record_success();
        none()
    })?;
    export(
        lua,
        raw,
        "failure_record_failure",
        |_, (s, e): (Value, Value)| {
            let breaker = core::<FailureBreaker>(&s, "recordFailure")?;
            let error = convert::to_string(&e, "CircuitBreaker.recordFailure: error")?;
            breaker.record_failure(&error);
            none()
        },
    )?;
    export(
        lua,
        raw,
        "failure_should_allow_operation",
        |lua, (s,): (Value,)| {
            let p = core::<FailureBreaker>(&s, "shouldAllowOperation")?.should_allow_operation();
            ret(lua, (p.allowed, p.message))
        },
    )?;
    // The hot path where the breaker's own methods in C do not go into the core themselves (a
    // breaker with Lua listeners, a `self` that is not the breaker, ...): nothing, or the error
    // text (a `self` that is not a CircuitBreaker included).
    export_fast(
        lua,
        raw,
        "failure_record_success_fast",
        Some,
        |_, s: FastSelf<FailureBreaker>| {
            fast_self(s, "recordSuccess")?.core.record_success();
            Ok(None::<String>)
        },
    )?;
    // `allowed, message`, or `nil, error text`. A refusal is data, not an error: its message is
    // the one string made.
    export_fast(
        lua,
        raw,
        "failure_should_allow_operation_fast",
        |e| (None, Some(e)),
        |_, s: FastSelf<FailureBreaker>| {
            let p = fast_self(s, "shouldAllowOperation")?
                .core
                .should_allow_operation();
            Ok((Some(p.allowed), p.message))
        },
    )?;
    export(lua, raw, "failure_acquire", |_, (s, f): (Value, Value)| {
        let breaker = core::<FailureBreaker>(&s, "call")?;
        if !callable(&f) {
            return Err(Error::InvalidArgument(format!(
                "CircuitBreaker.call: fn must be a function, not {}",
                convert::describe(&f)
            )));
        }
        breaker.try_acquire()?;
        none()
    })?;
    export(lua, raw, "failure_get_status", |lua, (s,): (Value,)| {
        let mut status = to_json(&core::<FailureBreaker>(&s, "getStatus")?.status())?;
        if let Some(history) = status.get_mut("failureHistory") {
            history_with_timestamps(history);
        }
        ret_json(lua, &status)
    })?;
    export(
        lua,
        raw,
        "failure_field",
        |lua, (s, key): (Value, Value)| {
            let status = core::<FailureBreaker>(&s, "field")?.status();
            let value = match key.to_string().unwrap_or_default().as_str() {
                "state" => json!(status.state.as_str()),
                "consecutiveFailures" => json!(status.consecutive_failures),
                "threshold" => json!(status.threshold),
                "cooldownSeconds" => seconds_value(status.cooldown_ms),
                "openedAt" => json!(status.opened_at.map(seconds)),
                "failureHistory" => {
                    let mut history = to_json(&status.failure_history)?;
                    history_with_timestamps(&mut history);
                    history
                }
                _ => Json::Null,
            };
            ret_json(lua, &value)
        },
    )?;
    export(lua, raw, "failure_metrics", |lua, (s,): (Value,)| {
        ret_json(lua, &core::<FailureBreaker>(&s, "metrics")?.metrics())
    })?;
    export(lua, raw, "failure_reset", |_, (s,): (Value,)| {
        core::<FailureBreaker>(&s, "reset")?.reset();
        none()
    })?;
    export(lua, raw, "failure_snapshot", |lua, (s,): (Value,)| {
        ret_json(lua, &core::<FailureBreaker>(&s, "snapshot")?.snapshot())
    })?;
    export(
        lua,
        raw,
        "failure_restore",
        |_, (s, snap): (Value, Value)| {
            let breaker = core::<FailureBreaker>(&s, "restore")?;
            let snapshot = convert::to_json(&snap, Ctx::Snapshot, "snapshot")?;
            breaker.restore_json(&snapshot)?;
            none()
        },
    )?;
    export(lua, raw, "failure_save", |_, (s, p): (Value, Value)| {
        let breaker = core::<FailureBreaker>(&s, "save")?;
        breaker.save(path(&p, "CircuitBreaker.save: path")?)?;
        none()
    })?;
    export(lua, raw, "failure_load", |lua, (s, p): (Value, Value)| {
        let breaker = core::<FailureBreaker>(&s, "load")?;
        let loaded = breaker.load(path(&p, "CircuitBreaker.load: path")?)?;
        ret(lua, loaded)
    })?;
    export(lua, raw, "failure_tostring", |lua, (s,): (Value,)| {
        let handle = this::<FailureBreaker>(&s, "tostring")?;
        let status = handle.core.status();
        let detail = format!(
            "{}, {}/{} failures",
            status.state, status.consecutive_failures, status.threshold
        );
        crate::describe_object(lua, "CircuitBreaker", &detail)
    })?;
    export_listener_methods::<FailureBreaker>(
        lua,
        raw,
        [
            "failure_add_listener",
            "failure_remove_listener",
            "failure_listener_errors",
        ],
    )?;
    Ok(())
}
