//! Lua values ⇄ the core's JSON, by the rules of `agentbreaker::interop`: the binding's one
//! walker ([`walk`], on the Lua stack: every raw function reaches it through [`to_json`], the C
//! fast paths of `capi` directly) and the way back ([`to_lua`]).
//!
//! In: `nil` and `agentbreaker.null` are `null`; strings are strings (invalid UTF-8 replaced by
//! U+FFFD, but refused in a key and in a config); Lua 5.4's integers are integers and other numbers go through
//! `interop::whole_number` (a whole float is an integer: Lua 5.1 and LuaJIT have no other kind;
//! NaN and the infinities are refused). A table marked with a `__jsontype` metatable field
//! (`"array"` or `"object"`, as dkjson marks what it decodes and this module what it returns)
//! keeps its kind; otherwise keys `1..n` make a list, string keys an object, and an empty table is
//! an object but under a key whose value is a list (`interop::table` decides). Mixed or sparse
//! keys, functions, userdata, threads and more than `interop::MAX_DEPTH` nested tables (a cycle)
//! are refused, with the error code of the argument's `ArgKind`. Tables are read raw and nothing on the walk allocates Lua memory, so it
//! raises no Lua error.
//!
//! Out: objects and lists are tables with the `__jsontype` marker metatables (so results
//! round-trip and a JSON encoder keeps `[]` and `{}` apart), `null` in an object is an absent key
//! and in a list `agentbreaker.null`.
//!
//! Errors (at the end): Lua sees a string beginning with the core's code (`"INVALID_EVENT:
//! ..."`). None is chosen here: a bad value's code is its `ArgKind`'s, every other the core's.

#![allow(unsafe_code)]

use std::os::raw::c_int;

use agentbreaker::Error;
use agentbreaker::interop::{self, ArgKind, At, MAX_DEPTH, whole_number};
use mlua::{Lua, Table, Value, ffi};
use serde_json::{Map, Value as Json};

/// Registry names of the two marker metatables.
const MARKERS: [(&std::ffi::CStr, &str); 2] = [
    (c"agentbreaker.array_mt", "array"),
    (c"agentbreaker.object_mt", "object"),
];

/// The value at stack index `index` (absolute) as JSON, without the top-level keys in `skip`
/// (a constructor's Lua-only options). Leaves the stack as it found it.
///
/// # Safety
/// `state` is a running Lua state, `index` a valid absolute index of it.
pub(crate) unsafe fn walk(
    state: *mut ffi::lua_State,
    index: c_int,
    what: &str,
    kind: ArgKind,
    skip: &[&str],
) -> Result<Json, Error> {
    // SAFETY: the calls below are type tests, reads of numbers, booleans and strings that are
    // such (`lua_tolstring` converts nothing), `lua_getmetatable` and `lua_next` over tables
    // nothing modifies meanwhile, within the stack space granted for each table: none allocates
    // or raises.
    unsafe {
        let top = ffi::lua_gettop(state);
        let walk = Walk {
            state,
            what,
            kind,
            skip,
        };
        let json = walk.value(index, &At::Root(what), 0);
        ffi::lua_settop(state, top);
        json
    }
}

struct Walk<'a> {
    state: *mut ffi::lua_State,
    what: &'a str,
    kind: ArgKind,
    skip: &'a [&'a str],
}

impl Walk<'_> {
    unsafe fn value(&self, i: c_int, at: &At, depth: usize) -> Result<Json, Error> {
        let state = self.state;
        // SAFETY: see `walk`.
        unsafe {
            Ok(match ffi::lua_type(state, i) {
                ffi::LUA_TNIL => Json::Null,
                ffi::LUA_TBOOLEAN => Json::Bool(ffi::lua_toboolean(state, i) != 0),
                ffi::LUA_TLIGHTUSERDATA if ffi::lua_touserdata(state, i).is_null() => Json::Null,
                #[cfg(feature = "lua54")]
                ffi::LUA_TNUMBER if ffi::lua_isinteger(state, i) != 0 => {
                    Json::from(ffi::lua_tointegerx(state, i, std::ptr::null_mut()))
                }
                ffi::LUA_TNUMBER => {
                    let x = ffi::lua_tonumber(state, i);
                    let n = whole_number(x).ok_or_else(|| self.kind.not_finite(&at.to_string(), x));
                    Json::Number(n?)
                }
                ffi::LUA_TSTRING => Json::String(
                    text(state, i, self.kind == ArgKind::Config)
                        .ok_or_else(|| self.kind.error(format_args!("{at} is not UTF-8")))?,
                ),
                ffi::LUA_TTABLE if depth >= MAX_DEPTH => return Err(self.kind.too_deep(self.what)),
                ffi::LUA_TTABLE => self.table(i, at, depth)?,
                other => {
                    let expected = "nil, a boolean, a number, a string or a table";
                    let at = at.to_string();
                    return Err(self.kind.wrong_type(&at, expected, type_name(other)));
                }
            })
        }
    }

    unsafe fn table(&self, i: c_int, at: &At, depth: usize) -> Result<Json, Error> {
        let (state, kind) = (self.state, self.kind);
        // SAFETY: see `walk`; a key and a value above the table, or the metatable and its key.
        unsafe {
            if ffi::lua_checkstack(state, 4) == 0 {
                return Err(Error::Internal("the Lua stack is full".into()));
            }
            let marked = marker(state, i);
            let (mut map, mut items) = (Map::new(), Vec::new());
            ffi::lua_pushnil(state);
            while ffi::lua_next(state, i) != 0 {
                let (k, v) = (ffi::lua_gettop(state) - 1, ffi::lua_gettop(state));
                match ffi::lua_type(state, k) {
                    ffi::LUA_TSTRING => {
                        let name = text(state, k, true).ok_or_else(|| {
                            kind.error(format_args!("{at} has a key that is not UTF-8"))
                        })?;
                        if depth > 0 || !self.skip.contains(&name.as_str()) {
                            let item = self.value(v, &At::Key(at, &name), depth + 1);
                            map.insert(name, item?);
                        }
                    }
                    ffi::LUA_TNUMBER => {
                        let index = list_index(state, k).ok_or_else(|| {
                            kind.error(format_args!("{at} has a number key that is not 1..n"))
                        })?;
                        items.push((index, self.value(v, &At::Index(at, index), depth + 1)?));
                    }
                    other => {
                        return Err(kind.error(format_args!(
                            "{at} has a key of type {} (keys must be strings or 1..n)",
                            type_name(other)
                        )));
                    }
                }
                ffi::lua_settop(state, k);
            }
            interop::table(map, items, marked, at, kind)
        }
    }
}

/// A table's `__jsontype` marker (`Some(true)`: `"array"`), read from its metatable by walking
/// it (a lookup would make a Lua string).
unsafe fn marker(state: *mut ffi::lua_State, index: c_int) -> Option<bool> {
    // SAFETY: see `walk`; three slots, left as found.
    unsafe {
        if ffi::lua_getmetatable(state, index) == 0 {
            return None;
        }
        let mut marked = None;
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, -2) != 0 {
            let string = |i| ffi::lua_type(state, i) == ffi::LUA_TSTRING;
            if string(-2) && string(-1) && bytes(state, -2) == b"__jsontype" {
                marked = match bytes(state, -1) {
                    b"array" => Some(true),
                    b"object" => Some(false),
                    _ => None,
                };
            }
            ffi::lua_settop(state, -2);
        }
        ffi::lua_settop(state, -2);
        marked
    }
}

/// A number key as a list index: an integer, or a whole float below 9e15.
unsafe fn list_index(state: *mut ffi::lua_State, index: c_int) -> Option<i64> {
    // SAFETY: the value is a number.
    unsafe {
        #[cfg(feature = "lua54")]
        if ffi::lua_isinteger(state, index) != 0 {
            return Some(ffi::lua_tointegerx(state, index, std::ptr::null_mut()));
        }
        let n = ffi::lua_tonumber(state, index);
        (n.fract() == 0.0 && n.abs() < 9.0e15).then_some(n as i64)
    }
}

/// The bytes of the string at `index`, valid while it stays on the stack.
///
/// # Safety
/// The value at `index` is a string (so `lua_tolstring` converts nothing).
pub(crate) unsafe fn bytes<'a>(state: *mut ffi::lua_State, index: c_int) -> &'a [u8] {
    let mut len = 0;
    // SAFETY: see above; a Lua string's bytes stay put while the string lives.
    unsafe { std::slice::from_raw_parts(ffi::lua_tolstring(state, index, &mut len).cast(), len) }
}

/// The string at `index` as UTF-8, invalid bytes replaced by U+FFFD; `None` for invalid bytes when
/// `strict` (a key or a config's string: two keys would become one, a `statePath` another file).
/// (ASCII is checked first: for the short strings of an event, `from_utf8` costs about 70
/// instructions a string, `from_utf8_lossy` 140, `is_ascii` 20.)
unsafe fn text(state: *mut ffi::lua_State, index: c_int, strict: bool) -> Option<String> {
    // SAFETY: see `bytes`; ASCII is UTF-8.
    unsafe {
        let bytes = bytes(state, index);
        if bytes.is_ascii() {
            return Some(std::str::from_utf8_unchecked(bytes).to_owned());
        }
        let lossy = String::from_utf8_lossy(bytes);
        (!strict || matches!(lossy, std::borrow::Cow::Borrowed(_))).then(|| lossy.into_owned())
    }
}

fn type_name(lua_type: c_int) -> &'static str {
    match lua_type {
        ffi::LUA_TBOOLEAN => "a boolean",
        ffi::LUA_TFUNCTION => "a function",
        ffi::LUA_TTHREAD => "a thread",
        _ => "a userdata",
    }
}

/// A Lua value as JSON ([`walk`]), `what` naming it in messages, `kind` the code of a refusal.
pub(crate) fn to_json(lua: &Lua, value: &Value, what: &str, kind: ArgKind) -> Result<Json, Error> {
    to_json_without(lua, value, what, kind, &[])
}

/// A snapshot given to `restore`.
pub(crate) fn snapshot(lua: &Lua, value: &Value) -> Result<Json, Error> {
    to_json(lua, value, "snapshot", ArgKind::Snapshot)
}

/// [`to_json`] without the top-level keys in `skip`.
pub(crate) fn to_json_without(
    lua: &Lua,
    value: &Value,
    what: &str,
    kind: ArgKind,
    skip: &[&str],
) -> Result<Json, Error> {
    let mut json = Ok(Json::Null);
    // SAFETY: `exec_raw` pushes the value and hands over the running state with it on top.
    let pushed = unsafe {
        lua.exec_raw::<()>(value, |state| {
            json = walk(state, ffi::lua_gettop(state), what, kind, skip);
        })
    };
    pushed.map_err(lua_error)?;
    json
}

/// Creates the marker metatables (once per Lua state, at `require`); returns the object one (the
/// C fast path of `check` marks the table it makes with it).
pub(crate) fn init(lua: &Lua) -> mlua::Result<Table> {
    for (name, kind) in MARKERS {
        let name = name.to_str().unwrap_or_default();
        lua.set_named_registry_value(name, lua.create_table_from([("__jsontype", kind)])?)?;
    }
    lua.named_registry_value(MARKERS[1].0.to_str().unwrap_or_default())
}

/// A JSON value as a Lua value, made on the Lua stack in one protected call (through mlua's
/// API, each table field costs a protected call of its own: 2 000 instructions; a verdict's
/// conversion took 12 000 and takes 3 000).
pub(crate) fn to_lua(lua: &Lua, value: &Json) -> mlua::Result<Value> {
    // SAFETY: `exec_raw` runs this in protected mode; a Lua error (out of memory) unwinds only
    // frames that hold references.
    unsafe { lua.exec_raw((), |state| push_marked(state, value)) }
}

/// Pushes `value`, its tables with the marker metatables.
///
/// # Safety
/// `state` is a running Lua state; a Lua error (out of memory) may unwind the caller's frame.
pub(crate) unsafe fn push_marked(state: *mut ffi::lua_State, value: &Json) {
    // SAFETY: the markers are two slots under the value, removed after.
    unsafe {
        if !(value.is_array() || value.is_object()) {
            return push(state, value, 0);
        }
        for (name, _) in MARKERS {
            ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, name.as_ptr());
        }
        push(state, value, ffi::lua_gettop(state) - 1);
        ffi::lua_rotate(state, -3, 1);
        ffi::lua_settop(state, -3);
    }
}

/// Pushes `value`; `markers` is the index of the array marker (the object one above it).
unsafe fn push(state: *mut ffi::lua_State, value: &Json, markers: c_int) {
    // SAFETY: see `push_marked`; at most three slots above the stack checked for each level.
    unsafe {
        match value {
            Json::Null => ffi::lua_pushnil(state),
            Json::Bool(b) => ffi::lua_pushboolean(state, c_int::from(*b)),
            Json::Number(n) => match n.as_i64() {
                Some(i) => ffi::lua_pushinteger(state, i as ffi::lua_Integer),
                None => ffi::lua_pushnumber(state, n.as_f64().unwrap_or(f64::NAN)),
            },
            Json::String(s) => push_str(state, s),
            Json::Array(items) => {
                ffi::luaL_checkstack(state, 3, std::ptr::null());
                ffi::lua_createtable(state, items.len().try_into().unwrap_or(0), 0);
                for (i, item) in (1..).zip(items) {
                    match item {
                        Json::Null => ffi::lua_pushlightuserdata(state, std::ptr::null_mut()),
                        item => push(state, item, markers),
                    }
                    ffi::lua_rawseti(state, -2, i);
                }
                ffi::lua_pushvalue(state, markers);
                ffi::lua_setmetatable(state, -2);
            }
            Json::Object(map) => {
                ffi::luaL_checkstack(state, 3, std::ptr::null());
                ffi::lua_createtable(state, 0, map.len().try_into().unwrap_or(0));
                for (key, item) in map.iter().filter(|(_, item)| !item.is_null()) {
                    push_str(state, key);
                    push(state, item, markers);
                    ffi::lua_rawset(state, -3);
                }
                ffi::lua_pushvalue(state, markers + 1);
                ffi::lua_setmetatable(state, -2);
            }
        }
    }
}

unsafe fn push_str(state: *mut ffi::lua_State, s: &str) {
    // SAFETY: `lua_pushlstring` copies the bytes.
    unsafe { ffi::lua_pushlstring(state, s.as_ptr().cast(), s.len()) };
}

/// A core result as JSON (`serde_json::to_value`).
pub(crate) fn json<T: serde::Serialize + ?Sized>(value: &T) -> Result<Json, Error> {
    serde_json::to_value(value)
        .map_err(|e| Error::Internal(format!("cannot convert a result: {e}")))
}

/// A string argument (no number-to-string coercion: `42` is not a string).
pub(crate) fn string(value: &Value, what: &str) -> Result<String, Error> {
    match value {
        Value::String(s) => Ok(s.to_string_lossy()),
        other => Err(wrong_argument(what, "a string", other)),
    }
}

/// `nil`, `agentbreaker.null` or a string.
pub(crate) fn optional_string(value: &Value, what: &str) -> Result<Option<String>, Error> {
    match value {
        Value::Nil => Ok(None),
        Value::LightUserData(_) if value.is_null() => Ok(None),
        other => string(other, what).map(Some),
    }
}

/// A whole number >= 0 (a clock time in ms, a listener id).
pub(crate) fn whole(value: &Value, what: &str) -> Result<u64, Error> {
    let n = match value {
        Value::Integer(i) => u64::try_from(*i).ok(),
        Value::Number(x) => whole_number(*x).and_then(|n| n.as_u64()),
        _ => None,
    };
    n.ok_or_else(|| wrong_argument(what, "a whole number >= 0", value))
}

/// A failure of the Lua API itself (out of memory, mostly).
pub(crate) fn lua_error(e: mlua::Error) -> Error {
    Error::Internal(format!("Lua: {e}"))
}

/// How a value is named in messages: `a table`, `the number 1.5`, `agentbreaker.null`.
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Integer(i) => format!("the number {i}"),
        Value::Number(n) => format!("the number {n}"),
        Value::LightUserData(_) if value.is_null() => "agentbreaker.null".into(),
        other => format!("a {}", other.type_name()),
    }
}

/// `{what} must be {expected}, not {the value}`, as an `INVALID_ARGUMENT`.
pub(crate) fn wrong_argument(what: &str, expected: &str, value: &Value) -> Error {
    ArgKind::Argument.wrong_type(what, expected, &describe(value))
}

/// A method called on something that is not an object of its class (`sb.check(cb)`).
pub(crate) fn not_self(class: &str, method: &str, value: &Value) -> Error {
    ArgKind::Argument.error(format_args!(
        "{class}.{method}: self must be a {class}, not {} (call it as obj:{method}(...))",
        describe(value)
    ))
}
