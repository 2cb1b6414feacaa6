//! agentbreaker for Lua: `require("agentbreaker")` from Lua 5.4, LuaJIT and Lua 5.1 (one build
//! per interpreter: features `lua54`, `luajit`, `lua51`).
//!
//! Two layers. The Rust side registers, per class, "raw" functions ([`Methods`]): each converts
//! its Lua arguments to the core's inputs ([`convert`]), calls the core inside a panic boundary
//! (a panic is `INTERNAL`) and returns `true, results...` or `false, "CODE: message"`. The Lua side
//! (`agentbreaker.lua`, compiled in) makes the classes users see from those tables and raises the
//! error strings (a Rust function can only raise an mlua error object; Lua users match strings).
//! Objects are userdata whose metatable fields come from the Lua side.
//!
//! The hot methods of the three breakers (`recordSuccess`, `shouldAllowOperation`,
//! `recordProgress`, `check`, `ingest`) are C functions ([`capi`]) in front of their raw
//! functions: through an mlua function and a Lua method, a call costs several times what the
//! pure-Lua peers do (docs/benchmarks.md). No breaker behaviour and no default lives here.

mod capi;
mod classes;
mod convert;

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::Arc;

use agentbreaker::interop::{self, ArgKind, EventSource, FromConfig, catch};
use agentbreaker::metrics::{Recorder, Update};
use agentbreaker::seed_log_line;
use agentbreaker::{BudgetBreaker, Error, Event, ExitStrategy, FailureBreaker, Listener};
use agentbreaker::{ListenerId, Loop, Monitor, SeedLogLevel, SharedClock, StagnationBreaker};
use mlua::{FromLuaMulti, Function, IntoLuaMulti, Lua, MultiValue, RegistryKey, Table, UserData};
use mlua::{UserDataFields, UserDataRef, Value, WeakLua};
use serde_json::Value as Json;

use crate::convert::{describe, lua_error, not_self, wrong_argument};

/// The Lua side of the module.
const PRELUDE: &str = include_str!("agentbreaker.lua");

/// What a raw function returns: its results, or an error that becomes `false, "CODE: message"`.
pub(crate) type Out = Result<MultiValue, Error>;

/// Results as raw-function output.
pub(crate) fn ret(lua: &Lua, values: impl IntoLuaMulti) -> Out {
    values.into_lua_multi(lua).map_err(lua_error)
}

/// No results.
pub(crate) fn none() -> Out {
    Ok(MultiValue::new())
}

/// A core result as one value (`serde_json::to_value`, then one walk into tables).
pub(crate) fn ret_json<T: serde::Serialize + ?Sized>(lua: &Lua, value: &T) -> Out {
    ret(
        lua,
        convert::to_lua(lua, &convert::json(value)?).map_err(lua_error)?,
    )
}

/// A class of Lua objects wrapping one core object.
pub(crate) trait Class: 'static {
    /// The name Lua users see (`CircuitBreaker`).
    const NAME: &'static str;
    /// The magic number of its cells (`capi`); 0: its objects are not cells.
    const MAGIC: u64 = 0;
    /// The failure threshold of seed 004's log lines (the CircuitBreaker's only).
    const SEED_THRESHOLD: Option<fn(&Self) -> u32> = None;
}

macro_rules! classes {
    ($($t:ty => $name:literal $(, $magic:expr)?;)*) => {$(
        impl Class for $t {
            const NAME: &'static str = $name;
            $(const MAGIC: u64 = $magic;)?
        }
    )*};
}
classes! {
    StagnationBreaker => "StagnationBreaker", capi::MAGICS[1];
    BudgetBreaker => "BudgetBreaker", capi::MAGICS[2];
    ExitStrategy => "ExitStrategy";
    Loop => "Loop";
    Monitor => "Monitor";
    classes::LuaClock => "Clock";
}
impl Class for FailureBreaker {
    const NAME: &'static str = "CircuitBreaker";
    const MAGIC: u64 = capi::MAGICS[0];
    const SEED_THRESHOLD: Option<fn(&Self) -> u32> = Some(|cb| cb.config().failure_threshold);
}

/// A Lua object: the shared core object and the Lua listeners registered on it.
#[derive(Debug)]
pub(crate) struct Handle<T> {
    pub(crate) core: Arc<T>,
    pub(crate) listeners: Registrations,
}

impl<T: Class> Handle<T> {
    pub(crate) fn new(core: T) -> Self {
        Handle {
            core: Arc::new(core),
            listeners: Registrations::default(),
        }
    }

    /// The Lua object.
    pub(crate) fn into_lua(self, lua: &Lua) -> Out {
        ret(lua, lua.create_userdata(self).map_err(lua_error)?)
    }

    /// What a constructor returns: the Lua object or, given the `metatable` of a class with
    /// cells, its cell and the Lua object behind it.
    fn into_object(self, lua: &Lua, metatable: Value) -> Out {
        match metatable {
            Value::Table(mt) if T::MAGIC != 0 => {
                let cell = capi::new_cell(lua, &self.core, self.listeners.any.get(), &mt)?;
                let object = lua.create_userdata(self).map_err(lua_error)?;
                ret(lua, (cell, object))
            }
            _ => self.into_lua(lua),
        }
    }
}

impl<T: Class> UserData for Handle<T> {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        // Set by the Lua side when the module loads, before any object exists.
        for field in ["__index", "__newindex", "__tostring"] {
            fields.add_meta_field_with(field, move |lua| {
                let metas: Table = lua.named_registry_value(METAS_KEY)?;
                metas.raw_get::<Table>(T::NAME)?.raw_get::<Value>(field)
            });
        }
        fields.add_meta_field("__name", format!("agentbreaker.{}", T::NAME));
    }
}

/// The raw functions of one class, `raw[name]` for the Lua side: keys beginning with `__` are
/// metatable fields of its objects, with `_` functions of the Lua side's own, the rest methods.
pub(crate) struct Methods<'a, T = ()> {
    lua: &'a Lua,
    table: Table,
    class: PhantomData<T>,
}

impl<'a, T> Methods<'a, T> {
    pub(crate) fn new(lua: &'a Lua, raw: &Table, name: &str) -> mlua::Result<Self> {
        let table = lua.create_table()?;
        raw.raw_set(name, &table)?;
        Ok(Methods {
            lua,
            table,
            class: PhantomData,
        })
    }

    /// A function (a constructor, or a function of the module): `f` runs inside a panic
    /// boundary (`interop::catch`) with the Lua state marked as running (`ACTIVE`);
    /// Lua gets `true, results...` or `false, "CODE: message"`. mlua itself never raises for bad
    /// input: the arguments are values whose conversion cannot fail.
    pub(crate) fn function<A, F>(&self, name: &str, f: F) -> mlua::Result<&Self>
    where
        A: FromLuaMulti,
        F: Fn(&Lua, A) -> Out + 'static,
    {
        let function = self.lua.create_function(move |lua, args: A| {
            ACTIVE.with(|a| a.borrow_mut().push(lua.weak()));
            let outcome = catch(|| f(lua, args));
            ACTIVE.with(|a| a.borrow_mut().pop());
            // Free the registry slots of listener functions dropped meanwhile (removed
            // listeners, collected objects), so that Lua can collect the functions.
            lua.expire_registry_values();
            match outcome {
                Ok(values) => (true, values).into_lua_multi(lua),
                Err(e) => (false, e.to_string()).into_lua_multi(lua),
            }
        })?;
        self.table.raw_set(name, function)?;
        Ok(self)
    }
}

impl<T: Class> Methods<'_, T> {
    /// A method: `self` checked to be an object of the class (else `INVALID_ARGUMENT` naming the
    /// method), then `f(lua, object, arguments)`.
    pub(crate) fn method<A, F>(&self, name: &'static str, f: F) -> mlua::Result<&Self>
    where
        A: FromLuaMulti,
        F: Fn(&Lua, &Handle<T>, A) -> Out + 'static,
    {
        let method = name.trim_start_matches('_');
        self.function(name, move |lua, (object, args): (Value, A)| {
            let this = match &object {
                Value::UserData(ud) => ud.borrow::<Handle<T>>().ok(),
                _ => None,
            };
            let this: UserDataRef<Handle<T>> =
                this.ok_or_else(|| not_self(T::NAME, method, &object))?;
            f(lua, &this, args)
        })
    }

    /// A method without arguments or results (`reset()`).
    pub(crate) fn action(&self, name: &'static str, f: fn(&T)) -> mlua::Result<&Self> {
        self.method(name, move |_, h, ()| {
            f(&h.core);
            none()
        })
    }

    /// A method returning a core result as one value (`ret_json`).
    pub(crate) fn getter<R>(&self, name: &'static str, f: fn(&T) -> R) -> mlua::Result<&Self>
    where
        R: serde::Serialize + 'static,
    {
        self.method(name, move |lua, h, ()| ret_json(lua, &f(&h.core)))
    }
}

impl<T: Class + EventSource + FromConfig> Methods<'_, T> {
    /// `new(config)` (`new(config, metatable)` for a class with cells): the core object of the
    /// config ([`Options`]) and the Lua object of it.
    pub(crate) fn constructor(&self) -> mlua::Result<&Self> {
        self.function("new", |lua, (config, metatable): (Value, Value)| {
            let opts = Options::read::<T>(lua, &config)?;
            let core = T::from_config(&opts.json, opts.clock())?;
            opts.into_object(lua, core)?.into_object(lua, metatable)
        })
    }

    /// `addListener(fn)` (returns an id), `removeListener(id)`, `listenerErrors()` (contract
    /// section 8).
    pub(crate) fn listeners(&self) -> mlua::Result<&Self> {
        self.method("addListener", |lua, h, (f,): (Value,)| {
            let Value::Function(f) = f else {
                let what = format!("{}.addListener: the listener", T::NAME);
                return Err(convert::wrong_argument(&what, "a function", &f));
            };
            ret(lua, h.listeners.add(lua, f, &*h.core)?)
        })?
        .method("removeListener", |lua, h, (id,): (Value,)| {
            let id = convert::whole(&id, &format!("{}.removeListener: id", T::NAME))?;
            let removed = h.listeners.ids.borrow_mut().remove(&id);
            ret(
                lua,
                removed && h.core.remove_listener(ListenerId::from_number(id)),
            )
        })?
        .getter("listenerErrors", T::listener_errors)
    }
}

/// A constructor's config table: the contract's config (every other key, as JSON) and the
/// Lua-only options `clock`, `listeners` (functions added in order) and, for the CircuitBreaker
/// (`seed`), `quiet` and `log` (`function(level, line)` for the seed's lines).
#[derive(Default)]
pub(crate) struct Options {
    pub(crate) json: Json,
    clock: Option<SharedClock>,
    listeners: Vec<Function>,
    quiet: bool,
    log: Option<Function>,
}

/// The Lua-only options and what each must be.
const OPTIONS: [(&str, &str); 4] = [
    ("clock", "a clock"),
    ("listeners", "a list of functions"),
    ("quiet", "a boolean"),
    ("log", "a function"),
];

impl Options {
    pub(crate) fn read<T: Class>(lua: &Lua, config: &Value) -> Result<Self, Error> {
        let what = format!("{} config", T::NAME);
        let options = &OPTIONS[..if T::SEED_THRESHOLD.is_some() { 4 } else { 2 }];
        let keys: Vec<&str> = options.iter().map(|(key, _)| *key).collect();
        let json = convert::to_json_without(lua, config, &what, ArgKind::Config, &keys)?;
        let mut opts = Options {
            json,
            ..Options::default()
        };
        let Value::Table(t) = config else {
            return Ok(opts);
        };
        for (key, expected) in options {
            let value = t.raw_get::<Value>(*key).map_err(lua_error)?;
            let taken = match (*key, &value) {
                (_, Value::Nil) => true,
                ("clock", Value::UserData(ud)) => ud
                    .borrow::<Handle<classes::LuaClock>>()
                    .map(|c| opts.clock = Some(c.core.shared()))
                    .is_ok(),
                ("listeners", Value::Table(list)) => {
                    opts.listeners = list
                        .sequence_values::<Function>()
                        .collect::<mlua::Result<_>>()
                        .unwrap_or_default();
                    opts.listeners.len() == list.pairs::<Value, Value>().count()
                }
                ("quiet", Value::Boolean(b)) => {
                    opts.quiet = *b;
                    true
                }
                ("log", Value::Function(f)) => {
                    opts.log = Some(f.clone());
                    true
                }
                _ => false,
            };
            if !taken {
                return Err(ArgKind::Config.wrong_type(
                    &format!("{what}: {key}"),
                    expected,
                    &describe(&value),
                ));
            }
        }
        Ok(opts)
    }

    /// The clock given, else the system clock.
    pub(crate) fn clock(&self) -> SharedClock {
        self.clock
            .clone()
            .unwrap_or_else(agentbreaker::SystemClock::shared)
    }

    /// The Lua object of a new core object, with its listeners: the seed's log lines first (a
    /// CircuitBreaker that is not quiet), then `listeners`.
    pub(crate) fn into_object<T: Class + EventSource>(
        self,
        lua: &Lua,
        core: T,
    ) -> Result<Handle<T>, Error> {
        let handle = Handle::new(core);
        if let Some(threshold) = T::SEED_THRESHOLD.filter(|_| !self.quiet) {
            let log = match self.log {
                Some(f) => f,
                None => lua.named_registry_value(SEED_LOG_KEY).map_err(lua_error)?,
            };
            let threshold = threshold(&handle.core);
            handle
                .listeners
                .add_seed_log(lua, log, threshold, &*handle.core)?;
        }
        for f in self.listeners {
            handle.listeners.add(lua, f, &*handle.core)?;
        }
        Ok(handle)
    }
}

/// Registry name of the Lua side's default seed logger (print, warn).
const SEED_LOG_KEY: &str = "agentbreaker.seed_log";

// Lua functions as core listeners.
//
// The core calls listeners synchronously, after releasing its locks, inside the operation that
// caused the event. A core listener must be `Send + Sync` and a Lua function is neither (mlua
// has no `send` feature in module mode), so the function goes into the Lua registry and the
// listener holds its `RegistryKey`. Every raw function marks its Lua state as the one running on
// this thread ([`ACTIVE`]); a listener called inside the operation calls its function in that
// state. An error of the function goes back to the core, which counts it (`listenerErrors()`).
// A dropped key (a removed listener, a collected object) frees its registry slot at the end of
// the next call into the module (`Lua::expire_registry_values`).

thread_local! {
    /// The Lua states running a raw function on this thread, innermost last.
    static ACTIVE: RefCell<Vec<WeakLua>> = const { RefCell::new(Vec::new()) };
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
/// (`interop::updates_json`) as a listener is called; what it raises is dropped (a recorder
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
        let _ = call(&key, |lua| {
            Some(convert::to_lua(lua, &interop::updates_json(u)))
        });
    })))
}

/// The Lua listeners one object registered with its core object, by the id Lua sees.
#[derive(Debug, Default)]
pub(crate) struct Registrations {
    /// The numbers of the core's ids of the Lua listeners added by `addListener` (only those can
    /// be removed through it: not the seed's log line).
    pub(crate) ids: RefCell<HashSet<u64>>,
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
        let id = core.add_listener(listener(key, |lua, event| {
            Some(convert::to_lua(lua, &event.to_json()))
        }));
        self.ids.borrow_mut().insert(id.number());
        Ok(id.number())
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

/// Registry names of the module table and of the metatable fields of each class.
const MODULE_KEY: &str = "agentbreaker.module";
const METAS_KEY: &str = "agentbreaker.metas";

/// Registers every raw function, runs the Lua side and returns the module table. Loading the
/// module again in the same Lua state returns the same table: objects share one metatable per
/// class, so there is one set of classes per state.
#[mlua::lua_module]
fn agentbreaker(lua: &Lua) -> mlua::Result<Table> {
    if let Ok(Value::Table(module)) = lua.named_registry_value::<Value>(MODULE_KEY) {
        return Ok(module);
    }
    let raw = lua.create_table()?;
    raw.raw_set("null", Value::NULL)?;
    raw.raw_set("object_mt", convert::init(lua)?)?;
    raw.raw_set("version", env!("CARGO_PKG_VERSION"))?;
    capi::export_all(lua, &raw)?;
    classes::export_all(lua, &raw)?;
    let prelude = lua
        .load(PRELUDE)
        .set_name("=agentbreaker.lua")
        .into_function()?;
    let (module, metas, seed_log): (Table, Table, Function) = prelude.call(raw)?;
    lua.set_named_registry_value(METAS_KEY, metas)?;
    lua.set_named_registry_value(SEED_LOG_KEY, seed_log)?;
    lua.set_named_registry_value(MODULE_KEY, &module)?;
    Ok(module)
}
