//! Lua values to JSON and back: the only place where Lua's one `table` type becomes a JSON object
//! or list, and where Lua numbers become JSON numbers.
//!
//! Lua → JSON:
//! - `nil` and `agentbreaker.null` are `null`; booleans and strings (invalid UTF-8 replaced by
//!   U+FFFD) are themselves.
//! - Numbers: integers are integers; a float that is a whole number (`5.0`, and every number of
//!   Lua 5.1/LuaJIT, which has no integer subtype) is an integer; other finite floats are floats;
//!   NaN and ±infinity have no JSON form and are rejected.
//! - Tables: a table marked with a `__jsontype` metatable field (`"array"` or `"object"`, as dkjson
//!   marks what it decodes and as this module marks what it returns) keeps its kind. Otherwise a
//!   table whose keys are exactly `1..n` is a list, one whose keys are all strings is an object, and
//!   an empty table is an object, except under the keys that hold lists in the SPEC's shapes
//!   ([`LIST_KEYS`]), where it is an empty list. Anything else (mixed or sparse keys, functions,
//!   userdata, threads, nesting deeper than [`MAX_DEPTH`], cycles) is rejected.
//!
//! Errors carry the code of the argument being converted (`INVALID_CONFIG` in a config,
//! `INVALID_EVENT` in an event, `INVALID_SNAPSHOT` in a snapshot, `INVALID_ARGUMENT` elsewhere).
//!
//! JSON → Lua: objects and lists become tables with the `__jsontype` marker metatables (so a
//! snapshot or status round-trips and a JSON encoder keeps `[]` and `{}` apart), integers become
//! Lua integers (numbers in Lua 5.1), `null` inside an object is an absent key (`nil`) and inside a
//! list `agentbreaker.null`.

use agentbreaker::{Error, State};
use mlua::{Integer, Lua, Table, Value};
use serde_json::{Map, Number, Value as Json};

/// Keys whose value is a list in the SPEC's argument shapes: an empty, unmarked Lua table under
/// one of them is `[]` rather than `{}`.
pub(crate) const LIST_KEYS: [&str; 6] = [
    "failureHistory",
    "outputTrend",
    "baselineOutputs",
    "steps",
    "members",
    "events",
];

/// Deepest nesting converted (a cyclic table stops here instead of overflowing the stack).
pub(crate) const MAX_DEPTH: usize = 64;

/// Registry names of the two marker metatables.
const ARRAY_MT: &str = "agentbreaker.array_mt";
const OBJECT_MT: &str = "agentbreaker.object_mt";

/// What kind of argument is being converted: decides the error code of a conversion failure.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ctx {
    Config,
    Argument,
    Event,
    Snapshot,
}

impl Ctx {
    pub(crate) fn error(self, message: String) -> Error {
        match self {
            Ctx::Config => Error::InvalidConfig(message),
            Ctx::Argument => Error::InvalidArgument(message),
            Ctx::Event => Error::InvalidEvent(message),
            Ctx::Snapshot => Error::InvalidSnapshot(message),
        }
    }
}

/// Any failure of the Lua API itself (out of memory, mostly) while converting.
pub(crate) fn lua_error(e: mlua::Error) -> Error {
    Error::Internal(format!("Lua: {e}"))
}

/// Creates the marker metatables (once per Lua state, at `require`).
pub(crate) fn init(lua: &Lua) -> mlua::Result<()> {
    for (name, kind) in [(ARRAY_MT, "array"), (OBJECT_MT, "object")] {
        let mt = lua.create_table()?;
        mt.raw_set("__jsontype", kind)?;
        lua.set_named_registry_value(name, mt)?;
    }
    Ok(())
}

/// The marker metatable of the objects results are made of (the Lua side makes some result
/// tables itself and marks them with it).
pub(crate) fn object_metatable(lua: &Lua) -> mlua::Result<Table> {
    lua.named_registry_value::<Table>(OBJECT_MT)
}

/// The Lua type name of a value, for messages.
pub(crate) fn lua_type(v: &Value) -> &'static str {
    match v {
        Value::LightUserData(_) if v.is_null() => "agentbreaker.null",
        other => other.type_name(),
    }
}

/// A Lua value as JSON, with `what` naming the argument in messages.
pub(crate) fn to_json(value: &Value, ctx: Ctx, what: &str) -> Result<Json, Error> {
    convert(value, ctx, what, None, 0, &[])
}

/// A Lua table as a JSON object, leaving out the given top-level keys (Lua-only options such as
/// `clock` and `listeners`); `nil` is `null`; anything else converts as [`to_json`] does.
pub(crate) fn to_json_without(
    value: &Value,
    ctx: Ctx,
    what: &str,
    skip: &[&str],
) -> Result<Json, Error> {
    convert(value, ctx, what, None, 0, skip)
}

fn convert(
    value: &Value,
    ctx: Ctx,
    path: &str,
    key: Option<&str>,
    depth: usize,
    skip: &[&str],
) -> Result<Json, Error> {
    match value {
        Value::Nil => Ok(Json::Null),
        Value::LightUserData(_) if value.is_null() => Ok(Json::Null),
        Value::Boolean(b) => Ok(Json::Bool(*b)),
        Value::Integer(i) => Ok(Json::from(*i)),
        Value::Number(n) => number(*n).ok_or_else(|| {
            ctx.error(format!(
                "{path} must be a finite number, not {n} (NaN and infinities have no JSON form)"
            ))
        }),
        Value::String(s) => Ok(Json::String(s.to_string_lossy())),
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                return Err(ctx.error(format!(
                    "{path} is nested more than {MAX_DEPTH} levels deep (a table that contains itself?)"
                )));
            }
            table(t, ctx, path, key, depth, skip)
        }
        other => Err(ctx.error(format!(
            "{path} cannot be a {} (expected nil, a boolean, a number, a string or a table)",
            lua_type(other)
        ))),
    }
}

/// A finite Lua float as a JSON number: whole numbers become integers.
pub(crate) fn number(n: f64) -> Option<Json> {
    if !n.is_finite() {
        return None;
    }
    if n.fract() == 0.0 {
        // 2^63 and 2^64 are exact in f64; whole numbers in range convert exactly.
        if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
            return Some(Json::from(n as i64));
        }
        if (0.0..18_446_744_073_709_551_616.0).contains(&n) {
            return Some(Json::from(n as u64));
        }
    }
    Number::from_f64(n).map(Json::Number)
}

#[derive(PartialEq)]
enum Kind {
    Array,
    Object,
    Unmarked,
}

fn marker(t: &Table) -> Kind {
    let Some(mt) = t.metatable() else {
        return Kind::Unmarked;
    };
    match mt.raw_get::<Value>("__jsontype") {
        Ok(Value::String(s)) if s.as_bytes().as_ref() == b"array" => Kind::Array,
        Ok(Value::String(s)) if s.as_bytes().as_ref() == b"object" => Kind::Object,
        _ => Kind::Unmarked,
    }
}

fn table(
    t: &Table,
    ctx: Ctx,
    path: &str,
    key: Option<&str>,
    depth: usize,
    skip: &[&str],
) -> Result<Json, Error> {
    let kind = marker(t);
    let mut named: Vec<(String, Value)> = Vec::new();
    let mut indexed: Vec<(i64, Value)> = Vec::new();
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair.map_err(lua_error)?;
        match k {
            Value::String(s) => {
                let name = s.to_string_lossy();
                if depth == 0 && skip.contains(&name.as_str()) {
                    continue;
                }
                named.push((name, v));
            }
            Value::Integer(i) => indexed.push((i, v)),
            Value::Number(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => indexed.push((n as i64, v)),
            other => {
                return Err(ctx.error(format!(
                    "{path} has a key of type {} (tables need string keys or list indexes 1..n)",
                    lua_type(&other)
                )));
            }
        }
    }
    let as_array = match kind {
        Kind::Array => true,
        Kind::Object => false,
        Kind::Unmarked if named.is_empty() && indexed.is_empty() => {
            key.is_some_and(|k| LIST_KEYS.contains(&k))
        }
        Kind::Unmarked => named.is_empty(),
    };
    if as_array {
        if let Some((name, _)) = named.first() {
            return Err(ctx.error(format!("{path} is a list but has the named key {name:?}")));
        }
        indexed.sort_by_key(|(i, _)| *i);
        let len = indexed.len();
        // Keys must be exactly 1..n; a marked list (dkjson) may leave holes for nulls.
        let last = indexed.last().map_or(0, |(i, _)| *i);
        let dense = indexed.first().is_none_or(|(i, _)| *i == 1) && last == len as i64;
        let in_range = indexed.first().is_none_or(|(i, _)| *i >= 1);
        if !(dense || (kind == Kind::Array && in_range && last <= 4 * len as i64 + 16)) {
            return Err(ctx.error(format!(
                "{path} is not a list: its keys are not 1..n (a sparse or mixed table?)"
            )));
        }
        let mut items = vec![Json::Null; usize::try_from(last).unwrap_or(0)];
        for (i, v) in indexed {
            let item_path = child(path, &format!("[{i}]"));
            let slot = usize::try_from(i - 1).unwrap_or(0);
            items[slot] = convert(&v, ctx, &item_path, None, depth + 1, &[])?;
        }
        Ok(Json::Array(items))
    } else {
        if let Some((i, _)) = indexed.first() {
            return Err(ctx.error(format!(
                "{path} mixes list items (index {i}) and named keys; use one or the other"
            )));
        }
        let mut map = Map::new();
        for (name, v) in named {
            let field_path = child(path, &format!(".{name}"));
            let converted = convert(&v, ctx, &field_path, Some(&name), depth + 1, &[])?;
            map.insert(name, converted);
        }
        Ok(Json::Object(map))
    }
}

/// The path of a nested value for messages, cut at about 120 characters.
fn child(path: &str, step: &str) -> String {
    if path.len() + step.len() <= 120 {
        format!("{path}{step}")
    } else if path.ends_with("...") {
        path.to_string()
    } else {
        format!("{path}...")
    }
}

/// A JSON value as a Lua value.
pub(crate) fn to_lua(lua: &Lua, value: &Json) -> mlua::Result<Value> {
    Ok(match value {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Integer(i as Integer)
            } else {
                Value::Number(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => Value::String(lua.create_string(s)?),
        Json::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                let v = match item {
                    Json::Null => Value::NULL,
                    other => to_lua(lua, other)?,
                };
                t.raw_set(i + 1, v)?;
            }
            t.set_metatable(Some(lua.named_registry_value::<Table>(ARRAY_MT)?))?;
            Value::Table(t)
        }
        Json::Object(map) => {
            let t = lua.create_table_with_capacity(0, map.len())?;
            for (k, v) in map {
                if !v.is_null() {
                    t.raw_set(k.as_str(), to_lua(lua, v)?)?;
                }
            }
            t.set_metatable(Some(lua.named_registry_value::<Table>(OBJECT_MT)?))?;
            Value::Table(t)
        }
    })
}

/// A serializable result as a Lua value.
pub(crate) fn result_to_lua<T: serde::Serialize>(lua: &Lua, value: &T) -> Result<Value, Error> {
    let json = serde_json::to_value(value)
        .map_err(|e| Error::Internal(format!("cannot serialize a result: {e}")))?;
    to_lua(lua, &json).map_err(lua_error)
}

/// A whole number >= 0 (a clock time in ms, a cooldown).
pub(crate) fn to_u64(value: &Value, what: &str) -> Result<u64, Error> {
    let bad = || {
        Error::InvalidArgument(format!(
            "{what} must be a whole number >= 0, not {}",
            describe(value)
        ))
    };
    match value {
        Value::Integer(i) => u64::try_from(*i).map_err(|_| bad()),
        Value::Number(n) => match number(*n) {
            Some(j) => j.as_u64().ok_or_else(bad),
            None => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// A count of the hot path: `nil` is 0, a whole number >= 0 is itself (as [`to_u64`] reads it);
/// anything else is `None` (the caller then converts the whole argument, which reports it).
pub(crate) fn count_or_zero(value: &Value) -> Option<u64> {
    match value {
        Value::Nil => Some(0),
        Value::Integer(i) => u64::try_from(*i).ok(),
        Value::Number(n) => number(*n).and_then(|j| j.as_u64()),
        _ => None,
    }
}

/// A state as the hot path returns it: 1 CLOSED, 2 HALF_OPEN, 3 OPEN (the Lua side's
/// `STATE_NAMES`). Pushing a number costs nothing; making a Lua string from a module costs a
/// protected call.
pub(crate) fn state_number(state: State) -> u8 {
    match state {
        State::Closed => 1,
        State::HalfOpen => 2,
        State::Open => 3,
    }
}

/// A string argument (no number-to-string coercion: `42` is not a string).
pub(crate) fn to_string(value: &Value, what: &str) -> Result<String, Error> {
    match value {
        Value::String(s) => Ok(s.to_string_lossy()),
        other => Err(Error::InvalidArgument(format!(
            "{what} must be a string, not {}",
            describe(other)
        ))),
    }
}

/// `nil` or a string.
pub(crate) fn to_optional_string(value: &Value, what: &str) -> Result<Option<String>, Error> {
    match value {
        Value::Nil => Ok(None),
        Value::LightUserData(_) if value.is_null() => Ok(None),
        other => to_string(other, what).map(Some),
    }
}

/// A value for a message: its type, and the number itself for numbers (`NaN`, `1.5`).
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Integer(i) => format!("the number {i}"),
        Value::Number(n) => format!("the number {n}"),
        other => format!("a {}", lua_type(other)),
    }
}
