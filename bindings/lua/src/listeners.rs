//! Lua functions as core listeners.
//!
//! The core calls listeners synchronously, after releasing its locks, inside the operation that
//! caused the event (and delivers the events a listener causes after it returns). A core listener
//! must be `Send + Sync`; a Lua function is neither (mlua's `send` feature does not exist in module
//! mode). So the function goes into the Lua registry and the core listener holds only its
//! `RegistryKey` (which is `Send + Sync`). Every raw function marks its Lua state as the one
//! running on this thread while it runs ([`enter`]); a listener called by the core inside that
//! operation looks its function up in that state and calls it. This holds on whatever thread the
//! host runs the state. A Lua error in the function is returned to the core, which counts it
//! (`listenerErrors()`) and goes on with the next listener.
//!
//! A dropped key (a removed listener, a collected object) frees its registry slot at the end of
//! the next call into the module ([`Lua::expire_registry_values`]), and Lua can then collect the
//! function.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentbreaker::{Event, Listener, ListenerId, ListenerResult, SeedLogLevel, seed_log_line};
use mlua::{Function, IntoLua, Lua, RegistryKey, Value, WeakLua};

use crate::convert::{self, lua_error};

thread_local! {
    /// The Lua states running a raw function on this thread, innermost last.
    static ACTIVE: RefCell<Vec<WeakLua>> = const { RefCell::new(Vec::new()) };
}

/// Marks `lua` as running on this thread until the guard is dropped.
pub(crate) fn enter(lua: &Lua) -> ActiveGuard {
    ACTIVE.with(|a| a.borrow_mut().push(lua.weak()));
    ActiveGuard(())
}

/// See [`enter`].
#[derive(Debug)]
pub(crate) struct ActiveGuard(());

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.borrow_mut().pop());
    }
}

fn active_lua() -> Option<Lua> {
    ACTIVE.with(|a| a.borrow().last().and_then(WeakLua::try_upgrade))
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn call_error(e: mlua::Error) -> BoxError {
    e.to_string().into()
}

/// The Lua function behind `key`, from the Lua state running on this thread.
fn function(key: &RegistryKey) -> Result<Function, BoxError> {
    let lua = active_lua().ok_or("no Lua state is running agentbreaker on this thread")?;
    lua.registry_value::<Function>(key).map_err(call_error)
}

/// An event as the argument of a Lua call (converted with the Lua state mlua calls with).
struct EventArg(serde_json::Value);

impl IntoLua for EventArg {
    fn into_lua(self, lua: &Lua) -> mlua::Result<Value> {
        convert::to_lua(lua, &self.0)
    }
}

/// A core listener that calls the Lua function under `key` with the event as a table.
fn event_listener(key: RegistryKey) -> Listener {
    Arc::new(move |event: &Event| -> ListenerResult {
        function(&key)?
            .call::<()>(EventArg(event.to_json()))
            .map_err(call_error)
    })
}

/// A core listener that hands the seed 004 log line of each event (if it has one) to the Lua
/// function under `key`, as `(level, line)` with level `"print"` or `"warn"`.
fn seed_log_listener(key: RegistryKey, failure_threshold: u32) -> Listener {
    Arc::new(move |event: &Event| -> ListenerResult {
        let Some((level, line)) = seed_log_line(event, failure_threshold) else {
            return Ok(());
        };
        let level = match level {
            SeedLogLevel::Print => "print",
            SeedLogLevel::Warn => "warn",
        };
        function(&key)?
            .call::<()>((level, line))
            .map_err(call_error)
    })
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The Lua listeners one object registered with its core object, by the number Lua sees as the
/// listener's id.
#[derive(Debug, Default)]
pub(crate) struct Registrations {
    by_id: RefCell<HashMap<u64, ListenerId>>,
    /// Whether a Lua function was ever registered (the seed's log line included).
    any: Cell<bool>,
}

impl Registrations {
    /// Whether the core object may call a Lua function: a hot path enters the listener context
    /// ([`enter`]) only then.
    pub(crate) fn any(&self) -> bool {
        self.any.get()
    }

    /// Registers `f` for every event through `add` (the core object's `add_listener`); returns
    /// the id Lua gets for `removeListener`.
    pub(crate) fn add_event_listener(
        &self,
        lua: &Lua,
        f: Function,
        add: impl FnOnce(Listener) -> ListenerId,
    ) -> Result<u64, agentbreaker::Error> {
        let key = lua.create_registry_value(f).map_err(lua_error)?;
        self.any.set(true);
        let core_id = add(event_listener(key));
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self.by_id.borrow_mut().insert(id, core_id);
        Ok(id)
    }

    /// Registers `f` for the seed's log lines (a CircuitBreaker that is not quiet).
    pub(crate) fn add_seed_log(
        &self,
        lua: &Lua,
        f: Function,
        failure_threshold: u32,
        add: impl FnOnce(Listener) -> ListenerId,
    ) -> Result<(), agentbreaker::Error> {
        let key = lua.create_registry_value(f).map_err(lua_error)?;
        self.any.set(true);
        add(seed_log_listener(key, failure_threshold));
        Ok(())
    }

    /// Forgets the listener Lua knows as `id`; returns the core's id to remove, or `None` when
    /// this object has no such listener.
    pub(crate) fn remove(&self, id: u64) -> Option<ListenerId> {
        self.by_id.borrow_mut().remove(&id)
    }
}
