//! agentbreaker for Lua: `require("agentbreaker")` from Lua 5.4, LuaJIT and Lua 5.1 (one build
//! per interpreter: features `lua54`, `luajit`, `lua51`).
//!
//! The module has two layers. The Rust side ([`export`]ed "raw" functions, one per operation)
//! converts Lua values to the core's JSON inputs and results back to Lua tables, and turns every
//! error into `false, "CODE: message"`. The Lua side (`agentbreaker.lua`, compiled into the module)
//! builds the classes users see (`CircuitBreaker`, `StagnationBreaker`, ...) and raises those
//! strings as Lua errors: a Rust function can only raise an mlua error object, and Lua users
//! match error strings (`err:match("^CIRCUIT_OPEN:")`). Objects are userdata whose metatable
//! fields (`__index`, `__newindex`, `__tostring`) come from the Lua side; a CircuitBreaker is a
//! proxy userdata of its Rust object, with a metatable of its own.
//!
//! The hot paths (`recordSuccess`, `shouldAllowOperation`, `ingest`) are C functions written with
//! the Lua C API ([`capi`], the one module with `unsafe` code): through an mlua function and a Lua
//! method on the way, a call cost several times the pure-Lua equivalent's.
//!
//! No breaker behaviour lives here: every decision is the core's.

mod agent_loop;
mod budget;
mod capi;
mod clock;
mod convert;
mod env;
mod failure;
mod listeners;
mod stagnation;
mod strategy;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use agentbreaker::{Error, Listener, ListenerId, SharedClock};
use mlua::{
    AnyUserData, Either, FromLuaMulti, Function, IntoLuaMulti, Lua, MultiValue, Table, UserData,
    UserDataFields, UserDataRef, Value,
};
use serde_json::Value as Json;

use crate::convert::{Ctx, lua_error, lua_type};
use crate::listeners::Registrations;

/// The Lua side of the module.
const PRELUDE: &str = include_str!("agentbreaker.lua");

/// What a raw function returns: its results, or an error that becomes `false, "CODE: message"`.
pub(crate) type Out = Result<MultiValue, Error>;

/// The work of raw function `name` with the Lua state marked as running (listeners the core
/// calls during the operation find their functions in it), a panic caught as `INTERNAL`.
fn guarded<T>(lua: &Lua, name: &str, work: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    let _active = listeners::enter(lua);
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|panic| {
        Err(Error::Internal(format!(
            "panic in {name}: {}",
            panic_text(&*panic)
        )))
    })
}

/// Registers a raw function under `name`: runs `f` inside a panic boundary (a panic is
/// `INTERNAL`) and returns `true, results...` or `false, "CODE: message"`. The arguments are
/// `mlua::Value`s, whose conversion never fails, so mlua itself never raises for bad input.
pub(crate) fn export<A, F>(lua: &Lua, raw: &Table, name: &'static str, f: F) -> mlua::Result<()>
where
    A: FromLuaMulti,
    F: Fn(&Lua, A) -> Out + 'static,
{
    let function = lua.create_function(move |lua, args: A| {
        let outcome = guarded(lua, name, || f(lua, args));
        // Free the registry slots of listener functions dropped meanwhile (removed listeners,
        // collected objects), so that Lua can collect the functions.
        lua.expire_registry_values();
        match outcome {
            Ok(mut values) => {
                values.push_front(Value::Boolean(true));
                Ok(values)
            }
            Err(e) => (false, e.to_string()).into_lua_multi(lua),
        }
    })?;
    raw.raw_set(name, function)
}

/// Registers a raw function of the hot path (a method called once per agent step): like
/// [`export`], but the results go straight onto the Lua stack in the shape `R` chosen for that
/// method (no `MultiValue`, no allocation), and an error or a panic becomes
/// `on_error("CODE: message")` in that shape, which the Lua side raises. Registry values are not
/// expired here (every other raw function does it).
///
/// Hot-path functions take their object as [`FastSelf`] and check it themselves ([`fast_self`]):
/// a misuse is the same `INVALID_ARGUMENT` text the ordinary raw function gives, returned in the
/// error shape (so the Lua side needs no check of its own before the call).
pub(crate) fn export_fast<A, R, F>(
    lua: &Lua,
    raw: &Table,
    name: &'static str,
    on_error: fn(String) -> R,
    f: F,
) -> mlua::Result<()>
where
    A: FromLuaMulti,
    R: IntoLuaMulti + 'static,
    F: Fn(&Lua, A) -> Result<R, Error> + 'static,
{
    let function = lua.create_function(move |lua, args: A| {
        let outcome = guarded(lua, name, || f(lua, args));
        Ok(outcome.unwrap_or_else(|e| on_error(e.to_string())))
    })?;
    raw.raw_set(name, function)
}

/// The object of a hot-path method: an object of class `T`, borrowed straight from the Lua stack
/// (no reference slot, no allocation), or whatever else was passed as `self`. The borrow is
/// shared: a listener called during the operation may use the object again.
pub(crate) type FastSelf<T> = Either<UserDataRef<Handle<T>>, Value>;

/// The object of a hot-path method, or the `INVALID_ARGUMENT` error of the ordinary raw function.
pub(crate) fn fast_self<T: Class>(
    value: FastSelf<T>,
    method: &str,
) -> Result<UserDataRef<Handle<T>>, Error> {
    match value {
        Either::Left(handle) => Ok(handle),
        Either::Right(other) => this::<T>(&other, method),
    }
}

pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Results as raw-function output.
pub(crate) fn ret(lua: &Lua, values: impl IntoLuaMulti) -> Out {
    values.into_lua_multi(lua).map_err(lua_error)
}

/// No results.
pub(crate) fn none() -> Out {
    Ok(MultiValue::new())
}

/// A serializable result as one table (or other value).
pub(crate) fn ret_json<T: serde::Serialize>(lua: &Lua, value: &T) -> Out {
    let v = convert::result_to_lua(lua, value)?;
    ret(lua, v)
}

/// A class of Lua objects wrapping one core object: its name and where its metatable fields are.
pub(crate) trait Class: 'static {
    /// The name Lua users see (`CircuitBreaker`).
    const NAME: &'static str;
}

/// A Lua object: the shared core object and the Lua listeners registered on it.
#[derive(Debug)]
pub(crate) struct Handle<T> {
    pub(crate) core: Arc<T>,
    pub(crate) listeners: Registrations,
}

impl<T> Handle<T> {
    pub(crate) fn new(core: T) -> Self {
        Handle {
            core: Arc::new(core),
            listeners: Registrations::default(),
        }
    }
}

fn meta_key(class: &str) -> String {
    format!("agentbreaker.meta.{class}")
}

impl<T: Class> UserData for Handle<T> {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        // Set when the module loads, before any object exists (the metatable is built on the
        // first object of each class).
        for field in ["__index", "__newindex", "__tostring"] {
            fields.add_meta_field_with(field, move |lua| {
                let metas: Table = lua.named_registry_value(&meta_key(T::NAME))?;
                metas.raw_get::<Value>(field)
            });
        }
        fields.add_meta_field("__name", format!("agentbreaker.{}", T::NAME));
    }
}

/// The object a method was called on (`self`), or `INVALID_ARGUMENT` naming the method.
pub(crate) fn this<T: Class>(value: &Value, method: &str) -> Result<UserDataRef<Handle<T>>, Error> {
    match value {
        Value::UserData(ud) => ud
            .borrow::<Handle<T>>()
            .map_err(|_| not_self::<T>(value, method)),
        _ => Err(not_self::<T>(value, method)),
    }
}

/// The error of a method called on something that is not a `T`.
fn not_self<T: Class>(value: &Value, method: &str) -> Error {
    Error::InvalidArgument(format!(
        "{}.{method}: self must be a {}, not a {} (call it as obj:{method}(...))",
        T::NAME,
        T::NAME,
        lua_type(value)
    ))
}

/// The core object of `self` (the borrow of the Lua object ends here, so a listener called
/// during the operation may use the object again).
pub(crate) fn core<T: Class>(value: &Value, method: &str) -> Result<Arc<T>, Error> {
    Ok(Arc::clone(&this::<T>(value, method)?.core))
}

/// A new Lua object of class `T`.
pub(crate) fn object<T: Class>(lua: &Lua, handle: Handle<T>) -> Result<AnyUserData, Error> {
    lua.create_userdata(handle).map_err(lua_error)
}

/// A new breaker object that the hot paths in C (capi.rs) serve, as its constructor returns it:
/// the object, the address of its Rust value (mlua keeps the value in place until it drops it)
/// and whether it may have Lua listeners, for the breaker's proxy or cell.
pub(crate) fn hot_object<T: Class>(lua: &Lua, handle: Handle<T>) -> Out {
    let listened = handle.listeners.any();
    let ud = object(lua, handle)?;
    let address = {
        let handle = ud.borrow::<Handle<T>>().map_err(lua_error)?;
        mlua::LightUserData(std::ptr::from_ref::<Handle<T>>(&handle).cast_mut().cast())
    };
    ret(lua, (ud, address, listened))
}

/// `tostring(obj)`: `agentbreaker.Class(detail)`.
pub(crate) fn describe_object(lua: &Lua, class: &str, detail: &str) -> Out {
    ret(lua, format!("agentbreaker.{class}({detail})"))
}

/// The Lua-only construction options every class takes besides the SPEC's config keys.
pub(crate) struct Options {
    /// The SPEC config (every other key), as JSON.
    pub(crate) json: Json,
    /// `clock = agentbreaker.ManualClock.new(...)`; the system clock when absent.
    pub(crate) clock: Option<SharedClock>,
    /// `listeners = {fn, ...}`, added in order at construction.
    pub(crate) listeners: Vec<Function>,
    /// CircuitBreaker only: `quiet = true` prints nothing.
    pub(crate) quiet: bool,
    /// CircuitBreaker only: `log = function(level, line)` receives the seed's lines instead of
    /// print/warn.
    pub(crate) log: Option<Function>,
}

/// The Lua-only option keys of every class.
const OPTION_KEYS: [&str; 2] = ["clock", "listeners"];
/// ... and of the CircuitBreaker.
const SEED_OPTION_KEYS: [&str; 4] = ["clock", "listeners", "quiet", "log"];

/// Splits a constructor's config table into the SPEC config (JSON) and the Lua-only options.
pub(crate) fn options(config: &Value, class: &str, seed: bool) -> Result<Options, Error> {
    let what = format!("{class} config");
    let bad = |key: &str, expected: &str, got: &Value| {
        Error::InvalidConfig(format!(
            "{what}: {key} must be {expected}, not a {}",
            lua_type(got)
        ))
    };
    let mut opts = Options {
        json: Json::Null,
        clock: None,
        listeners: Vec::new(),
        quiet: false,
        log: None,
    };
    let skip: &[&str] = if seed {
        &SEED_OPTION_KEYS
    } else {
        &OPTION_KEYS
    };
    if let Value::Table(t) = config {
        let get = |key: &str| t.raw_get::<Value>(key).map_err(lua_error);
        match get("clock")? {
            Value::Nil => {}
            Value::UserData(ud) if ud.is::<clock::LuaClock>() => {
                let c = ud.borrow::<clock::LuaClock>().map_err(lua_error)?;
                opts.clock = Some(c.shared());
            }
            other => {
                return Err(bad(
                    "clock",
                    "a clock (agentbreaker.ManualClock.new() or agentbreaker.SystemClock.new())",
                    &other,
                ));
            }
        }
        match get("listeners")? {
            Value::Nil => {}
            Value::Table(list) => {
                let len = list.raw_len();
                if list.pairs::<Value, Value>().count() != len {
                    return Err(Error::InvalidConfig(format!(
                        "{what}: listeners must be a list of functions"
                    )));
                }
                for i in 1..=len {
                    match list.raw_get::<Value>(i).map_err(lua_error)? {
                        Value::Function(f) => opts.listeners.push(f),
                        other => {
                            return Err(bad(&format!("listeners[{i}]"), "a function", &other));
                        }
                    }
                }
            }
            other => return Err(bad("listeners", "a list of functions", &other)),
        }
        if seed {
            match get("quiet")? {
                Value::Nil => {}
                Value::Boolean(b) => opts.quiet = b,
                other => return Err(bad("quiet", "a boolean", &other)),
            }
            match get("log")? {
                Value::Nil => {}
                Value::Function(f) => opts.log = Some(f),
                other => return Err(bad("log", "a function(level, line)", &other)),
            }
        }
    }
    opts.json = convert::to_json_without(config, Ctx::Config, &what, skip)?;
    Ok(opts)
}

/// The listener methods every event source shares.
pub(crate) trait EventSource: Class {
    fn add(&self, listener: Listener) -> ListenerId;
    fn remove(&self, id: ListenerId) -> bool;
    fn errors(&self) -> u64;
}

macro_rules! event_source {
    ($($t:ty),*) => {$(
        impl crate::EventSource for $t {
            fn add(&self, listener: agentbreaker::Listener) -> agentbreaker::ListenerId {
                self.add_listener(listener)
            }
            fn remove(&self, id: agentbreaker::ListenerId) -> bool {
                self.remove_listener(id)
            }
            fn errors(&self) -> u64 {
                self.listener_errors()
            }
        }
    )*};
}
pub(crate) use event_source;

/// Adds the Lua listeners of a constructor's `listeners` option.
pub(crate) fn add_listeners<T: EventSource>(
    lua: &Lua,
    handle: &Handle<T>,
    listeners: Vec<Function>,
) -> Result<(), Error> {
    for f in listeners {
        handle
            .listeners
            .add_event_listener(lua, f, |l| handle.core.add(l))?;
    }
    Ok(())
}

/// Exports `<prefix>_add_listener`, `<prefix>_remove_listener`, `<prefix>_listener_errors`.
pub(crate) fn export_listener_methods<T: EventSource>(
    lua: &Lua,
    raw: &Table,
    names: [&'static str; 3],
) -> mlua::Result<()> {
    export(lua, raw, names[0], |lua, (this_v, f): (Value, Value)| {
        let handle = this::<T>(&this_v, "addListener")?;
        let Value::Function(f) = f else {
            return Err(Error::InvalidArgument(format!(
                "{}.addListener: the listener must be a function, not a {}",
                T::NAME,
                lua_type(&f)
            )));
        };
        let id = handle
            .listeners
            .add_event_listener(lua, f, |l| handle.core.add(l))?;
        ret(lua, id)
    })?;
    export(lua, raw, names[1], |lua, (this_v, id): (Value, Value)| {
        let handle = this::<T>(&this_v, "removeListener")?;
        let id = convert::to_u64(&id, &format!("{}.removeListener: id", T::NAME))?;
        let removed = match handle.listeners.remove(id) {
            Some(core_id) => handle.core.remove(core_id),
            None => false,
        };
        ret(lua, removed)
    })?;
    export(lua, raw, names[2], |lua, (this_v,): (Value,)| {
        let handle = this::<T>(&this_v, "listenerErrors")?;
        ret(lua, handle.core.errors())
    })
}

/// Registry name of the module table: one per Lua state.
const MODULE_KEY: &str = "agentbreaker.module";

/// Registers every raw function, runs the Lua side and returns the module table. Loading the
/// module again in the same Lua state (after `package.loaded.agentbreaker = nil`) returns the same
/// table: objects share one metatable per class, so there is one set of classes per state.
#[mlua::lua_module]
fn agentbreaker(lua: &Lua) -> mlua::Result<Table> {
    if let Ok(Value::Table(module)) = lua.named_registry_value::<Value>(MODULE_KEY) {
        return Ok(module);
    }
    convert::init(lua)?;
    let raw = lua.create_table()?;
    raw.raw_set("null", Value::NULL)?;
    raw.raw_set("object_mt", convert::object_metatable(lua)?)?;
    raw.raw_set("version", env!("CARGO_PKG_VERSION"))?;
    raw.raw_set("plain_event", capi::plain_event_function(lua)?)?;
    raw.raw_set("new_proxy", capi::new_proxy_function(lua)?)?;
    raw.raw_set("set_listened", capi::set_listened_function(lua)?)?;
    raw.raw_set("bind_ingest", capi::bind_ingest_function(lua)?)?;
    raw.raw_set("bind_breaker", capi::bind_breaker_function(lua)?)?;
    raw.raw_set("bind_stagnation", capi::bind_stagnation_function(lua)?)?;
    raw.raw_set("new_budget_cell", capi::new_budget_cell_function(lua)?)?;
    raw.raw_set(
        "new_stagnation_cell",
        capi::new_stagnation_cell_function(lua)?,
    )?;
    clock::export_all(lua, &raw)?;
    failure::export_all(lua, &raw)?;
    stagnation::export_all(lua, &raw)?;
    budget::export_all(lua, &raw)?;
    strategy::export_all(lua, &raw)?;
    agent_loop::export_all(lua, &raw)?;
    env::export_all(lua, &raw)?;
    let prelude = lua
        .load(PRELUDE)
        .set_name("=agentbreaker.lua")
        .into_function()?;
    let (module, metas, seed_log): (Table, Table, Function) = prelude.call(raw)?;
    for pair in metas.pairs::<String, Table>() {
        let (class, meta) = pair?;
        lua.set_named_registry_value(&meta_key(&class), meta)?;
    }
    lua.set_named_registry_value(failure::SEED_LOG_KEY, seed_log)?;
    lua.set_named_registry_value(MODULE_KEY, &module)?;
    Ok(module)
}
