//! `agentbreaker.CircuitBreaker`: the FailureBreaker (docs/contract.md) with seed 004's name,
//! defaults, log lines and readable fields. Its `recordSuccess` and `shouldAllowOperation` are C
//! functions (`capi`) in front of the methods here.

use std::path::PathBuf;

use agentbreaker::interop::ArgKind;
use agentbreaker::{Error, FailureBreaker, FailureConfig};
use mlua::{Function, Lua, Table, Value};
use serde_json::{Value as Json, json};

use crate::errors::{describe, lua_error, wrong_argument};
use crate::{Handle, Methods, Options, convert, describe_object, none, ret, ret_json};

/// Registry name of the Lua side's default seed logger (print / warn).
pub(crate) const SEED_LOG_KEY: &str = "agentbreaker.seed_log";

/// The seed's `timestamp` beside the contract's `atMs` in each history entry: whole seconds of
/// the clock (the seed used `os.time()`).
fn with_timestamps(mut history: Json) -> Json {
    for entry in history.as_array_mut().into_iter().flatten() {
        if let Some(at) = entry.get("atMs").and_then(Json::as_u64) {
            entry["timestamp"] = json!(at / 1000);
        }
    }
    history
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<Json, Error> {
    serde_json::to_value(value)
        .map_err(|e| Error::Internal(format!("cannot convert a result: {e}")))
}

/// A path argument, byte for byte (a Lua string need not be UTF-8).
fn path(value: &Value, what: &str) -> Result<PathBuf, Error> {
    match value {
        #[cfg(unix)]
        Value::String(s) => Ok(PathBuf::from(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&s.as_bytes()),
        )),
        #[cfg(not(unix))]
        Value::String(s) => Ok(PathBuf::from(s.to_string_lossy())),
        other => Err(wrong_argument(what, "a string", other)),
    }
}

/// Whether a value can be called (a function, or a table or userdata with `__call`).
fn callable(value: &Value) -> bool {
    let has_call = |mt: Option<Table>| {
        mt.is_some_and(|mt| !matches!(mt.raw_get::<Value>("__call"), Ok(Value::Nil) | Err(_)))
    };
    match value {
        Value::Function(_) => true,
        Value::Table(t) => has_call(t.metatable()),
        Value::UserData(ud) => ud
            .metatable()
            .is_ok_and(|mt| !matches!(mt.get::<Value>("__call"), Ok(Value::Nil) | Err(_))),
        _ => false,
    }
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<FailureBreaker>::new(lua, raw, "CircuitBreaker")?
        .function("new", |lua, (config,): (Value,)| {
            let mut opts = Options::read::<FailureBreaker>(lua, &config, true)?;
            let config = FailureConfig::from_json(&opts.json)?;
            let threshold = config.failure_threshold;
            let handle = Handle::new(FailureBreaker::with_clock(config, opts.clock())?);
            if !opts.quiet {
                let log = match opts.log.take() {
                    Some(f) => f,
                    None => lua
                        .named_registry_value::<Function>(SEED_LOG_KEY)
                        .map_err(lua_error)?,
                };
                handle
                    .listeners
                    .add_seed_log(lua, log, threshold, |l| handle.core.add_listener(l))?;
            }
            opts.add_listeners(lua, &handle)?;
            handle.into_hot(lua)
        })?
        .method("recordSuccess", |_, h, ()| {
            h.core.record_success();
            none()
        })?
        .method("recordFailure", |_, h, (error,): (Value,)| {
            h.core.record_failure(&convert::string(
                &error,
                "CircuitBreaker.recordFailure: error",
            )?);
            none()
        })?
        .method("shouldAllowOperation", |lua, h, ()| {
            let permission = h.core.should_allow_operation();
            ret(lua, (permission.allowed, permission.message))
        })?
        .method("getStatus", |lua, h, ()| {
            let mut status = to_json(&h.core.status())?;
            status["failureHistory"] = with_timestamps(status["failureHistory"].take());
            ret_json(lua, &status)
        })?
        .method("metrics", |lua, h, ()| ret_json(lua, &h.core.metrics()))?
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
                let e = format!(
                    "CircuitBreaker.call: fn must be a function, not {}",
                    describe(&f)
                );
                return Err(ArgKind::Argument.error(e));
            }
            h.core.try_acquire()?;
            none()
        })?
        // A seed field, read live: `cb.state`, `cb.openedAt` (seconds), ...
        .method("_field", |lua, h, (key,): (Value,)| {
            let status = h.core.status();
            let value = match key.to_string().unwrap_or_default().as_str() {
                "state" => json!(status.state.as_str()),
                "consecutiveFailures" => json!(status.consecutive_failures),
                "threshold" => json!(status.threshold),
                "cooldownSeconds" if status.cooldown_ms % 1000 == 0 => {
                    json!(status.cooldown_ms / 1000)
                }
                "cooldownSeconds" => json!(status.cooldown_ms as f64 / 1000.0),
                "openedAt" => json!(status.opened_at.map(|ms| ms / 1000)),
                "failureHistory" => with_timestamps(to_json(&status.failure_history)?),
                _ => Json::Null,
            };
            ret_json(lua, &value)
        })?
        .method("__tostring", |lua, h, ()| {
            let s = h.core.status();
            describe_object::<FailureBreaker>(
                lua,
                &format!(
                    "{}, {}/{} failures",
                    s.state, s.consecutive_failures, s.threshold
                ),
            )
        })?;
    Ok(())
}
