//! The functions of the binding written with the Lua C API, for the hot paths (see
//! `agentbreaker.lua`); this module is the only place of the Lua binding with `unsafe` code.
//! They keep to the C API's rules: they use only stack slots they checked, and no Lua error
//! (raised by a function they call, or the C API's own out-of-memory error) can skip the drop of
//! a Rust value, nor can a panic cross them.
//!
//! - `new_proxy(mt, listened)`: a new userdata with `mt` as its own metatable. A CircuitBreaker
//!   is such a proxy of its Rust object, so that its `__index` can be a table of methods (a
//!   metamethod function on every method call costs more than the rest of the call) while its
//!   fields are still read from its own breaker. Its one byte says whether the breaker may have
//!   Lua listeners (`set_listened`).
//! - `bind_breaker(...)`: a CircuitBreaker's own `recordSuccess` and `shouldAllowOperation`,
//!   which take the common case from the Lua stack straight into the core.
//! - `plain_event(event)`: the quick look at an event that lets `ingest` skip the JSON
//!   conversion. Through mlua's safe API every string or table met on the walk becomes a
//!   reference slot (made and freed again, several hundred instructions each), and a walk in Lua
//!   pays a function call per key (`next`, `type`): either costs more than the pure-Lua peer's
//!   whole `ingest`.
//! - `bind_ingest(...)`: `BudgetBreaker.ingest` itself, which takes the common case (a plain
//!   event, a breaker without Lua listeners) from the Lua stack straight into the core: an mlua
//!   function on the way would cost as much again as the peer's whole `ingest`.

#![allow(unsafe_code)]

use std::cell::RefCell;
use std::os::raw::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};

use agentbreaker::{BudgetBreaker, Error, FailureBreaker};
use mlua::{Function, Lua, ffi};

use crate::{Handle, budget, panic_text};

/// Deepest nesting looked into (deeper values are left to the full conversion).
const PLAIN_DEPTH: usize = 16;

/// `new_proxy(mt, listened)`: a new userdata of one byte (no Rust value, no `__gc`): 1 when
/// `listened` is true, else 0; its metatable is the table `mt`. Nothing for anything else.
pub(crate) fn new_proxy_function(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `new_proxy` is a Lua C function that keeps to the C API's rules (see there).
    unsafe { lua.create_c_function(new_proxy) }
}

unsafe extern "C-unwind" fn new_proxy(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function; it has room for the C function's
    // minimum stack (LUA_MINSTACK slots), of which this uses three. `lua_newuserdata` returns a
    // block of the one byte asked for (or raises Lua's out-of-memory error; nothing here needs
    // dropping).
    unsafe {
        if ffi::lua_type(state, 1) != ffi::LUA_TTABLE {
            return 0;
        }
        let listened = ffi::lua_toboolean(state, 2) != 0;
        ffi::lua_settop(state, 1);
        let flag = ffi::lua_newuserdata(state, 1).cast::<u8>();
        flag.write(u8::from(listened));
        ffi::lua_pushvalue(state, 1);
        ffi::lua_setmetatable(state, 2);
        1
    }
}

/// `set_listened(proxy)`: marks a proxy of `new_proxy` as a breaker that may have Lua listeners
/// (the Lua side calls it for CircuitBreakers only).
pub(crate) fn set_listened_function(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `set_listened` is a Lua C function that keeps to the C API's rules (see there).
    unsafe { lua.create_c_function(set_listened) }
}

unsafe extern "C-unwind" fn set_listened(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: the value is a full userdata of one byte, as `new_proxy` makes them (the binding's
    // other userdata are mlua's, larger); its block is that byte.
    unsafe {
        if ffi::lua_type(state, 1) == ffi::LUA_TUSERDATA && ffi::lua_rawlen(state, 1) == 1 {
            ffi::lua_touserdata(state, 1).cast::<u8>().write(1);
        }
        0
    }
}

/// `bind_breaker(proxy, address, object, class, record_success, should_allow)`: a
/// CircuitBreaker's own `recordSuccess` and `shouldAllowOperation` (see [`record_success`]), C
/// functions with the upvalues below.
pub(crate) fn bind_breaker_function(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `bind_breaker` is a Lua C function that keeps to the C API's rules (see there).
    unsafe { lua.create_c_function(bind_breaker) }
}

/// Upvalues of a breaker's own methods: the proxy the methods belong to, the address of the Rust
/// value of its mlua object (a light userdata; see `failure_new`), that object (which keeps it
/// from being collected), the class table, the method's name, the class's method at the start,
/// the object's metatable at the start (see [`alive`]) and the method's raw function
/// (`failure_record_success_fast` or `failure_should_allow_operation_fast`).
const PROXY: c_int = 1;
const ADDRESS: c_int = 2;
const OBJECT: c_int = 3;
const CLASS: c_int = 4;
const NAME_KEY: c_int = 5;
const CLASS_METHOD: c_int = 6;
const OBJECT_META: c_int = 7;
const BOUND: c_int = 8;

unsafe extern "C-unwind" fn bind_breaker(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function, with room for its minimum stack
    // (LUA_MINSTACK slots; this uses at most sixteen). It may raise Lua's errors (out of memory;
    // `lua_rawget` on a table is raw); nothing here needs dropping.
    unsafe {
        ffi::lua_settop(state, 6);
        if ffi::lua_getmetatable(state, OBJECT) == 0 {
            ffi::lua_pushnil(state);
        }
        for (name, function, bound) in [
            (c"recordSuccess", record_success as ffi::lua_CFunction, 5),
            (c"shouldAllowOperation", should_allow_operation, 6),
        ] {
            for i in 1..=4 {
                ffi::lua_pushvalue(state, i);
            }
            ffi::lua_pushstring(state, name.as_ptr());
            ffi::lua_pushvalue(state, -1);
            ffi::lua_rawget(state, CLASS);
            ffi::lua_pushvalue(state, 7); // the object's metatable
            ffi::lua_pushvalue(state, bound);
            ffi::lua_pushcclosure(state, function, 8);
        }
        2
    }
}

/// How a call of a breaker's own method goes.
enum Own<'a> {
    /// Straight into the core: `self` is the proxy the method belongs to, the class's method is
    /// still the one at the start, and the breaker has no Lua listeners (no listener context to
    /// enter; the proxy's byte says so, see `new_proxy`).
    Core(&'a Handle<FailureBreaker>),
    /// As that, but the breaker may have Lua listeners: through the method's raw function, which
    /// enters the listener context.
    Bound,
    /// Anything else: the class's method.
    Class,
}

unsafe fn own_breaker<'a>(state: *mut ffi::lua_State) -> Own<'a> {
    // SAFETY: `state` is the running state of one of the breaker's own methods (the upvalues of
    // `bind_breaker`), with room for the two values pushed (and popped again). The proxy is a
    // block of one byte (`new_proxy`). The address is that of the Rust value of the object among
    // the upvalues, which keeps the object from being collected; mlua keeps the value in place
    // until it drops it, which the metatable check rules out (see `alive`; the binding never
    // takes or destroys an object itself), and only shared references to it are ever made.
    // (Functions are compared by address.)
    unsafe {
        let up = ffi::lua_upvalueindex;
        let proxy = ffi::lua_touserdata(state, up(PROXY));
        if ffi::lua_touserdata(state, 1) != proxy {
            return Own::Class;
        }
        ffi::lua_pushvalue(state, up(NAME_KEY));
        ffi::lua_rawget(state, up(CLASS));
        let same_method =
            ffi::lua_topointer(state, -1) == ffi::lua_topointer(state, up(CLASS_METHOD));
        ffi::lua_settop(state, -2);
        if !same_method {
            return Own::Class;
        }
        if proxy.cast::<u8>().read() != 0 {
            return Own::Bound;
        }
        let handle = ffi::lua_touserdata(state, up(ADDRESS))
            .cast_const()
            .cast::<Handle<FailureBreaker>>();
        if handle.is_null() || !alive(state, up(OBJECT), up(OBJECT_META)) {
            return Own::Class;
        }
        // (The byte is set with every listener; the object's own record is the last word.)
        if (*handle).listeners.any() {
            return Own::Bound;
        }
        Own::Core(&*handle)
    }
}

/// Any other call of a breaker's own method: the class's method as it is now, with every
/// argument, and its results.
unsafe fn class_method(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the running state of one of the breaker's own methods, with room for
    // the one value pushed; an error of the method passes through (nothing here needs dropping).
    unsafe {
        let n = ffi::lua_gettop(state);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(NAME_KEY));
        ffi::lua_rawget(state, ffi::lua_upvalueindex(CLASS));
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, n, ffi::LUA_MULTRET);
        ffi::lua_gettop(state)
    }
}

/// `cb:recordSuccess()`, a breaker's own: the core's `record_success` straight from the Lua
/// stack in the common case (see [`Own`]).
unsafe extern "C-unwind" fn record_success(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `own_breaker`, `class_method` and `bound`; the Rust work makes no C API call,
    // and a panic is caught and raised as an INTERNAL error (`raise`).
    unsafe {
        let handle = match own_breaker(state) {
            Own::Core(handle) => handle,
            Own::Bound => return bound(state, 0),
            Own::Class => return class_method(state),
        };
        let error = match catch_unwind(AssertUnwindSafe(|| handle.core.record_success())) {
            Ok(()) => return 0,
            Err(panic) => panic_error("failure_record_success", &*panic),
        };
        raise(state, error)
    }
}

/// `cb:shouldAllowOperation()`, a breaker's own: `allowed, message` from the core's
/// `should_allow_operation` straight from the Lua stack in the common case (see [`Own`]).
unsafe extern "C-unwind" fn should_allow_operation(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `own_breaker`, `class_method`, `bound` and `push_text`; the Rust work makes no
    // C API call, and a panic is caught and raised as an INTERNAL error (`raise`).
    unsafe {
        let handle = match own_breaker(state) {
            Own::Core(handle) => handle,
            Own::Bound => return bound(state, 2),
            Own::Class => return class_method(state),
        };
        let error = match catch_unwind(AssertUnwindSafe(|| handle.core.should_allow_operation())) {
            Ok(permission) => {
                ffi::lua_settop(state, 0);
                ffi::lua_pushboolean(state, c_int::from(permission.allowed));
                match permission.message {
                    Some(message) => push_text(state, message),
                    None => ffi::lua_pushnil(state),
                }
                return 2;
            }
            Err(panic) => panic_error("failure_should_allow_operation", &*panic),
        };
        raise(state, error)
    }
}

/// A breaker's own method through its raw function (`failure_*_fast`, called with the breaker's
/// Rust object), which returns `results` values (`allowed, message`) or none, or else the error
/// text (`nil, text` for `shouldAllowOperation`), raised here.
unsafe fn bound(state: *mut ffi::lua_State, results: c_int) -> c_int {
    // SAFETY: `state` is the running state of one of the breaker's own methods, with room for
    // the two values of the call; an error passes through (nothing here needs dropping).
    unsafe {
        ffi::lua_settop(state, 0);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(BOUND));
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(OBJECT));
        ffi::lua_call(state, 1, 2);
        let failed = if results == 0 {
            ffi::lua_type(state, 1) != ffi::LUA_TNIL // the error text, or nil
        } else {
            ffi::lua_type(state, 1) == ffi::LUA_TNIL // allowed, or nil and the error text
        };
        if failed {
            ffi::lua_settop(state, if results == 0 { 1 } else { 2 });
            ffi::lua_error(state);
        }
        ffi::lua_settop(state, results);
        results
    }
}

/// The INTERNAL error of a panic in the raw function `name` (as every raw function reports it).
fn panic_error(name: &str, panic: &(dyn std::any::Any + Send)) -> String {
    Error::Internal(format!("panic in {name}: {}", panic_text(panic))).to_string()
}

thread_local! {
    /// A text on its way onto the Lua stack (see [`push_text`]).
    static TEXT_OUT: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Pushes `text` as a Lua string. The text is first moved out of the caller's frame, so that
/// Lua's out-of-memory error, should `lua_pushlstring` raise it, skips no drop.
unsafe fn push_text(state: *mut ffi::lua_State, text: String) {
    // SAFETY: the string's bytes belong to the thread-local until it is replaced, which only
    // this function does, after the push.
    unsafe {
        let (ptr, len) = TEXT_OUT.with(|out| {
            let mut out = out.borrow_mut();
            *out = text;
            (out.as_ptr(), out.len())
        });
        ffi::lua_pushlstring(state, ptr.cast(), len);
        TEXT_OUT.with(|out| out.borrow_mut().clear());
    }
}

/// Raises `text` as the Lua error (a string, as every error of the module).
unsafe fn raise(state: *mut ffi::lua_State, text: String) -> ! {
    // SAFETY: see `push_text`; nothing is left to drop when `lua_error` unwinds.
    unsafe {
        push_text(state, text);
        ffi::lua_error(state)
    }
}

/// What a plain `tool_use` or `assistant` event holds, as [`walk_event`] finds it.
///
/// Plain: a table without metatable, with string keys only, whose values all certainly convert
/// to JSON (`nil`, `agentbreaker.null`, booleans, strings, finite numbers, and tables without
/// metatable, at most [`PLAIN_DEPTH`] deep, whose keys are all strings or exactly `1..n` and
/// whose values are such values), whose `type` is `"tool_use"` with a string `name` or
/// `"assistant"` with a string `text`, and whose `taskId` is absent, `agentbreaker.null` or a
/// string. Anything else the caller converts whole, which takes it or reports what is wrong.
struct Plain {
    tool_use: bool,
    /// The stack slot of its `name` or `text`.
    payload: c_int,
    /// The stack slot of its `taskId`, when that is a string.
    task_id: Option<c_int>,
}

/// The slots [`walk_event`] fills, from `slots` on: the values under `name`, `text`, `taskId`.
const NAME: c_int = 0;
const TEXT: c_int = 1;
const TASK_ID: c_int = 2;
/// Stack space [`walk_event`] needs above its three slots: a key and a value for the event, two
/// more for each nested table it looks into, and one for a metatable looked at.
const WALK_STACK: c_int = 3 + 2 * PLAIN_DEPTH as c_int;

/// Looks at the event at index `event`. The stack's top must be `slots + 2`, the three slots
/// holding nil, with room for [`WALK_STACK`] more values.
unsafe fn walk_event(state: *mut ffi::lua_State, event: c_int, slots: c_int) -> Option<Plain> {
    // SAFETY: `state` is the running state of a C function, `event` and the slots valid
    // indexes of it, with the stack space the caller checked. Nothing here raises a Lua error:
    // `lua_next` walks tables that nothing modifies meanwhile, and strings are read with
    // `lua_tolstring` only when they are strings, so nothing is converted in place.
    unsafe {
        if ffi::lua_type(state, event) != ffi::LUA_TTABLE || has_metatable(state, event) {
            return None;
        }
        let (key, value) = (slots + 3, slots + 4);
        let mut kind = None;
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, event) != 0 {
            if ffi::lua_type(state, key) != ffi::LUA_TSTRING || !plain_value(state, value, 1) {
                return None;
            }
            let slot = match string_bytes(state, key) {
                b"type" => {
                    if ffi::lua_type(state, value) == ffi::LUA_TSTRING {
                        kind = match string_bytes(state, value) {
                            b"tool_use" => Some(true),
                            b"assistant" => Some(false),
                            _ => None,
                        };
                    }
                    None
                }
                b"name" => Some(slots + NAME),
                b"text" => Some(slots + TEXT),
                b"taskId" => Some(slots + TASK_ID),
                _ => None,
            };
            if let Some(slot) = slot {
                ffi::lua_pushvalue(state, value);
                ffi::lua_replace(state, slot);
            }
            ffi::lua_settop(state, key);
        }
        let tool_use = kind?;
        let payload = slots + if tool_use { NAME } else { TEXT };
        if ffi::lua_type(state, payload) != ffi::LUA_TSTRING {
            return None;
        }
        let task_id = slots + TASK_ID;
        let task_id = match ffi::lua_type(state, task_id) {
            ffi::LUA_TNIL => None,
            ffi::LUA_TLIGHTUSERDATA if ffi::lua_touserdata(state, task_id).is_null() => None,
            ffi::LUA_TSTRING => Some(task_id),
            _ => return None,
        };
        Some(Plain {
            tool_use,
            payload,
            task_id,
        })
    }
}

/// `plain_event(event)`: for a plain `tool_use` or `assistant` event (see [`Plain`]), `1`
/// (tool_use) or `2` (assistant), its `name` or `text`, and its `taskId` when that is a string;
/// nothing for anything else.
pub(crate) fn plain_event_function(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `plain_event` is a Lua C function that keeps to the C API's rules (see there).
    unsafe { lua.create_c_function(plain_event) }
}

unsafe extern "C-unwind" fn plain_event(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function; the stack space `walk_event` needs
    // is checked first, and it raises no error (see there); nothing here needs dropping.
    unsafe {
        ffi::lua_settop(state, 4); // the event, and nil in the three slots
        if ffi::lua_checkstack(state, WALK_STACK) == 0 {
            return 0;
        }
        let Some(plain) = walk_event(state, 1, 2) else {
            return 0;
        };
        ffi::lua_pushinteger(state, if plain.tool_use { 1 } else { 2 });
        ffi::lua_pushvalue(state, plain.payload);
        match plain.task_id {
            Some(task_id) => {
                ffi::lua_pushvalue(state, task_id);
                3
            }
            None => 2,
        }
    }
}

/// `bind_ingest(addresses, slow, take_pending, sample)`: the `BudgetBreaker.ingest` method, a C
/// function with the first three and the metatable of `sample` (a BudgetBreaker: the metatable
/// of them all) as upvalues (see [`ingest`]).
pub(crate) fn bind_ingest_function(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `bind_ingest` is a Lua C function that keeps to the C API's rules (see there).
    unsafe { lua.create_c_function(bind_ingest) }
}

unsafe extern "C-unwind" fn bind_ingest(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function; `lua_pushcclosure` takes the four
    // values as upvalues (it may raise Lua's out-of-memory error; nothing here needs dropping).
    unsafe {
        ffi::lua_settop(state, 4);
        if ffi::lua_getmetatable(state, 4) == 0 {
            ffi::lua_pushnil(state);
        }
        ffi::lua_replace(state, 4);
        ffi::lua_pushcclosure(state, ingest, 4);
        1
    }
}

/// `bb:ingest(event)` with upvalues `addresses` (the address of each BudgetBreaker's Rust value
/// as a light userdata, by object, weakly: see `budget_new`), `slow` (the Lua method that takes
/// every other case), `take_pending` (see [`crate::budget::stash`]) and the BudgetBreakers'
/// metatable (see [`alive`]).
///
/// The hot path whole in one C function: a BudgetBreaker without Lua listeners (no listener
/// context to enter) given a plain event ingests it straight into the core. Anything else goes to
/// `slow`, before anything happened. A halt or an error of the core is left with
/// [`crate::budget::stash`] and `take_pending` makes it the halt table or the error raised.
unsafe extern "C-unwind" fn ingest(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function. Slot 3 holds the light userdata
    // that `budget_new` made from the object in slot 1: the address of the object's Rust value,
    // which mlua keeps in place until it drops it, which `alive` rules out (the binding never
    // takes or destroys an object itself); slot 1 keeps the object from being collected during
    // the call. Nothing but shared references to it are made (the binding never borrows a Handle
    // mutably). The Rust work runs with no C API call in between and every Rust value it makes
    // is dropped or moved into the stash before the next C API call that may raise a Lua error
    // (`lua_call`, `lua_error`), so no error skips a drop. A panic is caught and becomes an
    // INTERNAL error, as in every raw function.
    unsafe {
        ffi::lua_settop(state, 2); // self, event
        if ffi::lua_checkstack(state, 4 + WALK_STACK) == 0 {
            return ingest_slow(state);
        }
        ffi::lua_pushvalue(state, 1);
        ffi::lua_rawget(state, ffi::lua_upvalueindex(1));
        let handle = ffi::lua_touserdata(state, 3)
            .cast_const()
            .cast::<Handle<BudgetBreaker>>();
        if handle.is_null()
            || !alive(state, 1, ffi::lua_upvalueindex(4))
            || (*handle).listeners.any()
        {
            return ingest_slow(state);
        }
        ffi::lua_settop(state, 6); // nil in the three slots of the walk
        let Some(plain) = walk_event(state, 2, 4) else {
            return ingest_slow(state);
        };
        let payload = string_bytes(state, plain.payload);
        let task_id = plain.task_id.map(|slot| string_bytes(state, slot));
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            budget::ingest_plain(&(*handle).core, plain.tool_use, payload, task_id)
        }))
        .unwrap_or_else(|panic| {
            Err(Error::Internal(format!(
                "panic in budget_ingest: {}",
                panic_text(&*panic)
            )))
        });
        if matches!(outcome, Ok(None)) {
            ffi::lua_pushnil(state);
            return 1;
        }
        budget::stash(outcome);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(3));
        ffi::lua_call(state, 0, 2); // halt, error text
        if ffi::lua_type(state, -1) != ffi::LUA_TNIL {
            ffi::lua_error(state);
        }
        ffi::lua_settop(state, -2);
        1
    }
}

/// `slow(self, event)`, its one result returned.
unsafe fn ingest_slow(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by `ingest` with its state, which has room for three values; an error of
    // `slow` passes through (nothing here needs dropping).
    unsafe {
        ffi::lua_settop(state, 2);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, 2, 1);
        1
    }
}

/// Whether the value at (absolute) index `index`, `depth` levels down, certainly converts.
unsafe fn plain_value(state: *mut ffi::lua_State, index: c_int, depth: usize) -> bool {
    // SAFETY: see `walk_event`.
    unsafe {
        match ffi::lua_type(state, index) {
            ffi::LUA_TNIL | ffi::LUA_TBOOLEAN | ffi::LUA_TSTRING => true,
            ffi::LUA_TLIGHTUSERDATA => ffi::lua_touserdata(state, index).is_null(),
            ffi::LUA_TNUMBER => ffi::lua_tonumber(state, index).is_finite(),
            ffi::LUA_TTABLE => depth < PLAIN_DEPTH && plain_table(state, index, depth),
            _ => false,
        }
    }
}

/// [`plain_value`] for a table: no metatable, keys all strings or exactly `1..n`, plain values.
/// Leaves the stack as it found it; uses two slots of the space `walk_event` was given for each
/// level (at most [`PLAIN_DEPTH`]).
unsafe fn plain_table(state: *mut ffi::lua_State, table: c_int, depth: usize) -> bool {
    // SAFETY: see `walk_event`.
    unsafe {
        if has_metatable(state, table) {
            return false;
        }
        let (mut named, mut indexed, mut last) = (false, 0_i64, 0_i64);
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, table) != 0 {
            let value = ffi::lua_gettop(state);
            let key = value - 1;
            let plain = match ffi::lua_type(state, key) {
                ffi::LUA_TSTRING => {
                    named = true;
                    true
                }
                ffi::LUA_TNUMBER => {
                    // Indexes as the full conversion reads them: whole numbers (below 9e15).
                    let n = ffi::lua_tonumber(state, key);
                    let index = n >= 1.0 && n.fract() == 0.0 && n < 9.0e15;
                    if index {
                        indexed += 1;
                        last = last.max(n as i64);
                    }
                    index
                }
                _ => false,
            };
            if !(plain && plain_value(state, value, depth + 1)) {
                ffi::lua_settop(state, key - 1);
                return false;
            }
            ffi::lua_settop(state, key);
        }
        // Named keys only (an object), or exactly 1..n (a list; the keys are distinct).
        !(named && indexed > 0) && last == indexed
    }
}

/// Whether the mlua object at `index` still holds its Rust value: whether its metatable is
/// still the one of its type (`type_meta`; tables compared by address). When mlua drops the value (its `__gc`), it gives the
/// object another metatable; the object can still be reached after that when a finalizer of the
/// program's brings it back.
unsafe fn alive(state: *mut ffi::lua_State, index: c_int, type_meta: c_int) -> bool {
    // SAFETY: `lua_getmetatable` pushes at most one value (within the caller's checked space).
    unsafe {
        if ffi::lua_getmetatable(state, index) == 0 {
            return false;
        }
        let same = ffi::lua_topointer(state, -1) == ffi::lua_topointer(state, type_meta);
        ffi::lua_settop(state, -2);
        same
    }
}

/// Whether the value at `index` has a metatable (pushed by `lua_getmetatable`, popped again).
unsafe fn has_metatable(state: *mut ffi::lua_State, index: c_int) -> bool {
    // SAFETY: see `walk_event`.
    unsafe {
        if ffi::lua_getmetatable(state, index) != 0 {
            ffi::lua_settop(state, -2);
            true
        } else {
            false
        }
    }
}

/// The bytes of the string at `index` (valid while it stays on the stack).
unsafe fn string_bytes<'a>(state: *mut ffi::lua_State, index: c_int) -> &'a [u8] {
    // SAFETY: the caller checked that the value is a string, so `lua_tolstring` does not
    // convert anything and returns its bytes and length.
    unsafe {
        let mut len = 0;
        let ptr = ffi::lua_tolstring(state, index, &mut len);
        if ptr.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(ptr.cast::<u8>(), len)
        }
    }
}
