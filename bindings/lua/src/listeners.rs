//! Lua functions as core listeners.
//!
//! The core calls listeners synchronously, after releasing its locks, inside the operation that
//! caused the event. A core listener must be `Send + Sync` and a Lua function is neither (mlua
//! has no `send` feature in module mode), so the function goes into the Lua registry and the
//! listener holds its `RegistryKey`. Every raw function marks its Lua state as the one running on
//! this thread ([`ACTIVE`]); a listener called inside the operation calls its function in that
//! state. An error of the function goes back to the core, which counts it (`listenerErrors()`).
//! A dropped key (a removed listener, a collected object) frees its registry slot at the end of
//! the next call into the module (`Lua::expire_registry_values`).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentbreaker::interop::EventSource;
use agentbreaker::metrics::{Recorder, Update};
use agentbreaker::{Error, Event, Listener, ListenerId, SeedLogLevel, seed_log_line};
use mlua::{Function, IntoLuaMulti, Lua, RegistryKey, Value, WeakLua};

use crate::classes::updates_json;
use crate::convert;
use crate::convert::{lua_error, wrong_argument};

thread_local! {
    /// The Lua states running a raw function on this thread, innermost last.
    pub(crate) static ACTIVE: RefCell<Vec<WeakLua>> = const { RefCell::new(Vec::new()) };
}

/// Calls the Lua function under `key` with `arguments(lua)`, if any, in the running Lua state.
fn call<A: IntoLuaMulti>(
    key: &RegistryKey,
    arguments: impl FnOnce(&Lua) -> Option<mlua::Result<A>>,
) -> Result<(), String> {
    let lua = ACTIVE.with(|a| a.borrow().last().and_then(WeakLua::try_upgrade));
    let lua = lua.ok_or("no Lua state is running agentbreaker on this thread")?;
    let Some(arguments) = arguments(&lua) else {
        return Ok(());
    };
    let call = |f: Function| f.call::<()>(arguments?);
    lua.registry_value(key)
        .and_then(call)
        .map_err(|e| e.to_string())
}

/// A core listener calling the Lua function under `key` with `arguments(lua, event)`, if any.
fn listener<A: IntoLuaMulti>(
    key: RegistryKey,
    arguments: impl Fn(&Lua, &Event) -> Option<mlua::Result<A>> + Send + Sync + 'static,
) -> Listener {
    Arc::new(move |event: &Event| Ok(call(&key, |lua| arguments(lua, event))?))
}

/// The core metrics recorder of `f` (`nil`: none), calling it with the updates
/// (`functions::updates_json`) as a listener is called; what it raises is dropped (a recorder
/// must not stop the agent).
pub(crate) fn recorder(lua: &Lua, f: Value) -> Result<Option<Recorder>, Error> {
    let what = "Monitor.setMetricsRecorder: recorder";
    let f = match f {
        Value::Nil => return Ok(None),
        Value::Function(f) => f,
        other => return Err(wrong_argument(what, "a function or nil", &other)),
    };
    let key = lua.create_registry_value(f).map_err(lua_error)?;
    Ok(Some(Arc::new(move |u: &[Update]| {
        let _ = call(&key, |lua| Some(convert::to_lua(lua, &updates_json(u))));
    })))
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The Lua listeners one object registered with its core object, by the id Lua sees.
#[derive(Debug, Default)]
pub(crate) struct Registrations {
    /// The core's ids, by the ids Lua sees (only this object's can be removed through it).
    pub(crate) by_id: RefCell<HashMap<u64, ListenerId>>,
    /// Whether a Lua function was ever registered (the seed's log line included): the C fast
    /// paths take only objects without (they do not enter the listener context).
    pub(crate) any: Cell<bool>,
}

impl Registrations {
    fn key(&self, lua: &Lua, f: Function) -> Result<RegistryKey, Error> {
        self.any.set(true);
        lua.create_registry_value(f).map_err(lua_error)
    }

    /// Registers `f` with `core` for every event (a table, the core's `Event::to_json`);
    /// returns the id Lua gets for `removeListener`.
    pub(crate) fn add(&self, lua: &Lua, f: Function, core: &dyn EventSource) -> Result<u64, Error> {
        let key = self.key(lua, f)?;
        let core_id = core.add_listener(listener(key, |lua, event| {
            Some(convert::to_lua(lua, &event.to_json()))
        }));
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self.by_id.borrow_mut().insert(id, core_id);
        Ok(id)
    }

    /// Registers `f` for seed 004's log lines, `f(level, line)` with level `"print"` or
    /// `"warn"` (a CircuitBreaker that is not quiet).
    pub(crate) fn add_seed_log(
        &self,
        lua: &Lua,
        f: Function,
        failure_threshold: u32,
        core: &dyn EventSource,
    ) -> Result<(), Error> {
        let key = self.key(lua, f)?;
        core.add_listener(listener(key, move |_, event| {
            let (level, line) = seed_log_line(event, failure_threshold)?;
            let level = match level {
                SeedLogLevel::Print => "print",
                SeedLogLevel::Warn => "warn",
            };
            Some(Ok((level, line)))
        }));
        Ok(())
    }
}
