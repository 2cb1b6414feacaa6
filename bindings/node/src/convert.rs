//! JavaScript values ⇄ the core's JSON, by the rules of `agentbreaker::interop`.
//!
//! In: a value is walked into a `serde_json::Value` and handed to the core's `from_json`
//! validators. JavaScript has one number type, so a finite whole number is a JSON integer and any
//! other finite number a fractional one (`interop::whole_number`). An object property whose value
//! is `undefined` is absent (as in `JSON.stringify`), `undefined` elsewhere is `null`. `NaN`,
//! `±Infinity`, functions, symbols, BigInts, more than `interop::MAX_DEPTH` nested arrays and
//! objects (cycles included) and arrays too big to walk are a `TypeError` with the code of the
//! argument's [`ArgKind`]. `depth` counts the arrays and objects around a value.
//!
//! Out: a result is written as JSON text by serde and read back by `JSON.parse`, in one walk done
//! by V8. Not `serde_json::to_value` and a walk here: its `Map` sorts the keys, and results keep
//! the field order of the core's types (`{state, consecutiveFailures, ...}`, as the contract writes
//! them). `JSON.parse` makes every key an own property (a fingerprint `__proto__` too) and every
//! number a JavaScript number (counts and millisecond timestamps are far below 2^53).

use agentbreaker::interop::{ArgKind, At, MAX_DEPTH, whole_number};
use napi::bindgen_prelude::{
    Function, JsObjectValue, JsValue, KeyCollectionMode, KeyConversion, KeyFilter, Null, Object,
    ToNapiValue, Unknown,
};
use napi::{Env, JsString, ValueType};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{Failure, internal};

/// How many values one argument may hold in all (so that a sparse array with a huge length is
/// refused before it is walked).
pub const MAX_VALUES: usize = 10_000_000;

/// Converts a JavaScript value to JSON. `what` names it in messages, `kind` decides the code.
pub fn to_json(value: &Unknown<'_>, kind: ArgKind, what: &str) -> Result<Value, Failure> {
    let mut walker = Walker {
        kind,
        remaining: MAX_VALUES,
    };
    walker.walk(value, &At::Root(what), 0)
}

/// An optional argument: left out (`undefined`, `null`) is `null`.
pub fn opt_json(value: Option<&Unknown<'_>>, kind: ArgKind, what: &str) -> Result<Value, Failure> {
    value.map_or(Ok(Value::Null), |v| to_json(v, kind, what))
}

/// A `TypeError` of `kind`: `{what} must be {expected}, not {the value's type}`.
pub fn wrong_type(
    kind: ArgKind,
    what: &str,
    expected: &str,
    value: Option<&Unknown<'_>>,
) -> Failure {
    Failure::Type(kind.wrong_type(what, expected, js_type(value)))
}

/// An optional string argument: left out (`undefined`, `null`) is `None`; anything but a string
/// is a `TypeError`.
pub fn opt_string(value: Option<&Unknown<'_>>, what: &str) -> Result<Option<String>, Failure> {
    match value {
        None => Ok(None),
        Some(v) if v.get_type()? == ValueType::String => {
            Ok(Some(v.coerce_to_string()?.into_utf8()?.into_owned()?))
        }
        Some(_) => Err(wrong_type(ArgKind::Argument, what, "a string", value)),
    }
}

/// A required string argument.
pub fn string(value: Option<&Unknown<'_>>, what: &str) -> Result<String, Failure> {
    opt_string(value, what)?.ok_or_else(|| wrong_type(ArgKind::Argument, what, "a string", value))
}

/// A whole number of milliseconds `>= 0`: a non-number (`NaN` and `±Infinity` too) is a
/// `TypeError`, a number out of range `INVALID_ARGUMENT`.
pub fn millis(value: Option<&Unknown<'_>>, what: &str) -> Result<u64, Failure> {
    let expected = "a whole number of milliseconds >= 0";
    let x = match value {
        Some(v) if v.get_type()? == ValueType::Number => v.coerce_to_number()?.get_double()?,
        _ => return Err(wrong_type(ArgKind::Argument, what, expected, value)),
    };
    match whole_number(x) {
        Some(n) => n.as_u64().ok_or_else(|| {
            let e = ArgKind::Argument.error(format_args!("{what} must be {expected}, not {n}"));
            Failure::Core(e)
        }),
        None => Err(Failure::Type(ArgKind::Argument.not_finite(what, x))),
    }
}

/// The type of a JavaScript value, as messages name it.
fn js_type(value: Option<&Unknown<'_>>) -> &'static str {
    match value.map(Unknown::get_type) {
        None | Some(Ok(ValueType::Undefined)) => "undefined",
        Some(Ok(ValueType::Null)) => "null",
        Some(Ok(ValueType::Boolean)) => "a boolean",
        Some(Ok(ValueType::Number)) => "a number",
        Some(Ok(ValueType::String)) => "a string",
        Some(Ok(ValueType::Object)) => "an object",
        Some(Ok(ValueType::Function)) => "a function",
        Some(Ok(ValueType::Symbol)) => "a symbol",
        Some(Ok(ValueType::BigInt)) => "a bigint",
        Some(_) => "an unsupported value",
    }
}

/// At most 80 characters of a text a message shows (a path, a value given).
pub fn cut(mut text: String) -> String {
    if let Some((end, _)) = text.char_indices().nth(80) {
        text.replace_range(end.., "...");
    }
    text
}

fn shown(at: &At<'_>) -> String {
    cut(at.to_string())
}

struct Walker {
    kind: ArgKind,
    remaining: usize,
}

impl Walker {
    /// Checks that `n` more values fit in the budget.
    fn fits(&self, n: usize, at: &At<'_>) -> Result<(), Failure> {
        if n <= self.remaining {
            return Ok(());
        }
        let message = format_args!("{} holds more than {MAX_VALUES} values", shown(at));
        Err(Failure::Type(self.kind.error(message)))
    }

    fn walk(&mut self, value: &Unknown<'_>, at: &At<'_>, depth: usize) -> Result<Value, Failure> {
        self.fits(1, at)?;
        self.remaining -= 1;
        let kind = self.kind;
        Ok(match value.get_type()? {
            ValueType::Undefined | ValueType::Null => Value::Null,
            ValueType::Boolean => Value::Bool(value.coerce_to_bool()?),
            ValueType::Number => {
                let x = value.coerce_to_number()?.get_double()?;
                let n = whole_number(x).ok_or_else(|| kind.not_finite(&shown(at), x));
                Value::Number(n.map_err(Failure::Type)?)
            }
            ValueType::String => {
                Value::String(value.coerce_to_string()?.into_utf8()?.into_owned()?)
            }
            ValueType::Object if depth >= MAX_DEPTH => {
                return Err(Failure::Type(kind.too_deep(&shown(at))));
            }
            ValueType::Object => {
                let object = value.coerce_to_object()?;
                if object.is_array()? {
                    self.array(&object, at, depth)?
                } else {
                    self.object(&object, at, depth)?
                }
            }
            _ => {
                let e = kind.wrong_type(&shown(at), "a JSON value", js_type(Some(value)));
                return Err(Failure::Type(e));
            }
        })
    }

    fn array(&mut self, array: &Object<'_>, at: &At<'_>, depth: usize) -> Result<Value, Failure> {
        let length = array.get_array_length()?;
        self.fits(length as usize, at)?;
        let mut items = Vec::with_capacity(length as usize);
        for i in 0..length {
            let item: Unknown<'_> = array.get_element(i)?;
            items.push(self.walk(&item, &At::Index(at, i.into()), depth + 1)?);
        }
        Ok(Value::Array(items))
    }

    fn object(&mut self, object: &Object<'_>, at: &At<'_>, depth: usize) -> Result<Value, Failure> {
        let keys = object.get_all_property_names(
            KeyCollectionMode::OwnOnly,
            KeyFilter::Enumerable,
            KeyConversion::NumbersToStrings,
        )?;
        let mut map = Map::new();
        for i in 0..keys.get_array_length()? {
            let key: Unknown<'_> = keys.get_element(i)?;
            if key.get_type()? != ValueType::String {
                continue; // symbol keys, as JSON.stringify
            }
            let name = key.coerce_to_string()?.into_utf8()?.into_owned()?;
            let item: Unknown<'_> = object.get_property(key)?;
            if item.get_type()? != ValueType::Undefined {
                let converted = self.walk(&item, &At::Key(at, &name), depth + 1)?;
                map.insert(name, converted);
            }
        }
        Ok(Value::Object(map))
    }
}

/// A core result as a JavaScript value: its JSON text, read by `JSON.parse`.
pub fn result<'e, T: Serialize + ?Sized>(env: &'e Env, value: &T) -> Result<Unknown<'e>, Failure> {
    let text = serde_json::to_string(value).map_err(|e| internal(format!("a result: {e}")))?;
    if text == "null" {
        return Ok(Null.into_unknown(env)?); // no halt, no plan: the common answer, without a parse
    }
    let json: Object<'_> = env.get_global()?.get_named_property("JSON")?;
    let parse: Function<'_, JsString<'_>, Unknown<'e>> = json.get_named_property("parse")?;
    Ok(parse.call(env.create_string(&text)?)?)
}
