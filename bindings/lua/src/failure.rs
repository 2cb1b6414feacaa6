//! `agentbreaker.CircuitBreaker`: the FailureBreaker under seed 004's name, with its defaults and
//! log lines (its readable fields and `call` are the Lua side's). `recordSuccess` and
//! `shouldAllowOperation` are C functions (`capi`) in front of the methods here.

use std::path::PathBuf;

use agentbreaker::{Error, FailureBreaker, FailureConfig};
use mlua::{Lua, Table, Value};
use serde_json::json;

use crate::errors::wrong_argument;
use crate::{Methods, Options, convert, none, ret, ret_json};

/// Registry name of the Lua side's default seed logger (print, warn).
pub(crate) const SEED_LOG_KEY: &str = "agentbreaker.seed_log";

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

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<FailureBreaker>::new(lua, raw, "CircuitBreaker")?
        .function("new", |lua, (config, metatable): (Value, Table)| {
            let opts = Options::read::<FailureBreaker>(lua, &config, true)?;
            let config = FailureConfig::from_json(&opts.json)?;
            let threshold = Some(config.failure_threshold);
            let core = FailureBreaker::with_clock(config, opts.clock())?;
            let handle = opts.into_object(lua, core, threshold)?;
            handle.into_hot(lua, &metatable)
        })?
        .action("recordSuccess", FailureBreaker::record_success)?
        .method("recordFailure", |_, h, (error,): (Value,)| {
            let error = convert::string(&error, "CircuitBreaker.recordFailure: error")?;
            h.core.record_failure(&error);
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
        .method("metrics", |lua, h, ()| ret_json(lua, &h.core.metrics()))?
        .method("storeStatus", |lua, h, ()| {
            ret_json(lua, &h.core.store_status())
        })?
        .action("reset", FailureBreaker::reset)?
        .method("snapshot", |lua, h, ()| ret_json(lua, &h.core.snapshot()))?
        .method("restore", |lua, h, (snapshot,): (Value,)| {
            h.core.restore_json(&convert::snapshot(lua, &snapshot)?)?;
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
    Ok(())
}
