//! Errors as Lua sees them: a string beginning with the core's code (`"INVALID_EVENT: ..."`),
//! raised by the Lua side (`check` in `agentbreaker.lua`) from a raw function's `false, text`, or
//! by a C function of `capi` itself. A panic in the core is `INTERNAL` (`interop::catch`), never
//! a crash. No error code is chosen here: a bad value's code is its `ArgKind`'s, every other
//! error the core's.

use agentbreaker::Error;
use agentbreaker::interop::{ArgKind, catch};
use mlua::{Lua, Value};

use crate::listeners;

/// A failure of the Lua API itself (out of memory, mostly).
pub(crate) fn lua_error(e: mlua::Error) -> Error {
    Error::Internal(format!("Lua: {e}"))
}

/// Runs the work of a raw function: the Lua state marked as the one running (listeners the core
/// calls during the operation find their functions in it), a panic caught as `INTERNAL`.
pub(crate) fn guarded<T>(lua: &Lua, work: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    let _active = listeners::enter(lua);
    catch(work)
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
