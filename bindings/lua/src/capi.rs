//! The C fast paths of the hot methods, written with the Lua C API: the goals of
//! docs/benchmarks.md (Lua 5.4) need them, because through a Lua method and an mlua function a
//! call costs several times what the pure-Lua peers pay for the same work. Each takes the common
//! case (`self` a breaker without Lua listeners) from the Lua stack straight into the core,
//! reading its argument with the one walker (`convert::walk`) and the core's parser; every other
//! case goes, before anything happened, to the checked method behind it (the class's, which calls
//! its raw function). The halt of `ingest` is the core's JSON, pushed as the checked method
//! returns it (`convert::push_marked`). Instructions per call (callgrind, Lua 5.4, measured
//! before issue 21; the peer's in brackets): `recordSuccess` + `shouldAllowOperation` 1 551
//! (seed 004: 1 349), `recordProgress` + `check` 7 378 (11 430), `ingest(tool_use)` 7 454
//! (11 786); a checked method costs 4 000 to 7 500 more.
//!
//! A breaker of these classes is a *cell*: a userdata block with a reference of its own to the
//! core breaker (`Arc::into_raw`, released by its `__gc`) and whether it may have Lua listeners
//! (whose calls need the context the raw functions enter). A cell whose `__gc` ran (a finalizer
//! can bring it back) has a null reference, and its calls take the checked way, which reports it.
//! The functions use only the stack slots they checked (or LUA_MINSTACK); no Lua error (of a
//! function they call, or out of memory) skips the drop of a Rust value; no panic crosses them.

#![allow(unsafe_code)]

use std::cell::RefCell;
use std::os::raw::c_int;
use std::sync::Arc;

use agentbreaker::interop::{ArgKind, catch};
use agentbreaker::{BudgetBreaker, Error, FailureBreaker, IterationMetrics, StagnationBreaker};
use mlua::{AnyUserData, Lua, Table, ffi};
use serde_json::Value as Json;

use crate::convert::lua_error;
use crate::{Class, convert};

/// A breaker's cell (see the module's documentation).
#[repr(C)]
struct Cell {
    /// The class's [`Class::MAGIC`].
    magic: u64,
    /// 1 when the breaker may have Lua listeners.
    listened: u8,
    /// The core breaker (a `T` of that class); null once the `__gc` released it.
    core: *const (),
}

/// The magic numbers of the cells of each class: "abcellcb", "abcellsb", "abcellbb".
pub(crate) const MAGICS: [u64; 3] = [
    0x6162_6365_6c6c_6362,
    0x6162_6365_6c6c_7362,
    0x6162_6365_6c6c_6262,
];

/// The hot methods, by the number `bind` takes (1-based).
const HOT: [ffi::lua_CFunction; 5] = [
    record_success,
    should_allow_operation,
    record_progress,
    stagnation_check,
    ingest,
];

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    // SAFETY: both are Lua C functions that keep to the C API's rules (see there).
    unsafe {
        raw.raw_set("bind", lua.create_c_function(bind)?)?;
        raw.raw_set("set_listened", lua.create_c_function(set_listened)?)
    }
}

/// A new cell of `core`, with `metatable` (given the cell's `__gc`).
pub(crate) fn new_cell<T: Class>(
    lua: &Lua,
    core: &Arc<T>,
    listened: bool,
    metatable: &Table,
) -> Result<AnyUserData, Error> {
    // SAFETY: `exec_raw` runs this with the metatable on the stack, in protected mode. The
    // `__gc` is set first, and the block written whole (its reference taken) right after it is
    // made, before the metatable is set (which allocates nothing): a Lua error on the way (out of
    // memory) leaves nothing to drop, and Lua 5.4 finalizes only objects whose metatable had a
    // `__gc` when it was set.
    let made = unsafe {
        lua.exec_raw(metatable, |state| {
            ffi::lua_pushcfunction(state, cell_gc::<T>);
            ffi::lua_setfield(state, -2, c"__gc".as_ptr());
            let cell = ffi::lua_newuserdata(state, size_of::<Cell>()).cast::<Cell>();
            let core = Arc::into_raw(Arc::clone(core)).cast();
            let listened = u8::from(listened);
            cell.write(Cell {
                magic: T::MAGIC,
                listened,
                core,
            });
            ffi::lua_rotate(state, -2, 1);
            ffi::lua_setmetatable(state, -2);
        })
    };
    made.map_err(lua_error)
}

/// `bind(n, upvalues...)`: hot method `n` of [`HOT`], a C closure with the upvalues given.
unsafe extern "C-unwind" fn bind(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `lua_pushcclosure` pops the upvalues (it may raise Lua's out-of-memory error;
    // nothing here needs dropping).
    unsafe {
        let n = ffi::lua_gettop(state);
        let which = ffi::lua_tonumber(state, 1) as usize;
        let Some(&function) = HOT.get(which.wrapping_sub(1)) else {
            return 0;
        };
        ffi::lua_pushcclosure(state, function, n - 1);
        1
    }
}

/// The cell at `index`, if the value there is one.
unsafe fn cell_at(state: *mut ffi::lua_State, index: c_int) -> Option<*mut Cell> {
    // SAFETY: a full userdata's block has `lua_rawlen` bytes; one of a cell's size beginning
    // with a cell's magic number is a cell (mlua's begin with a Rust value of theirs).
    unsafe {
        if ffi::lua_type(state, index) != ffi::LUA_TUSERDATA
            || ffi::lua_rawlen(state, index) != size_of::<Cell>()
        {
            return None;
        }
        let cell = ffi::lua_touserdata(state, index).cast::<Cell>();
        MAGICS.contains(&(*cell).magic).then_some(cell)
    }
}

/// The core breaker of the cell at `index` when a call can go straight into it: a cell of class
/// `T` that still holds its reference, of a breaker without Lua listeners.
unsafe fn hot<'a, T: Class>(state: *mut ffi::lua_State, index: c_int) -> Option<&'a T> {
    // SAFETY: the cell is on the stack for the rest of the call, and with it its reference,
    // which only its `__gc` releases. Only shared references to the breaker are made.
    unsafe {
        let cell = &*cell_at(state, index)?;
        if cell.magic != T::MAGIC || cell.listened != 0 {
            return None;
        }
        cell.core.cast::<T>().as_ref()
    }
}

/// A cell's `__gc`: releases its reference to the core breaker (once: it is nulled first).
unsafe extern "C-unwind" fn cell_gc<T: Class>(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `cell_at`; the pointer came from `Arc::<T>::into_raw` (the magic says `T`). A
    // panic is caught: nothing can be reported from a finalizer.
    unsafe {
        if let Some(cell) = cell_at(state, 1).filter(|cell| (**cell).magic == T::MAGIC) {
            let core = std::mem::replace(&mut (*cell).core, std::ptr::null()).cast::<T>();
            if !core.is_null() {
                let _ = catch(|| {
                    drop(Arc::from_raw(core));
                    Ok(())
                });
            }
        }
        0
    }
}

/// `set_listened(cell)`: marks the cell of a breaker given a Lua listener.
unsafe extern "C-unwind" fn set_listened(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `cell_at`; only the byte is written.
    unsafe {
        if let Some(cell) = cell_at(state, 1) {
            (*cell).listened = 1;
        }
        0
    }
}

/// Calls the function on top of the stack with every argument below it; returns its results.
unsafe fn call_on_top(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: an error of the function passes through (nothing here needs dropping).
    unsafe {
        let arguments = ffi::lua_gettop(state) - 1;
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, arguments, ffi::LUA_MULTRET);
        ffi::lua_gettop(state)
    }
}

/// Every other call of a StagnationBreaker or BudgetBreaker hot method: the checked method
/// (upvalue 1) with every argument.
unsafe fn checked(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: one value pushed, within LUA_MINSTACK.
    unsafe {
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        call_on_top(state)
    }
}

/// The CircuitBreaker at slot 1 when the call can go straight into the core: the class's method
/// is still the original, and `self` a breaker without Lua listeners. Else `None`, with the
/// class's method as it is now pushed, to be called instead. The upvalues: the class table, the
/// method's name and the class's method at the start (code may replace a class's method; each
/// breaker's own methods, see `agentbreaker.lua`, must then call the new one).
unsafe fn own_breaker<'a>(state: *mut ffi::lua_State) -> Option<&'a FailureBreaker> {
    // SAFETY: one value pushed, within LUA_MINSTACK; `lua_rawget` runs no metamethod.
    unsafe {
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
        ffi::lua_rawget(state, ffi::lua_upvalueindex(1));
        if ffi::lua_rawequal(state, -1, ffi::lua_upvalueindex(3)) == 0 {
            return None;
        }
        let breaker = hot::<FailureBreaker>(state, 1)?;
        ffi::lua_settop(state, -2);
        Some(breaker)
    }
}

/// `cb:recordSuccess()`.
unsafe extern "C-unwind" fn record_success(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `own_breaker` and `raise`.
    unsafe {
        let Some(breaker) = own_breaker(state) else {
            return call_on_top(state);
        };
        or_raise(state, || {
            breaker.record_success();
            Ok(0)
        })
    }
}

/// `cb:shouldAllowOperation()`: `allowed, message` (a refusal is data, not an error).
unsafe extern "C-unwind" fn should_allow_operation(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `own_breaker`, `push_out` and `raise`; two values pushed.
    unsafe {
        let Some(breaker) = own_breaker(state) else {
            return call_on_top(state);
        };
        let permission = or_raise(state, || Ok(breaker.should_allow_operation()));
        ffi::lua_pushboolean(state, c_int::from(permission.allowed));
        match permission.message {
            Some(message) => push_out(state, Json::String(message)),
            None => ffi::lua_pushnil(state),
        }
        2
    }
}

/// `sb:recordProgress(metrics)`.
unsafe extern "C-unwind" fn record_progress(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `hot`, `convert::walk` (which raises no error) and `raise`.
    unsafe {
        let Some(breaker) = hot::<StagnationBreaker>(state, 1) else {
            return checked(state);
        };
        ffi::lua_settop(state, 2);
        or_raise(state, || {
            let metrics = convert::walk(state, 2, "iteration metrics", ArgKind::Argument, &[])?;
            breaker.record_progress(IterationMetrics::from_json(&metrics)?);
            Ok(0)
        })
    }
}

/// `sb:check()`, upvalue 2 the metatable of result objects. The table is made here: through
/// the core's JSON (`convert::push_marked`) a check cost 200 ns more on Lua 5.4 (the JSON
/// object's keys and strings made and hashed), and the pair fell below its goal
/// (docs/benchmarks.md). Its fields are those of the core's `StagnationDecision`.
unsafe extern "C-unwind" fn stagnation_check(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `hot`, `push_out` and `raise`; the reason is on the Lua stack (or dropped)
    // before the calls that may raise Lua's out-of-memory error; four values pushed.
    unsafe {
        let Some(breaker) = hot::<StagnationBreaker>(state, 1) else {
            return checked(state);
        };
        let decision = or_raise(state, || Ok(breaker.check()));
        let allow = c_int::from(decision.allow_continue);
        let reason = decision
            .reason
            .map(|reason| push_out(state, Json::String(reason)));
        ffi::lua_createtable(state, 0, 4);
        ffi::lua_pushboolean(state, allow);
        ffi::lua_setfield(state, -2, c"allowContinue".as_ptr());
        let name = decision.state.as_str(); // static, as the slug below
        ffi::lua_pushlstring(state, name.as_ptr().cast(), name.len());
        ffi::lua_setfield(state, -2, c"state".as_ptr());
        if reason.is_some() {
            ffi::lua_rotate(state, -2, 1);
            ffi::lua_setfield(state, -2, c"reason".as_ptr());
        }
        if let Some(slug) = decision.slug {
            // A static string: nothing of Rust's is left to drop if pushing it raises.
            ffi::lua_pushlstring(state, slug.as_ptr().cast(), slug.len());
            ffi::lua_setfield(state, -2, c"slug".as_ptr());
        }
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
        ffi::lua_setmetatable(state, -2);
        1
    }
}

/// `bb:ingest(event)`: the halt table or nil.
unsafe extern "C-unwind" fn ingest(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `hot`, `convert::walk`, `push_out` and `raise`.
    unsafe {
        let Some(breaker) = hot::<BudgetBreaker>(state, 1) else {
            return checked(state);
        };
        ffi::lua_settop(state, 2);
        let event = |state| convert::walk(state, 2, "event", ArgKind::Event, &[]);
        let halt = or_raise(state, || convert::json(&breaker.ingest(&event(state)?)?));
        push_out(state, halt);
        1
    }
}

thread_local! {
    /// A value on its way onto the Lua stack (see [`push_out`]).
    static OUT: RefCell<Json> = const { RefCell::new(Json::Null) };
}

/// Pushes `value` (`convert::push_marked`). The value is first moved out of the caller's frame,
/// so that Lua's out-of-memory error, should a push raise it, skips no drop.
unsafe fn push_out(state: *mut ffi::lua_State, value: Json) {
    // SAFETY: the value belongs to the thread-local until it is replaced, which only this
    // function does, after the push (which calls no Lua code).
    unsafe {
        let out = OUT.with(|out| {
            *out.borrow_mut() = value;
            out.as_ptr()
        });
        convert::push_marked(state, &*out);
        OUT.with(|out| *out.borrow_mut() = Json::Null);
    }
}

/// The result of `work`, run inside the panic boundary; its error (or panic) raised.
unsafe fn or_raise<R>(state: *mut ffi::lua_State, work: impl FnOnce() -> Result<R, Error>) -> R {
    match catch(work) {
        Ok(result) => result,
        // SAFETY: see `raise`; `work` is gone, only the error is left, which `raise` takes.
        Err(e) => unsafe { raise(state, e) },
    }
}

/// Raises the error as Lua sees every error of the module: its `"CODE: message"` string.
unsafe fn raise(state: *mut ffi::lua_State, error: Error) -> ! {
    let text = error.to_string();
    drop(error);
    // SAFETY: see `push_out`; nothing is left to drop when `lua_error` unwinds.
    unsafe {
        push_out(state, Json::String(text));
        ffi::lua_error(state)
    }
}
