//! The C fast paths of the hot methods, written with the Lua C API: through an mlua function
//! and a Lua method, each of these calls cost several times what its pure-Lua peer does, and
//! the goals of docs/benchmarks.md (Lua 5.4) need them. Each takes the common case (`self` a
//! breaker without Lua listeners) straight from the Lua stack into the core, reading its
//! argument with the binding's one walker (`convert::walk`) and the core's parser, and hands
//! every other case, before anything happened, to the checked method behind it (the class's
//! method, which calls the raw function of the same name):
//!
//! - CircuitBreaker `recordSuccess` + `shouldAllowOperation` (goal >= 0.5x seed 004's pure-Lua
//!   breaker): 1 468 instructions per pair before this rewrite; an mlua function each costs
//!   about 3x the seed's pair.
//! - StagnationBreaker `recordProgress` + `check` (goal: faster than the pure-Lua peer).
//! - BudgetBreaker `ingest` (goal: faster than the pure-Lua peer).
//!
//! A breaker of these classes is a *cell*: a userdata block made here holding a reference of its
//! own to the core breaker (`Arc::into_raw`, released by its `__gc`) and whether it may have Lua
//! listeners (a listener needs the context that the raw functions enter). The Lua side keeps the
//! mlua object behind each cell for the other methods. A cell whose `__gc` ran (a finalizer of
//! the program's can bring it back) has a null reference and its calls take the checked way,
//! which reports it.
//!
//! The functions keep to the C API's rules: they use only stack slots they checked (or the
//! LUA_MINSTACK slots every C function gets), and no Lua error (raised by a function they call,
//! or the C API's out-of-memory error) can skip the drop of a Rust value, nor can a panic cross
//! them (`interop::catch`).

#![allow(unsafe_code)]

use std::cell::RefCell;
use std::os::raw::c_int;
use std::sync::Arc;

use agentbreaker::interop::{ArgKind, catch};
use agentbreaker::{
    BudgetBreaker, Error, FailureBreaker, Halt, IterationMetrics, StagnationBreaker, State,
};
use mlua::{Lua, Table, Value, ffi};

use crate::{Handle, convert};

/// A breaker's cell (see the module's documentation).
#[repr(C)]
struct Cell<T> {
    /// The class's [`Hot::MAGIC`]: the block is a cell of this class.
    magic: u64,
    /// 1 when the breaker may have Lua listeners (set at the start, and by `set_listened`).
    listened: u8,
    /// The core breaker (a reference of the cell's own); null once the `__gc` released it.
    core: *const T,
}

/// The classes with cells.
trait Hot: Sized + 'static {
    const MAGIC: u64;
}
impl Hot for FailureBreaker {
    const MAGIC: u64 = 0x6162_6365_6c6c_6362; // "abcellcb"
}
impl Hot for StagnationBreaker {
    const MAGIC: u64 = 0x6162_6365_6c6c_7362; // "abcellsb"
}
impl Hot for BudgetBreaker {
    const MAGIC: u64 = 0x6162_6365_6c6c_6262; // "abcellbb"
}

/// The hot methods, by the number `bind` takes (1-based).
const HOT: [ffi::lua_CFunction; 5] = [
    record_success,
    should_allow_operation,
    record_progress,
    stagnation_check,
    ingest,
];

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    // SAFETY: each is a Lua C function that keeps to the C API's rules (see there).
    unsafe {
        raw.raw_set("bind", lua.create_c_function(bind)?)?;
        raw.raw_set("set_listened", lua.create_c_function(set_listened)?)?;
        raw.raw_set(
            "new_cb_cell",
            lua.create_c_function(new_cell::<FailureBreaker>)?,
        )?;
        raw.raw_set(
            "new_sb_cell",
            lua.create_c_function(new_cell::<StagnationBreaker>)?,
        )?;
        raw.raw_set(
            "new_bb_cell",
            lua.create_c_function(new_cell::<BudgetBreaker>)?,
        )?;
    }
    // The halt an `ingest` left (see `ingest`), as a table.
    let take_halt =
        lua.create_function(|lua, ()| match PENDING.with(|p| p.borrow_mut().take()) {
            Some(halt) => convert::result_to_lua(lua, &halt).map_err(mlua::Error::external),
            None => Ok(Value::Nil),
        })?;
    raw.raw_set("take_halt", take_halt)
}

/// `bind(n, upvalues...)`: hot method `n` of [`HOT`] as a C closure with the upvalues given.
unsafe extern "C-unwind" fn bind(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: the upvalues are the arguments above the first; `lua_pushcclosure` pops them (it
    // may raise Lua's out-of-memory error; nothing here needs dropping).
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

/// `new_cell(address, listened, metatable)`: the cell of the breaker whose Rust object is at
/// `address` (a light userdata its constructor returned with the object, which the caller
/// holds), with `metatable` (given a `__gc`); nothing for anything else.
unsafe extern "C-unwind" fn new_cell<T: Hot>(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: the address is that of a `Handle<T>` mlua keeps in place while its object lives.
    // The `__gc` is set first and the block written whole, with its reference, before the
    // metatable is set (which allocates nothing): a Lua error on the way (out of memory) leaves
    // nothing to drop, and Lua 5.4 finalizes only objects whose metatable had a `__gc` when set.
    unsafe {
        ffi::lua_settop(state, 3);
        let handle = ffi::lua_touserdata(state, 1)
            .cast_const()
            .cast::<Handle<T>>();
        if ffi::lua_type(state, 1) != ffi::LUA_TLIGHTUSERDATA
            || handle.is_null()
            || ffi::lua_type(state, 3) != ffi::LUA_TTABLE
        {
            return 0;
        }
        ffi::lua_pushcfunction(state, cell_gc::<T>);
        ffi::lua_setfield(state, 3, c"__gc".as_ptr());
        let cell = ffi::lua_newuserdata(state, size_of::<Cell<T>>()).cast::<Cell<T>>();
        cell.write(Cell {
            magic: T::MAGIC,
            listened: u8::from(ffi::lua_toboolean(state, 2) != 0),
            core: Arc::into_raw(Arc::clone(&(*handle).core)),
        });
        ffi::lua_pushvalue(state, 3);
        ffi::lua_setmetatable(state, -2);
        1
    }
}

/// The cell of class `T` at `index`, if the value there is one.
unsafe fn cell_at<T: Hot>(state: *mut ffi::lua_State, index: c_int) -> Option<*mut Cell<T>> {
    // SAFETY: a full userdata's block has `lua_rawlen` bytes; one of a cell's size starting with
    // the class's magic number is such a cell (mlua's userdata begin with a Rust value of
    // theirs, never that number).
    unsafe {
        if ffi::lua_type(state, index) != ffi::LUA_TUSERDATA
            || ffi::lua_rawlen(state, index) != size_of::<Cell<T>>()
        {
            return None;
        }
        let cell = ffi::lua_touserdata(state, index).cast::<Cell<T>>();
        ((*cell).magic == T::MAGIC).then_some(cell)
    }
}

/// The core breaker of the cell at `index` when a call can go straight into it: a cell of class
/// `T` that still holds its reference, of a breaker without Lua listeners.
unsafe fn hot<'a, T: Hot>(state: *mut ffi::lua_State, index: c_int) -> Option<&'a T> {
    // SAFETY: the cell is on the stack for the rest of the call, and with it its reference,
    // which only its `__gc` releases. Only shared references to the breaker are made.
    unsafe {
        let cell = &*cell_at::<T>(state, index)?;
        if cell.listened != 0 {
            return None;
        }
        cell.core.as_ref()
    }
}

/// A cell's `__gc`: releases its reference to the core breaker.
unsafe extern "C-unwind" fn cell_gc<T: Hot>(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `cell_at`; the pointer came from `Arc::into_raw` and is released once (it is
    // nulled first). The breaker holds its Lua listeners only as registry keys. A panic is
    // caught: nothing can be reported from a finalizer.
    unsafe {
        if let Some(cell) = cell_at::<T>(state, 1) {
            let core = std::mem::replace(&mut (*cell).core, std::ptr::null());
            if !core.is_null() {
                let _ = catch(|| Ok(drop(Arc::from_raw(core))));
            }
        }
        0
    }
}

/// `set_listened(cell)`: marks the cell of a breaker given a Lua listener.
unsafe extern "C-unwind" fn set_listened(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `cell_at`; only the byte is written.
    unsafe {
        if let Some(cell) = cell_at::<FailureBreaker>(state, 1) {
            (*cell).listened = 1;
        } else if let Some(cell) = cell_at::<StagnationBreaker>(state, 1) {
            (*cell).listened = 1;
        } else if let Some(cell) = cell_at::<BudgetBreaker>(state, 1) {
            (*cell).listened = 1;
        }
        0
    }
}

/// Calls the function on top of the stack with every argument below it; returns its results.
unsafe fn call_on_top(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: the caller's state holds the arguments and the function; an error of the function
    // passes through (nothing here needs dropping).
    unsafe {
        let arguments = ffi::lua_gettop(state) - 1;
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, arguments, ffi::LUA_MULTRET);
        ffi::lua_gettop(state)
    }
}

/// Every other case of a StagnationBreaker or BudgetBreaker method: its checked method
/// (upvalue 1) with every argument.
unsafe fn checked(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: one value pushed, within LUA_MINSTACK.
    unsafe {
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        call_on_top(state)
    }
}

/// The CircuitBreaker methods' upvalues: the class table, the method's name and the class's
/// method at the start (the checked one). Code may replace a class's method; the breakers'
/// own methods (in each breaker's `__index` table, see `agentbreaker.lua`) then call that.
const CLASS: c_int = 1;
const NAME: c_int = 2;
const ORIGINAL: c_int = 3;

/// The CircuitBreaker at slot 1 when the call can go straight into the core: the class's method
/// is still the original, and `self` is a breaker without Lua listeners. Else `None`, with the
/// class's method as it is now pushed (the one to call instead).
unsafe fn own_breaker<'a>(state: *mut ffi::lua_State) -> Option<&'a FailureBreaker> {
    // SAFETY: one value pushed, within LUA_MINSTACK; `lua_rawget` runs no metamethod.
    unsafe {
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(NAME));
        ffi::lua_rawget(state, ffi::lua_upvalueindex(CLASS));
        if ffi::lua_rawequal(state, -1, ffi::lua_upvalueindex(ORIGINAL)) != 0 {
            if let Some(breaker) = hot::<FailureBreaker>(state, 1) {
                ffi::lua_settop(state, -2);
                return Some(breaker);
            }
        }
        None
    }
}

/// `cb:recordSuccess()`.
unsafe extern "C-unwind" fn record_success(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `own_breaker` and `raise`; the Rust work makes no C API call.
    unsafe {
        let Some(breaker) = own_breaker(state) else {
            return call_on_top(state);
        };
        match catch(|| Ok(breaker.record_success())) {
            Ok(()) => 0,
            Err(e) => raise(state, e),
        }
    }
}

/// `cb:shouldAllowOperation()`: `allowed, message` (a refusal is data, not an error).
unsafe extern "C-unwind" fn should_allow_operation(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `own_breaker`, `push_text` and `raise`; the two results are pushed within
    // LUA_MINSTACK.
    unsafe {
        let Some(breaker) = own_breaker(state) else {
            return call_on_top(state);
        };
        match catch(|| Ok(breaker.should_allow_operation())) {
            Ok(permission) => {
                ffi::lua_pushboolean(state, c_int::from(permission.allowed));
                match permission.message {
                    Some(message) => push_text(state, message),
                    None => ffi::lua_pushnil(state),
                }
                2
            }
            Err(e) => raise(state, e),
        }
    }
}

/// `sb:recordProgress(metrics)`, upvalue 1 the checked method.
unsafe extern "C-unwind" fn record_progress(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `hot`, `convert::walk` (it raises no error) and `raise`.
    unsafe {
        let Some(breaker) = hot::<StagnationBreaker>(state, 1) else {
            return checked(state);
        };
        ffi::lua_settop(state, 2);
        let outcome = catch(|| {
            let metrics = convert::walk(state, 2, "iteration metrics", ArgKind::Argument, &[])?;
            breaker.record_progress(IterationMetrics::from_json(&metrics)?);
            Ok(())
        });
        match outcome {
            Ok(()) => 0,
            Err(e) => raise(state, e),
        }
    }
}

/// `sb:check()`, upvalue 1 the checked method, 2 the metatable of result objects. The result
/// table is made here: through the checked method (an mlua function and a JSON value) the pair
/// `recordProgress` + `check` cost about as much as the pure-Lua peer's.
unsafe extern "C-unwind" fn stagnation_check(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `hot`, `push_text` and `raise`; the decision's reason is on the Lua stack (or
    // dropped) before the calls that may raise Lua's out-of-memory error; four values pushed.
    unsafe {
        let Some(breaker) = hot::<StagnationBreaker>(state, 1) else {
            return checked(state);
        };
        let decision = match catch(|| Ok(breaker.check())) {
            Ok(decision) => decision,
            Err(e) => raise(state, e),
        };
        let state_name = match decision.state {
            State::Closed => c"CLOSED",
            State::HalfOpen => c"HALF_OPEN",
            State::Open => c"OPEN",
        };
        let allow = c_int::from(decision.allow_continue);
        let reason = decision
            .reason
            .map(|reason| push_text(state, reason))
            .is_some();
        ffi::lua_createtable(state, 0, 3);
        ffi::lua_pushboolean(state, allow);
        ffi::lua_setfield(state, -2, c"allowContinue".as_ptr());
        ffi::lua_pushstring(state, state_name.as_ptr());
        ffi::lua_setfield(state, -2, c"state".as_ptr());
        if reason {
            ffi::lua_pushvalue(state, -2);
            ffi::lua_setfield(state, -2, c"reason".as_ptr());
        }
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
        ffi::lua_setmetatable(state, -2);
        1
    }
}

thread_local! {
    /// The halt of an `ingest`, until `take_halt` makes it a table.
    static PENDING: RefCell<Option<Halt>> = const { RefCell::new(None) };
}

/// `bb:ingest(event)`, upvalue 1 the checked method, 2 `take_halt`: the halt table or nil.
unsafe extern "C-unwind" fn ingest(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `hot`, `convert::walk` and `raise`; the halt is moved into `PENDING` before
    // `take_halt` is called (an mlua function, whose errors pass through).
    unsafe {
        let Some(breaker) = hot::<BudgetBreaker>(state, 1) else {
            return checked(state);
        };
        ffi::lua_settop(state, 2);
        let outcome =
            catch(|| breaker.ingest(&convert::walk(state, 2, "event", ArgKind::Event, &[])?));
        match outcome {
            Ok(None) => ffi::lua_pushnil(state),
            Ok(Some(halt)) => {
                PENDING.with(|p| *p.borrow_mut() = Some(halt));
                ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
                ffi::lua_call(state, 0, 1);
            }
            Err(e) => raise(state, e),
        }
        1
    }
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

/// Raises the error as Lua sees every error of the module: its `"CODE: message"` string.
unsafe fn raise(state: *mut ffi::lua_State, error: Error) -> ! {
    // SAFETY: see `push_text`; nothing is left to drop when `lua_error` unwinds.
    let text = error.to_string();
    drop(error);
    unsafe {
        push_text(state, text);
        ffi::lua_error(state)
    }
}
