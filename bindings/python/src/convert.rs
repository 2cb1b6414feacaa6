//! Python values ⇄ the core's JSON, by the rules of `agentbreaker::interop`.
//!
//! In: `None` → null, `bool` → boolean (never a number), `int` → number (whole), `float` → number
//! (a fractional one even when it is `5.0`, `interop::float`; NaN and infinities are refused),
//! `str` → string, `list`/`tuple` → array, any `Mapping` with `str` keys → object, `os.PathLike`
//! → string. Anything else, and more than `interop::MAX_DEPTH` nested containers, is refused with
//! the error code of the argument's [`ArgKind`] (`INVALID_CONFIG` for constructor keywords,
//! `INVALID_ARGUMENT` for arguments, ...), so a wrong Python type reports the same code as a
//! wrong JSON type would.
//!
//! Out: a core result goes through `serde_json::to_value` and one walk into Python objects
//! (numbers stay `int` when whole in the JSON, `float` otherwise). Objects come out with their
//! keys in JSON order (sorted), as every binding gives them.

use std::fmt;
use std::path::PathBuf;

use agentbreaker::interop::{ArgKind, At, MAX_DEPTH, config_key, float, missing};
use agentbreaker::{Error, SharedClock};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple, PyType};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::clock;
use crate::errors::{IntoPyResult, boundary, detached, detached_result};

/// The Python type name of `value`, for messages.
pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    let name = value.get_type().name();
    name.map_or_else(|_| "object".to_string(), |n| n.to_string())
}

/// An argument declared with a `None` default (`None` when left out): its conversion here, not
/// pyo3's, decides the error (and its code) of a missing or wrong one.
pub type Arg<'a, 'py> = Option<&'a Bound<'py, PyAny>>;

/// Converts a Python value to JSON. `what` names the value in messages (`"snapshot"`,
/// `"failure_threshold"`); `kind` decides the error code.
pub fn to_json(value: &Bound<'_, PyAny>, what: &str, kind: ArgKind) -> Result<Value, Error> {
    to_json_in(value, what, kind, 0)
}

/// [`to_json`] of a value that the core gets inside `depth` containers, which count towards
/// `interop::MAX_DEPTH`: 1 for a field of an object made here (a keyword argument, a field read
/// from an event dict), 2 for an event of a Loop's `events=`.
pub fn to_json_in(
    v: &Bound<'_, PyAny>,
    what: &str,
    kind: ArgKind,
    depth: usize,
) -> Result<Value, Error> {
    walk(v, &At::Root(what), kind, depth)
}

/// `depth`: how many containers hold `value`; a container inside `MAX_DEPTH` others is refused.
fn walk(
    value: &Bound<'_, PyAny>,
    at: &At<'_>,
    kind: ArgKind,
    depth: usize,
) -> Result<Value, Error> {
    let inner = || match depth < MAX_DEPTH {
        true => Ok(depth + 1),
        false => Err(kind.too_deep(at.root())),
    };
    let items = |items: &mut dyn Iterator<Item = Bound<'_, PyAny>>| {
        let (items, depth) = (items.enumerate(), inner()?);
        items
            .map(|(i, item)| walk(&item, &At::Index(at, i as i64), kind, depth))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    };
    type Pairs<'a, 'py> =
        dyn Iterator<Item = Result<(Bound<'py, PyAny>, Bound<'py, PyAny>), Error>> + 'a;
    let object = |pairs: &mut Pairs<'_, '_>| {
        let (mut map, depth) = (Map::new(), inner()?);
        for pair in pairs {
            let (k, v) = pair?;
            let key = key_str(&k, at, kind)?;
            let item = walk(&v, &At::Item(at, &key), kind, depth)?;
            map.insert(key, item);
        }
        Ok(Value::Object(map))
    };
    if value.is_none() {
        Ok(Value::Null)
    } else if let Ok(b) = value.cast::<PyBool>() {
        Ok(Value::Bool(b.is_true()))
    } else if let Ok(i) = value.cast::<PyInt>() {
        let n = i.extract::<u64>().map(Value::from);
        n.or_else(|_| i.extract::<i64>().map(Value::from))
            .map_err(|_| kind.out_of_range(&at.to_string()))
    } else if let Ok(f) = value.cast::<PyFloat>() {
        let x = f.value();
        let n = float(x).ok_or_else(|| kind.not_finite(&at.to_string(), x));
        n.map(Value::Number)
    } else if let Ok(s) = value.cast::<PyString>() {
        python_str(s, at, kind).map(Value::String)
    } else if let Ok(list) = value.cast::<PyList>() {
        items(&mut list.iter())
    } else if let Ok(tuple) = value.cast::<PyTuple>() {
        items(&mut tuple.iter())
    } else if let Ok(dict) = value.cast::<PyDict>() {
        object(&mut dict.iter().map(Ok))
    } else if value.is_instance_of::<PyType>() {
        Err(refused(value, at, kind))
    } else if let Ok(mapping) = value.cast::<PyMapping>() {
        let unreadable = |e: PyErr| kind.error(format_args!("{at}: cannot read the mapping: {e}"));
        let pairs = mapping.items().map_err(unreadable)?;
        object(&mut pairs.iter().map(|pair| pair.extract().map_err(unreadable)))
    } else if value.hasattr("__fspath__").unwrap_or(false) {
        let path: PathBuf = value
            .extract()
            .map_err(|e| kind.error(format_args!("{at}: not a usable path: {e}")))?;
        let path = path.into_os_string().into_string();
        path.map(Value::String)
            .map_err(|_| kind.error(format_args!("{at} is a path that is not valid Unicode")))
    } else {
        Err(refused(value, at, kind))
    }
}

fn refused(value: &Bound<'_, PyAny>, at: &At<'_>, kind: ArgKind) -> Error {
    let expected = "None, a bool, an int, a float, a str, a list or a dict";
    kind.wrong_type(&at.to_string(), expected, &type_name(value))
}

fn key_str(
    key: &Bound<'_, PyAny>,
    what: &dyn fmt::Display,
    kind: ArgKind,
) -> Result<String, Error> {
    match key.cast::<PyString>() {
        Ok(s) => python_str(s, what, kind),
        Err(_) => Err(kind.error(format_args!(
            "{what} has a key of type {}; keys must be str",
            type_name(key)
        ))),
    }
}

fn python_str(
    s: &Bound<'_, PyString>,
    what: &dyn fmt::Display,
    kind: ArgKind,
) -> Result<String, Error> {
    s.to_cow().map(|c| c.into_owned()).map_err(|_| {
        kind.error(format_args!(
            "{what} is a str that is not valid Unicode (it contains surrogates)"
        ))
    })
}

/// `InvalidArgumentError` (never a recorded failure) when `value` cannot be called.
pub fn callable(value: &Bound<'_, PyAny>, what: &str) -> Result<(), Error> {
    match value.is_callable() {
        true => Ok(()),
        false => Err(ArgKind::Argument.wrong_type(what, "callable", &type_name(value))),
    }
}

/// A required argument declared with a `None` default (so that leaving it out raises
/// `InvalidArgumentError`, a `TypeError`, like any missing argument, but with a code).
pub fn required<'a, 'py>(
    value: Option<&'a Bound<'py, PyAny>>,
    name: &str,
) -> Result<&'a Bound<'py, PyAny>, Error> {
    value.ok_or_else(|| missing(name))
}

/// A required argument converted to JSON with the error code of `kind`.
pub fn required_json(value: Arg, name: &str, kind: ArgKind) -> Result<Value, Error> {
    to_json(required(value, name)?, name, kind)
}

/// An argument converted to JSON, `None` (or left out) as `null`: for the Monitor, whose core
/// reports a `null` event or snapshot with the event's or snapshot's own code, as every binding's
/// `null` does (the conformance suite's `{"event": null}`).
pub fn json_or_null(value: Arg, name: &str, kind: ArgKind) -> Result<Value, Error> {
    value.map_or(Ok(Value::Null), |v| to_json(v, name, kind))
}

/// A required `str` argument.
pub fn arg_str(value: Arg, name: &str) -> Result<String, Error> {
    let value = required(value, name)?;
    match value.cast::<PyString>() {
        Ok(s) => python_str(s, &name, ArgKind::Argument),
        Err(_) => Err(ArgKind::Argument.wrong_type(name, "a str", &type_name(value))),
    }
}

/// An optional `str` argument (`None` = not given).
pub fn arg_str_opt(value: Arg, name: &str) -> Result<Option<String>, Error> {
    let value = value.filter(|v| !v.is_none());
    value.map(|v| arg_str(Some(v), name)).transpose()
}

/// A whole number of milliseconds (`int` >= 0, not a `bool`).
pub fn arg_ms(value: &Bound<'_, PyAny>, name: &str) -> Result<u64, Error> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        let got = type_name(value);
        return Err(ArgKind::Argument.wrong_type(name, "an int (milliseconds)", &got));
    }
    value.extract::<u64>().map_err(|_| {
        let message =
            format_args!("{name} must be a whole number of milliseconds >= 0 and < 2**64");
        ArgKind::Argument.error(message)
    })
}

/// An optional `bool` (`None` = `default`).
pub fn arg_bool(value: Arg, name: &str, default: bool) -> Result<bool, Error> {
    match value.filter(|v| !v.is_none()) {
        None => Ok(default),
        Some(v) => v
            .cast::<PyBool>()
            .map(|b| b.is_true())
            .map_err(|_| ArgKind::Argument.wrong_type(name, "a bool", &type_name(v))),
    }
}

/// A file path: `str` or `os.PathLike`.
pub fn arg_path(value: Arg, name: &str) -> Result<PathBuf, Error> {
    let value = required(value, name)?;
    let refused =
        || ArgKind::Argument.wrong_type(name, "a str or an os.PathLike", &type_name(value));
    if value.is_none() || value.is_instance_of::<PyBool>() || value.is_instance_of::<PyInt>() {
        return Err(refused());
    }
    value.extract::<PathBuf>().map_err(|_| refused())
}

/// Keyword arguments (`name = value`, value optional) as the argument object the core parses, of
/// the contract's camelCase keys: `("filesChanged", "files_changed", value)`.
pub fn object_of(fields: &[(&str, &str, Arg)]) -> Result<Value, Error> {
    let mut map = Map::new();
    for (key, name, value) in fields {
        if let Some(value) = value {
            let json = to_json_in(value, name, ArgKind::Argument, 1)?;
            map.insert(key.to_string(), json);
        }
    }
    Ok(Value::Object(map))
}

/// A constructor's configuration: an optional positional dict in the contract's JSON shape
/// (camelCase keys, e.g. read from a file or from `config_from_env()["config"]`), updated with the
/// keyword arguments (snake_case, turned into camelCase by `interop::config_key`). Values are
/// converted as they are (dicts inside keep their keys: they are JSON shapes). A keyword that is
/// not snake_case is `INVALID_CONFIG`; unknown keys reach the core, which rejects them with
/// `INVALID_CONFIG` too.
pub fn config_from_arguments(
    base: Arg,
    keywords: Option<&Bound<'_, PyDict>>,
) -> Result<Value, Error> {
    let config = ArgKind::Config;
    let mut map = match base.filter(|b| !b.is_none()) {
        None => Map::new(),
        Some(base) => match to_json(base, "config", config)? {
            Value::Object(map) => map,
            _ => {
                let expected = "a dict with the contract's camelCase keys";
                return Err(config.wrong_type("config", expected, &type_name(base)));
            }
        },
    };
    for (k, v) in keywords.into_iter().flat_map(|k| k.iter()) {
        let keyword = key_str(&k, &"keyword", config)?;
        map.insert(config_key(&keyword)?, to_json_in(&v, &keyword, config, 1)?);
    }
    Ok(Value::Object(map))
}

/// The body of every constructor `X(config=None, /, *, clock=None, **options)`: the clock
/// keyword, the configuration ([`config_from_arguments`]), and the core object made by `make`
/// with the GIL released (it may read a state file or connect to a store).
pub fn construct<T: Send>(
    py: Python<'_>,
    config: Arg,
    clock: Arg,
    options: Option<&Bound<'_, PyDict>>,
    make: impl Send + FnOnce(&Value, SharedClock) -> Result<T, Error>,
) -> PyResult<T> {
    boundary(py, || {
        let clock = clock::from_keyword(clock).or_raise(py)?;
        let config = config_from_arguments(config, options).or_raise(py)?;
        detached_result(py, move || make(&config, clock))
    })
}

/// A core result as Python objects: `serde_json::to_value`, then [`json_to_py`].
pub fn to_py<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(value)
        .map_err(|e| Error::Internal(format!("cannot convert a result: {e}")))
        .or_raise(py)?;
    json_to_py(py, &value)
}

/// A JSON value as Python objects: objects are dicts, arrays lists, whole numbers `int`, other
/// numbers `float`.
pub fn json_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any(),
            _ => PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let items = items.iter().map(|v| json_to_py(py, v));
            PyList::new(py, items.collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, json_to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// Runs a core call with the GIL released and returns its result as Python objects.
pub fn detached_py<'py, T: Serialize + Send>(
    py: Python<'py>,
    f: impl Send + FnOnce() -> T,
) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, &detached(py, f)?)
}

/// [`detached_py`] for core calls that return a core `Result`.
pub fn detached_result_py<'py, T: Serialize + Send>(
    py: Python<'py>,
    f: impl Send + FnOnce() -> Result<T, Error>,
) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, &detached_result(py, f)?)
}

/// Runs a short core call (a read of the configuration) with the GIL held and returns its result
/// as Python objects.
pub fn attached_py<'py, T: Serialize>(
    py: Python<'py>,
    f: impl FnOnce() -> T,
) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, &f())
}
