//! The functions of the binding written with the Lua C API, for the hot paths (see
//! `agentbreaker.lua`); this module is the only place of the Lua binding with `unsafe` code.
//! They keep to the C API's rules: they use only stack slots they checked, and no Lua error
//! (raised by a function they call, or the C API's own out-of-memory error) can skip the drop of
//! a Rust value, nor can a panic cross them.
//!
//! The hot paths never touch an mlua object: each breaker has a block of its own (a userdata
//! made here) holding a reference to its core breaker (`Arc::into_raw`, released by the block's
//! `__gc`) and a byte saying whether it may have Lua listeners. A call reads that block, so it
//! needs no address lookup and no check that mlua still holds the object's value; a block whose
//! `__gc` ran (a finalizer of the program's can bring it back) has a null reference and the call
//! goes the slow way, which reports it.
//!
//! - `new_proxy(mt, listened)`: a new [`Proxy`] with `mt` as its own metatable. A CircuitBreaker
//!   is such a proxy of its Rust object, so that its `__index` can be a table of methods (a
//!   metamethod function on every method call costs more than the rest of the call) while its
//!   fields are still read from its own breaker.
//! - `bind_breaker(...)`: a CircuitBreaker's own `recordSuccess` and `shouldAllowOperation`,
//!   which take the common case from the Lua stack straight into the core.
//! - `new_budget_cell` / `new_stagnation_cell`: the [`Cell`] of a BudgetBreaker or
//!   StagnationBreaker, kept by object in a weak table of the Lua side's; `set_listened` marks a
//!   proxy or a cell when a listener is added.
//! - `plain_event(event)`: the quick look at an event that lets `ingest` skip the JSON
//!   conversion. Through mlua's safe API every string or table met on the walk becomes a
//!   reference slot (made and freed again, several hundred instructions each), and a walk in Lua
//!   pays a function call per key (`next`, `type`): either costs more than the pure-Lua peer's
//!   whole `ingest`.
//! - `bind_ingest(...)`: `BudgetBreaker.ingest` itself, which takes the common case (a plain
//!   event, a breaker without Lua listeners) from the Lua stack straight into the core: an mlua
//!   function on the way would cost as much again as the peer's whole `ingest`.
//! - `bind_stagnation(...)`: `StagnationBreaker.recordProgress` (a plain metrics table) and
//!   `.check` (its result table built here), the same way.

#![allow(unsafe_code)]

use std::cell::RefCell;
use std::os::raw::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use agentbreaker::{
    BudgetBreaker, Error, FailureBreaker, IterationMetrics, StagnationBreaker, State,
};
use mlua::{Function, Lua, ffi};

use crate::{Handle, budget, convert, panic_text};

/// Deepest nesting looked into (deeper values are left to the full conversion).
const PLAIN_DEPTH: usize = 16;

/// A CircuitBreaker's proxy: a userdata block of the Lua state's, made by `new_proxy`, filled
/// in by `bind_breaker`, emptied by its `__gc` (`proxy_gc`). Its own methods read it on each
/// call (see [`own_breaker`]).
#[repr(C)]
struct Proxy {
    /// [`PROXY_MAGIC`]: the block is a proxy (`proxy_at` checks it).
    magic: u64,
    /// 1 when the breaker may have Lua listeners, else 0: set at the start when it has some
    /// (`new_proxy`) and by `set_listened`, which the Lua side calls with every listener added.
    listened: u8,
    /// The core breaker, a reference of the proxy's own to it (`Arc::into_raw`): null until
    /// bound and once the proxy's `__gc` has released it (a finalizer of the program's can still
    /// reach a proxy after that; its methods then take the class's, which report it).
    core: *const FailureBreaker,
    /// The class's `recordSuccess` and `shouldAllowOperation` at the start (their own methods'
    /// upvalues keep them alive, so no other function can take their address).
    class_methods: [*const std::ffi::c_void; 2],
}

const PROXY_MAGIC: u64 = 0x6162_7072_6f78_7931; // "abproxy1"

/// `new_proxy(mt, listened)`: a new proxy block (see [`Proxy`]) with `listened` (a boolean)
/// and nothing bound yet; its metatable is the table `mt`, given a `__gc` (`proxy_gc`). Nothing
/// for anything else.
pub(crate) fn new_proxy_function(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `new_proxy` is a Lua C function that keeps to the C API's rules (see there).
    unsafe { lua.create_c_function(new_proxy) }
}

unsafe extern "C-unwind" fn new_proxy(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function; it has room for the C function's
    // minimum stack (LUA_MINSTACK slots), of which this uses three. `lua_newuserdata` returns a
    // block of the size asked for, aligned for any C type (or raises Lua's out-of-memory error;
    // nothing here needs dropping); the block is written whole before anything reads it. The
    // `__gc` is in the metatable before it is set, as Lua 5.4 wants it.
    unsafe {
        if ffi::lua_type(state, 1) != ffi::LUA_TTABLE {
            return 0;
        }
        let listened = ffi::lua_toboolean(state, 2) != 0;
        ffi::lua_settop(state, 1);
        ffi::lua_pushcfunction(state, proxy_gc);
        ffi::lua_setfield(state, 1, c"__gc".as_ptr());
        let proxy = ffi::lua_newuserdata(state, size_of::<Proxy>()).cast::<Proxy>();
        proxy.write(Proxy {
            magic: PROXY_MAGIC,
            listened: u8::from(listened),
            core: std::ptr::null(),
            class_methods: [std::ptr::null(); 2],
        });
        ffi::lua_pushvalue(state, 1);
        ffi::lua_setmetatable(state, 2);
        1
    }
}

/// The proxy block at `index`, if the value there is one.
unsafe fn proxy_at(state: *mut ffi::lua_State, index: c_int) -> Option<*mut Proxy> {
    // SAFETY: a full userdata's block has `lua_rawlen` bytes; one of a proxy's size starting
    // with the magic number is a proxy (mlua's userdata begin with a Rust value of theirs, never
    // that number).
    unsafe {
        if ffi::lua_type(state, index) != ffi::LUA_TUSERDATA
            || ffi::lua_rawlen(state, index) != size_of::<Proxy>()
        {
            return None;
        }
        let proxy = ffi::lua_touserdata(state, index).cast::<Proxy>();
        ((*proxy).magic == PROXY_MAGIC).then_some(proxy)
    }
}

/// A proxy's `__gc`: releases its reference to the core breaker (see [`Proxy::core`]).
unsafe extern "C-unwind" fn proxy_gc(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `proxy_at`; the pointer came from `Arc::into_raw` and is released once (it is
    // nulled first). Dropping the last reference drops the core breaker, whose Lua listeners it
    // holds only as registry keys (dropping one only marks it for expiry). A panic is caught:
    // nothing can be reported from a finalizer.
    unsafe {
        if let Some(proxy) = proxy_at(state, 1) {
            let core = std::mem::replace(&mut (*proxy).core, std::ptr::null());
            if !core.is_null() {
                let _ = catch_unwind(AssertUnwindSafe(|| drop(Arc::from_raw(core))));
            }
        }
        0
    }
}

/// `set_listened(proxy or cell)`: marks a proxy of `new_proxy` or a cell of `new_cell` as that
/// of a breaker that may have Lua listeners.
pub(crate) fn set_listened_function(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `set_listened` is a Lua C function that keeps to the C API's rules (see there).
    unsafe { lua.create_c_function(set_listened) }
}

unsafe extern "C-unwind" fn set_listened(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `proxy_at` and `cell_at`; only the byte is written.
    unsafe {
        if let Some(proxy) = proxy_at(state, 1) {
            (*proxy).listened = 1;
        } else if let Some(cell) = cell_at::<BudgetBreaker>(state, 1) {
            (*cell).listened = 1;
        } else if let Some(cell) = cell_at::<StagnationBreaker>(state, 1) {
            (*cell).listened = 1;
        }
        0
    }
}

/// `bind_breaker(proxy, address, object, class, record_success, should_allow)`: a
/// CircuitBreaker's own `recordSuccess` and `shouldAllowOperation` (see [`record_success`]), C
/// functions with the upvalues below; the proxy block gets its reference to the core breaker
/// and the class's methods they compare.
pub(crate) fn bind_breaker_function(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `bind_breaker` is a Lua C function that keeps to the C API's rules (see there).
    unsafe { lua.create_c_function(bind_breaker) }
}

/// Upvalues of a breaker's own methods: the proxy the methods belong to, its mlua object, the
/// class table, the class's method at the start (only kept, see [`Proxy::class_methods`]) and
/// the method's raw function (`failure_record_success_fast` or
/// `failure_should_allow_operation_fast`).
const PROXY: c_int = 1;
const OBJECT: c_int = 2;
const CLASS: c_int = 3;
const BOUND: c_int = 5;

/// The names of a breaker's own methods, in the order of [`Proxy::class_methods`].
const OWN_METHODS: [&std::ffi::CStr; 2] = [c"recordSuccess", c"shouldAllowOperation"];

unsafe extern "C-unwind" fn bind_breaker(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function, with room for its minimum stack
    // (LUA_MINSTACK slots; this uses at most fifteen). It may raise Lua's errors (out of memory;
    // `lua_getfield` may run a metamethod of the class table's and raise its error); nothing
    // here needs dropping (the proxy's reference is taken before any). The proxy is checked to
    // be one, still unbound; the address is that of the Rust value of the object in slot 3, as
    // `failure_new` gave them, which the object (on the stack) keeps in place.
    unsafe {
        ffi::lua_settop(state, 6);
        let handle = ffi::lua_touserdata(state, 2)
            .cast_const()
            .cast::<Handle<FailureBreaker>>();
        let (Some(proxy), ffi::LUA_TTABLE) = (proxy_at(state, 1), ffi::lua_type(state, 4)) else {
            return 0;
        };
        if handle.is_null() || !(*proxy).core.is_null() {
            return 0;
        }
        (*proxy).core = Arc::into_raw(Arc::clone(&(*handle).core));
        for (i, (name, function, bound)) in [
            (OWN_METHODS[0], record_success as ffi::lua_CFunction, 5),
            (OWN_METHODS[1], should_allow_operation, 6),
        ]
        .into_iter()
        .enumerate()
        {
            ffi::lua_pushvalue(state, 1); // PROXY
            ffi::lua_pushvalue(state, 3); // OBJECT
            ffi::lua_pushvalue(state, 4); // CLASS
            ffi::lua_getfield(state, 4, name.as_ptr()); // the class's method
            (*proxy).class_methods[i] = ffi::lua_topointer(state, -1);
            ffi::lua_pushvalue(state, bound); // BOUND
            ffi::lua_pushcclosure(state, function, 5);
        }
        2
    }
}

/// How a call of a breaker's own method goes.
enum Own<'a> {
    /// Straight into the core: `self` is the proxy the method belongs to, the class's method is
    /// still the one at the start, and the breaker has no Lua listeners (no listener context to
    /// enter; the proxy's byte says so, see [`Proxy::listened`]).
    Core(&'a FailureBreaker),
    /// As that, but the breaker may have Lua listeners: through the method's raw function, which
    /// enters the listener context.
    Bound,
    /// Anything else: the class's method.
    Class,
}

/// How the call of own method `method` (an index of [`OWN_METHODS`]) goes. Leaves the stack as
/// it found it.
unsafe fn own_breaker<'a>(state: *mut ffi::lua_State, method: usize) -> Own<'a> {
    // SAFETY: `state` is the running state of one of the breaker's own methods (the upvalues of
    // `bind_breaker`), with room for the value pushed (and popped again). The proxy's block was
    // filled in by `bind_breaker`; while its core pointer is not null the proxy holds a reference
    // to the core breaker, and the proxy (an upvalue, and `self`) cannot be finalized during the
    // call. The class's method is read as `cb:method()` finds it (`lua_getfield`, which may run a
    // metamethod of the class table's and raise its error; nothing here needs dropping).
    unsafe {
        let proxy = ffi::lua_touserdata(state, ffi::lua_upvalueindex(PROXY)).cast::<Proxy>();
        if ffi::lua_touserdata(state, 1) != proxy.cast() {
            return Own::Class;
        }
        let proxy = &*proxy;
        ffi::lua_getfield(
            state,
            ffi::lua_upvalueindex(CLASS),
            OWN_METHODS[method].as_ptr(),
        );
        let same_method = ffi::lua_topointer(state, -1) == proxy.class_methods[method];
        ffi::lua_settop(state, -2);
        if !same_method || proxy.core.is_null() {
            return Own::Class;
        }
        if proxy.listened != 0 {
            return Own::Bound;
        }
        Own::Core(&*proxy.core)
    }
}

/// Any other call of own method `method`: the class's method as it is now, with every argument,
/// and its results.
unsafe fn class_method(state: *mut ffi::lua_State, method: usize) -> c_int {
    // SAFETY: `state` is the running state of one of the breaker's own methods, with room for
    // the one value pushed; an error of the method (or of the class table's metamethods) passes
    // through (nothing here needs dropping).
    unsafe {
        let n = ffi::lua_gettop(state);
        ffi::lua_getfield(
            state,
            ffi::lua_upvalueindex(CLASS),
            OWN_METHODS[method].as_ptr(),
        );
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
        let handle = match own_breaker(state, 0) {
            Own::Core(handle) => handle,
            Own::Bound => return bound(state, 0),
            Own::Class => return class_method(state, 0),
        };
        let error = match catch_unwind(AssertUnwindSafe(|| handle.record_success())) {
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
    // C API call, and a panic is caught and raised as an INTERNAL error (`raise`). The two
    // results are pushed above the arguments, within the minimum stack.
    unsafe {
        let handle = match own_breaker(state, 1) {
            Own::Core(handle) => handle,
            Own::Bound => return bound(state, 2),
            Own::Class => return class_method(state, 1),
        };
        let error = match catch_unwind(AssertUnwindSafe(|| handle.should_allow_operation())) {
            Ok(permission) => {
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
            let value_type = ffi::lua_type(state, value);
            if ffi::lua_type(state, key) != ffi::LUA_TSTRING
                || !plain_typed(state, value, value_type, 1)
            {
                return None;
            }
            let slot = match string_bytes(state, key) {
                b"type" => {
                    if value_type == ffi::LUA_TSTRING {
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
                ffi::lua_copy(state, value, slot);
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

/// A BudgetBreaker's or StagnationBreaker's cell: a userdata block of the Lua state's, made by
/// `new_cell` with each breaker and kept by object in a weak table of the Lua side's, which the
/// hot paths read (`ingest`, `record_progress`, `stagnation_check`); emptied by its `__gc`
/// (`cell_gc`).
#[repr(C)]
struct Cell<T> {
    /// The kind's [`CellKind::MAGIC`]: the block is a cell of this kind (`cell_at` checks it).
    magic: u64,
    /// 1 when the breaker may have Lua listeners, else 0: set at the start when it has some and
    /// by `set_listened`, which the Lua side calls with every listener added.
    listened: u8,
    /// The core breaker, a reference of the cell's own to it (`Arc::into_raw`); null once the
    /// cell's `__gc` has released it (a finalizer of the program's can still reach a breaker
    /// after that; the hot paths then take the slow methods, which report it).
    core: *const T,
}

/// The breakers that have cells.
trait CellKind: Sized {
    const MAGIC: u64;
}
impl CellKind for BudgetBreaker {
    const MAGIC: u64 = 0x6162_6365_6c6c_6262; // "abcellbb"
}
impl CellKind for StagnationBreaker {
    const MAGIC: u64 = 0x6162_6365_6c6c_7362; // "abcellsb"
}

/// `new_budget_cell(address, listened)` / `new_stagnation_cell(address, listened)`: the cell of
/// the breaker whose Rust value is at `address` (the light userdata `budget_new` or
/// `stagnation_new` returned with the object, which the caller holds); nothing for anything else.
pub(crate) fn new_budget_cell_function(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `new_cell` is a Lua C function that keeps to the C API's rules (see there).
    unsafe { lua.create_c_function(new_cell::<BudgetBreaker>) }
}

/// See [`new_budget_cell_function`].
pub(crate) fn new_stagnation_cell_function(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `new_cell` is a Lua C function that keeps to the C API's rules (see there).
    unsafe { lua.create_c_function(new_cell::<StagnationBreaker>) }
}

unsafe extern "C-unwind" fn new_cell<T: CellKind>(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function, with room for its minimum stack
    // (this uses four slots). The address is that of the Rust value of an object the caller
    // holds (see above), kept in place while it does. The block is written whole, with the
    // reference taken, before anything can raise an error: should a later call raise Lua's
    // out-of-memory error, the block is already a cell and its `__gc` releases the reference
    // (its metatable is set last, with the `__gc` in it, as Lua 5.4 wants).
    unsafe {
        ffi::lua_settop(state, 2);
        let handle = ffi::lua_touserdata(state, 1)
            .cast_const()
            .cast::<Handle<T>>();
        if ffi::lua_type(state, 1) != ffi::LUA_TLIGHTUSERDATA || handle.is_null() {
            return 0;
        }
        let listened = ffi::lua_toboolean(state, 2) != 0;
        let cell = ffi::lua_newuserdata(state, size_of::<Cell<T>>()).cast::<Cell<T>>();
        cell.write(Cell {
            magic: T::MAGIC,
            listened: u8::from(listened),
            core: Arc::into_raw(Arc::clone(&(*handle).core)),
        });
        ffi::lua_createtable(state, 0, 1);
        ffi::lua_pushcfunction(state, cell_gc::<T>);
        ffi::lua_setfield(state, -2, c"__gc".as_ptr());
        ffi::lua_setmetatable(state, -2);
        1
    }
}

/// The cell of kind `T` at `index`, if the value there is one.
unsafe fn cell_at<T: CellKind>(state: *mut ffi::lua_State, index: c_int) -> Option<*mut Cell<T>> {
    // SAFETY: a full userdata's block has `lua_rawlen` bytes; one of a cell's size starting
    // with the kind's magic number is such a cell (`new_cell` makes them; mlua's userdata begin
    // with a Rust value of theirs, never that number).
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

/// A cell's `__gc`: releases its reference to the core breaker (see [`Cell::core`]).
unsafe extern "C-unwind" fn cell_gc<T: CellKind>(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `cell_at`; the pointer came from `Arc::into_raw` and is released once (it is
    // nulled first). Dropping the last reference drops the core breaker, whose Lua listeners it
    // holds only as registry keys (dropping one only marks it for expiry). A panic is caught:
    // nothing can be reported from a finalizer.
    unsafe {
        if let Some(cell) = cell_at::<T>(state, 1) {
            let core = std::mem::replace(&mut (*cell).core, std::ptr::null());
            if !core.is_null() {
                let _ = catch_unwind(AssertUnwindSafe(|| drop(Arc::from_raw(core))));
            }
        }
        0
    }
}

/// The core breaker of the cell found under the object at slot 1 in the table at `addresses`,
/// when the call can go straight into the core: the object has a cell of kind `T`, which still
/// holds its reference, and the breaker has no Lua listeners (no listener context to enter).
/// Pushes one value (the cell, or nil), within the stack space the caller checked.
unsafe fn own_core<'a, T: CellKind>(state: *mut ffi::lua_State, addresses: c_int) -> Option<&'a T> {
    // SAFETY: the cell stays on the stack (pushed here) for the rest of the call, and with it
    // its reference to the core breaker, which only its `__gc` releases. Only shared references
    // to the core breaker are made.
    unsafe {
        ffi::lua_pushvalue(state, 1);
        ffi::lua_rawget(state, addresses);
        let cell = ffi::lua_touserdata(state, -1).cast::<Cell<T>>();
        if cell.is_null() || (*cell).magic != T::MAGIC || (*cell).listened != 0 {
            return None;
        }
        (*cell).core.as_ref()
    }
}

/// `bind_ingest(cells, slow, take_pending)`: the `BudgetBreaker.ingest` method, a C function
/// with the three as upvalues (see [`ingest`]).
pub(crate) fn bind_ingest_function(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `bind_ingest` is a Lua C function that keeps to the C API's rules (see there).
    unsafe { lua.create_c_function(bind_ingest) }
}

unsafe extern "C-unwind" fn bind_ingest(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function; `lua_pushcclosure` takes the three
    // values as upvalues (it may raise Lua's out-of-memory error; nothing here needs dropping).
    unsafe {
        ffi::lua_settop(state, 3);
        ffi::lua_pushcclosure(state, ingest, 3);
        1
    }
}

/// `bb:ingest(event)` with upvalues `cells` (each BudgetBreaker's cell, by object, weakly: see
/// [`Cell`]), `slow` (the Lua method that takes every other case) and `take_pending` (see
/// [`crate::budget::stash`]).
///
/// The hot path whole in one C function: a BudgetBreaker without Lua listeners (no listener
/// context to enter) given a plain event ingests it straight into the core. Anything else goes to
/// `slow`, before anything happened. A halt or an error of the core is left with
/// [`crate::budget::stash`] and `take_pending` makes it the halt table or the error raised.
unsafe extern "C-unwind" fn ingest(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function, with the stack space checked first.
    // See `own_core` (slot 3 keeps the cell, and so the core breaker). The Rust work runs with
    // no C API call in between and every Rust value it makes is dropped or moved into the stash
    // before the next C API call that may raise a Lua error (`lua_call`, `lua_error`), so no
    // error skips a drop. A panic is caught and becomes an INTERNAL error, as in every raw
    // function.
    unsafe {
        ffi::lua_settop(state, 2); // self, event
        if ffi::lua_checkstack(state, 4 + WALK_STACK) == 0 {
            return ingest_slow(state);
        }
        let Some(breaker) = own_core::<BudgetBreaker>(state, ffi::lua_upvalueindex(1)) else {
            return ingest_slow(state);
        };
        ffi::lua_settop(state, 6); // nil in the three slots of the walk
        let Some(plain) = walk_event(state, 2, 4) else {
            return ingest_slow(state);
        };
        let payload = string_bytes(state, plain.payload);
        let task_id = plain.task_id.map(|slot| string_bytes(state, slot));
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            budget::ingest_plain(breaker, plain.tool_use, payload, task_id)
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

/// `bind_stagnation(cells, slow_record, slow_check, result_meta)`: the
/// `StagnationBreaker.recordProgress` and `.check` methods, C functions with upvalues `cells`
/// (each StagnationBreaker's cell, by object, weakly: see [`Cell`]), the Lua method that takes
/// every other case (`slow_record` or `slow_check`) and `result_meta` (the metatable of the
/// module's result tables).
pub(crate) fn bind_stagnation_function(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `bind_stagnation` is a Lua C function that keeps to the C API's rules (see there).
    unsafe { lua.create_c_function(bind_stagnation) }
}

unsafe extern "C-unwind" fn bind_stagnation(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function, with room for its minimum stack
    // (this uses at most ten slots); `lua_pushcclosure` takes the values as upvalues (it may
    // raise Lua's out-of-memory error; nothing here needs dropping).
    unsafe {
        ffi::lua_settop(state, 4);
        for (function, slow) in [
            (record_progress as ffi::lua_CFunction, 2),
            (stagnation_check, 3),
        ] {
            ffi::lua_pushvalue(state, 1);
            ffi::lua_pushvalue(state, slow);
            ffi::lua_pushvalue(state, 4);
            ffi::lua_pushcclosure(state, function, 3);
        }
        2
    }
}

/// The upvalues of [`record_progress`] and [`stagnation_check`].
const CELLS: c_int = 1;
const SLOW: c_int = 2;
const RESULT_META: c_int = 3;

/// `slow(...)` with the call's `arguments` (slots 1 to `arguments`), its `results` returned.
unsafe fn call_slow(state: *mut ffi::lua_State, arguments: c_int, results: c_int) -> c_int {
    // SAFETY: the caller's state has room for one value more than its arguments; an error of
    // `slow` passes through (nothing here needs dropping).
    unsafe {
        ffi::lua_settop(state, arguments);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(SLOW));
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, arguments, results);
        results
    }
}

/// A count of the hot path, read as `convert::count_or_zero` reads one: `agentbreaker.null` is
/// 0, a whole number >= 0 below 2^64 is itself (numbers as the JSON conversion reads them);
/// anything else is `None`.
unsafe fn count_at(state: *mut ffi::lua_State, index: c_int) -> Option<u64> {
    // SAFETY: the value's type is checked before it is read; nothing is converted in place.
    unsafe {
        match ffi::lua_type(state, index) {
            ffi::LUA_TLIGHTUSERDATA if ffi::lua_touserdata(state, index).is_null() => Some(0),
            ffi::LUA_TNUMBER => {
                // Lua 5.4's integers exactly (its floats, and every number of Lua 5.1 and
                // LuaJIT, below).
                #[cfg(feature = "lua54")]
                if ffi::lua_isinteger(state, index) != 0 {
                    return u64::try_from(ffi::lua_tointegerx(state, index, std::ptr::null_mut()))
                        .ok();
                }
                convert::number(ffi::lua_tonumber(state, index)).and_then(|n| n.as_u64())
            }
            _ => None,
        }
    }
}

/// `sb:recordProgress(metrics)` with the upvalues of `bind_stagnation`: a plain metrics table
/// (no metatable, no keys but `filesChanged`, `testsPassing` and `outputLength`, each a count as
/// [`count_at`] reads it) given to a breaker without Lua listeners goes straight into the core.
/// Anything else goes to the slow method, before anything happened, which takes it or reports
/// what is wrong.
unsafe extern "C-unwind" fn record_progress(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function; the stack space used (five slots)
    // is checked first. See `own_core` and `call_slow`. The walk raises no error
    // (`lua_next` on a table nothing modifies meanwhile; strings read only when they are
    // strings). The Rust work runs with no C API call in between; a panic is caught and raised
    // as an INTERNAL error (`raise`).
    unsafe {
        ffi::lua_settop(state, 2); // self, metrics
        if ffi::lua_checkstack(state, 5) == 0 {
            return call_slow(state, 2, 0);
        }
        let Some(breaker) = own_core::<StagnationBreaker>(state, ffi::lua_upvalueindex(CELLS))
        else {
            return call_slow(state, 2, 0);
        };
        if ffi::lua_type(state, 2) != ffi::LUA_TTABLE || has_metatable(state, 2) {
            return call_slow(state, 2, 0);
        }
        let mut counts = [0_u64; 3];
        ffi::lua_settop(state, 3);
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, 2) != 0 {
            let slot = if ffi::lua_type(state, 4) == ffi::LUA_TSTRING {
                match string_bytes(state, 4) {
                    b"filesChanged" => Some(0),
                    b"testsPassing" => Some(1),
                    b"outputLength" => Some(2),
                    _ => None,
                }
            } else {
                None
            };
            let (Some(slot), Some(count)) = (slot, count_at(state, 5)) else {
                return call_slow(state, 2, 0);
            };
            counts[slot] = count;
            ffi::lua_settop(state, 4);
        }
        let [files_changed, tests_passing, output_length] = counts;
        let metrics = IterationMetrics {
            files_changed,
            tests_passing,
            output_length,
        };
        let error = match catch_unwind(AssertUnwindSafe(|| breaker.record_progress(metrics))) {
            Ok(()) => return 0,
            Err(panic) => panic_error("stagnation_record_progress", &*panic),
        };
        raise(state, error)
    }
}

/// `sb:check()` with the upvalues of `bind_stagnation`: for a breaker without Lua listeners,
/// the core's decision as a new result table `{allowContinue, state, reason}`. Anything else
/// goes to the slow method.
unsafe extern "C-unwind" fn stagnation_check(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `state` is the state calling this C function; the stack space used (five slots)
    // is checked first. See `own_core`, `call_slow` and `push_text`: the decision's reason
    // is on the Lua stack (or dropped) before any C API call that may raise an error
    // (`lua_createtable`, `lua_setfield` on a new table, `lua_pushstring`: out of memory). A
    // panic is caught and raised as an INTERNAL error (`raise`).
    unsafe {
        ffi::lua_settop(state, 1); // self
        if ffi::lua_checkstack(state, 5) == 0 {
            return call_slow(state, 1, 1);
        }
        let Some(breaker) = own_core::<StagnationBreaker>(state, ffi::lua_upvalueindex(CELLS))
        else {
            return call_slow(state, 1, 1);
        };
        let decision = match catch_unwind(AssertUnwindSafe(|| breaker.check())) {
            Ok(decision) => decision,
            Err(panic) => raise(state, panic_error("stagnation_check", &*panic)),
        };
        let (allow, name) = (decision.allow_continue, state_name(decision.state));
        let has_reason = match decision.reason {
            Some(reason) => {
                push_text(state, reason);
                true
            }
            None => false,
        };
        ffi::lua_createtable(state, 0, 3);
        ffi::lua_pushboolean(state, c_int::from(allow));
        ffi::lua_setfield(state, -2, c"allowContinue".as_ptr());
        ffi::lua_pushstring(state, name.as_ptr());
        ffi::lua_setfield(state, -2, c"state".as_ptr());
        if has_reason {
            ffi::lua_pushvalue(state, -2);
            ffi::lua_setfield(state, -2, c"reason".as_ptr());
        }
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(RESULT_META));
        ffi::lua_setmetatable(state, -2);
        1
    }
}

/// A state's name, as results carry it.
fn state_name(state: State) -> &'static std::ffi::CStr {
    match state {
        State::Closed => c"CLOSED",
        State::HalfOpen => c"HALF_OPEN",
        State::Open => c"OPEN",
    }
}

/// Whether the value at (absolute) index `index`, `depth` levels down, certainly converts.
unsafe fn plain_value(state: *mut ffi::lua_State, index: c_int, depth: usize) -> bool {
    // SAFETY: see `walk_event`.
    unsafe { plain_typed(state, index, ffi::lua_type(state, index), depth) }
}

/// [`plain_value`] of a value of the type `value_type` (the caller read it).
unsafe fn plain_typed(
    state: *mut ffi::lua_State,
    index: c_int,
    value_type: c_int,
    depth: usize,
) -> bool {
    // SAFETY: see `walk_event`.
    unsafe {
        match value_type {
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
