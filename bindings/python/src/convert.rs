//! Python values to `serde_json::Value` (for the core's `from_json` validators) and core results
//! to Python objects (a serde `Serializer`, so dicts keep the SPEC's key order).
//!
//! Conversion rules, the same everywhere: `None` → null, `bool` → boolean (never a number),
//! `int` → number (whole), `float` → number (a fractional one even when it is `5.0`; NaN and
//! infinities are refused), `str` → string, `list`/`tuple` → array, any `Mapping` with `str` keys →
//! object, `os.PathLike` → string. Anything else is refused with the error code of the context
//! (`INVALID_CONFIG` for constructor keywords, `INVALID_ARGUMENT` for arguments, ...), so a wrong
//! Python type reports the same code as a wrong JSON type would.

use std::path::PathBuf;

use agentbreaker::Error;
use pyo3::BoundObject;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple, PyType};
use serde::Serialize;
use serde::ser::{self, SerializeMap as _};
use serde_json::{Map, Number, Value};

use crate::errors::{argument, config};

/// Nesting deeper than this is refused (a cyclic or hostile structure must not overflow the
/// stack).
const MAX_DEPTH: usize = 128;

/// Makes the error of the conversion's context from a message.
pub type MakeError = fn(String) -> Error;

/// The Python type name of `value`, for messages.
pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".to_string())
}

/// Converts a Python value to JSON. `what` names the value in messages (`"snapshot"`,
/// `"failure_threshold"`).
pub fn to_json(
    value: &Bound<'_, PyAny>,
    what: &str,
    make_error: MakeError,
) -> Result<Value, Error> {
    to_json_at(value, what, make_error, 0)
}

fn to_json_at(
    value: &Bound<'_, PyAny>,
    what: &str,
    make_error: MakeError,
    depth: usize,
) -> Result<Value, Error> {
    if depth > MAX_DEPTH {
        let root = what.split('[').next().unwrap_or(what);
        return Err(make_error(format!(
            "{root} is nested more than {MAX_DEPTH} levels deep"
        )));
    }
    if value.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = value.cast::<PyInt>() {
        if let Ok(n) = i.extract::<u64>() {
            return Ok(Value::from(n));
        }
        if let Ok(n) = i.extract::<i64>() {
            return Ok(Value::from(n));
        }
        return Err(make_error(format!(
            "{what} is an integer out of the 64-bit range"
        )));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        let x = f.value();
        return Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| make_error(format!("{what} must be a finite number, not {x}")));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return python_str(s, what, make_error).map(Value::String);
    }
    if let Ok(list) = value.cast::<PyList>() {
        return list
            .iter()
            .enumerate()
            .map(|(i, item)| to_json_at(&item, &format!("{what}[{i}]"), make_error, depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array);
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        return tuple
            .iter()
            .enumerate()
            .map(|(i, item)| to_json_at(&item, &format!("{what}[{i}]"), make_error, depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array);
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in dict.iter() {
            let key = mapping_key(&k, what, make_error)?;
            let item = to_json_at(&v, &format!("{what}['{key}']"), make_error, depth + 1)?;
            map.insert(key, item);
        }
        return Ok(Value::Object(map));
    }
    if value.is_instance_of::<PyType>() {
        return Err(refused(value, what, make_error));
    }
    if let Ok(mapping) = value.cast::<PyMapping>() {
        let items = mapping
            .items()
            .map_err(|e| make_error(format!("{what}: cannot read the mapping: {e}")))?;
        let mut map = Map::new();
        for pair in items.iter() {
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair
                .extract()
                .map_err(|e| make_error(format!("{what}: cannot read the mapping: {e}")))?;
            let key = mapping_key(&k, what, make_error)?;
            let item = to_json_at(&v, &format!("{what}['{key}']"), make_error, depth + 1)?;
            map.insert(key, item);
        }
        return Ok(Value::Object(map));
    }
    if value.hasattr("__fspath__").unwrap_or(false) {
        let path: PathBuf = value
            .extract()
            .map_err(|e| make_error(format!("{what}: not a usable path: {e}")))?;
        return path
            .into_os_string()
            .into_string()
            .map(Value::String)
            .map_err(|_| make_error(format!("{what} is a path that is not valid Unicode")));
    }
    Err(refused(value, what, make_error))
}

fn refused(value: &Bound<'_, PyAny>, what: &str, make_error: MakeError) -> Error {
    make_error(format!(
        "{what} must be None, a bool, an int, a float, a str, a list or a dict, not {}",
        type_name(value)
    ))
}

fn mapping_key(key: &Bound<'_, PyAny>, what: &str, make_error: MakeError) -> Result<String, Error> {
    match key.cast::<PyString>() {
        Ok(s) => python_str(s, what, make_error),
        Err(_) => Err(make_error(format!(
            "{what} has a key of type {}; keys must be str",
            type_name(key)
        ))),
    }
}

fn python_str(s: &Bound<'_, PyString>, what: &str, make_error: MakeError) -> Result<String, Error> {
    s.to_cow().map(|c| c.into_owned()).map_err(|_| {
        make_error(format!(
            "{what} is a str that is not valid Unicode (it contains surrogates)"
        ))
    })
}

/// A required argument declared with a `None` default (so that leaving it out raises
/// `InvalidArgumentError`, a `TypeError`, like any missing argument, but with a code).
pub fn required<'a, 'py>(
    value: Option<&'a Bound<'py, PyAny>>,
    name: &str,
) -> Result<&'a Bound<'py, PyAny>, Error> {
    value.ok_or_else(|| argument(format!("{name} is required (not None)")))
}

/// A required `str` argument.
pub fn arg_str(value: Option<&Bound<'_, PyAny>>, name: &str) -> Result<String, Error> {
    let Some(value) = value else {
        return Err(argument(format!("{name} is required (a str, not None)")));
    };
    match value.cast::<PyString>() {
        Ok(s) => python_str(s, name, argument),
        Err(_) => Err(argument(format!(
            "{name} must be a str, not {}",
            type_name(value)
        ))),
    }
}

/// A whole number of milliseconds (`int` >= 0, not a `bool`).
pub fn arg_ms(value: &Bound<'_, PyAny>, name: &str) -> Result<u64, Error> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(argument(format!(
            "{name} must be an int (milliseconds), not {}",
            type_name(value)
        )));
    }
    value.extract::<u64>().map_err(|_| {
        argument(format!(
            "{name} must be a whole number of milliseconds >= 0 and < 2**64"
        ))
    })
}

/// An optional `bool` (`None` = `default`).
pub fn arg_bool(
    value: Option<&Bound<'_, PyAny>>,
    name: &str,
    default: bool,
) -> Result<bool, Error> {
    match value {
        None => Ok(default),
        Some(v) if v.is_none() => Ok(default),
        Some(v) => v
            .cast::<PyBool>()
            .map(|b| b.is_true())
            .map_err(|_| argument(format!("{name} must be a bool, not {}", type_name(v)))),
    }
}

/// A file path: `str` or `os.PathLike`.
pub fn arg_path(value: &Bound<'_, PyAny>, name: &str) -> Result<PathBuf, Error> {
    if value.is_none() || value.is_instance_of::<PyBool>() || value.is_instance_of::<PyInt>() {
        return Err(argument(format!(
            "{name} must be a str or an os.PathLike, not {}",
            type_name(value)
        )));
    }
    value.extract::<PathBuf>().map_err(|_| {
        argument(format!(
            "{name} must be a str or an os.PathLike, not {}",
            type_name(value)
        ))
    })
}

/// `failure_threshold` → `failureThreshold`. `None` when the keyword is not snake_case (lower-case
/// words of letters and digits joined by single underscores).
fn camel_case(keyword: &str) -> Option<String> {
    let valid = keyword.starts_with(|c: char| c.is_ascii_lowercase())
        && keyword.split('_').all(|w| {
            !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        });
    if !valid {
        return None;
    }
    let mut out = String::with_capacity(keyword.len());
    for (i, word) in keyword.split('_').enumerate() {
        if i == 0 {
            out.push_str(word);
        } else {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                out.push(first.to_ascii_uppercase());
                out.extend(chars);
            }
        }
    }
    Some(out)
}

/// `failureThreshold` → `failure_threshold`, for the message about a camelCase keyword.
fn snake_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A constructor's configuration: an optional positional dict in the contract's JSON shape
/// (camelCase keys, e.g. read from a file or from `config_from_env()["config"]`), updated with the
/// keyword arguments (snake_case, turned into camelCase). Values are converted as they are (dicts
/// inside keep their keys: they are JSON shapes). A keyword that is not snake_case is
/// `INVALID_CONFIG`; unknown keys reach the core, which rejects them with `INVALID_CONFIG` too.
pub fn config_from_arguments(
    base: Option<&Bound<'_, PyAny>>,
    keywords: Option<&Bound<'_, PyDict>>,
) -> Result<Value, Error> {
    let mut map = match base {
        Some(base) if !base.is_none() => match to_json(base, "config", config)? {
            Value::Object(map) => map,
            _ => {
                return Err(config(format!(
                    "config must be a dict with the contract's camelCase keys, not {}",
                    type_name(base)
                )));
            }
        },
        _ => Map::new(),
    };
    if let Some(keywords) = keywords {
        for (k, v) in keywords.iter() {
            let keyword = mapping_key(&k, "keyword", config)?;
            let Some(key) = camel_case(&keyword) else {
                let hint = snake_case(&keyword);
                return Err(config(if hint != keyword && camel_case(&hint).is_some() {
                    format!("unknown keyword argument '{keyword}' (did you mean '{hint}'?)")
                } else {
                    format!("unknown keyword argument '{keyword}'")
                }));
            };
            map.insert(key, to_json(&v, &keyword, config)?);
        }
    }
    Ok(Value::Object(map))
}

// ---------------------------------------------------------------------------------------------
// Core results → Python objects

/// Serializes a core result into Python objects: structs and maps become dicts (in declaration
/// order), sequences lists, unit enum variants their string, `None` None.
pub fn to_py<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    value.serialize(PySerializer { py }).map_err(|e| {
        crate::errors::to_py(
            py,
            &Error::Internal(format!("cannot convert a result: {e}")),
        )
    })
}

#[derive(Debug)]
pub struct SerError(String);

impl std::fmt::Display for SerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SerError {}

impl ser::Error for SerError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        SerError(msg.to_string())
    }
}

impl From<PyErr> for SerError {
    fn from(e: PyErr) -> Self {
        SerError(e.to_string())
    }
}

#[derive(Clone, Copy)]
struct PySerializer<'py> {
    py: Python<'py>,
}

impl<'py> PySerializer<'py> {
    fn object<T: IntoPyObject<'py>>(self, v: T) -> Result<Bound<'py, PyAny>, SerError>
    where
        T::Error: Into<PyErr>,
    {
        v.into_pyobject(self.py)
            .map(|o| o.into_any().into_bound())
            .map_err(|e| SerError::from(e.into()))
    }
}

struct SeqBuilder<'py> {
    py: Python<'py>,
    items: Vec<Bound<'py, PyAny>>,
}

struct DictBuilder<'py> {
    py: Python<'py>,
    dict: Bound<'py, PyDict>,
    key: Option<Bound<'py, PyAny>>,
    /// For struct/tuple variants: the variant name wrapping the dict.
    variant: Option<&'static str>,
}

impl<'py> DictBuilder<'py> {
    fn new(py: Python<'py>, variant: Option<&'static str>) -> Self {
        DictBuilder {
            py,
            dict: PyDict::new(py),
            key: None,
            variant,
        }
    }

    fn finish(self) -> Result<Bound<'py, PyAny>, SerError> {
        match self.variant {
            None => Ok(self.dict.into_any()),
            Some(name) => {
                let outer = PyDict::new(self.py);
                outer.set_item(name, self.dict)?;
                Ok(outer.into_any())
            }
        }
    }
}

impl<'py> ser::Serializer for PySerializer<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = SerError;
    type SerializeSeq = SeqBuilder<'py>;
    type SerializeTuple = SeqBuilder<'py>;
    type SerializeTupleStruct = SeqBuilder<'py>;
    type SerializeTupleVariant = SeqBuilder<'py>;
    type SerializeMap = DictBuilder<'py>;
    type SerializeStruct = DictBuilder<'py>;
    type SerializeStructVariant = DictBuilder<'py>;

    fn serialize_bool(self, v: bool) -> Result<Self::Ok, SerError> {
        self.object(v)
    }
    fn serialize_i8(self, v: i8) -> Result<Self::Ok, SerError> {
        self.object(v)
    }
    fn serialize_i16(self, v: i16) -> Result<Self::Ok, SerError> {
        self.object(v)
    }
    fn serialize_i32(self, v: i32) -> Result<Self::Ok, SerError> {
        self.object(v)
    }
    fn serialize_i64(self, v: i64) -> Result<Self::Ok, SerError> {
        self.object(v)
    }
    fn serialize_u8(self, v: u8) -> Result<Self::Ok, SerError> {
        self.object(v)
    }
    fn serialize_u16(self, v: u16) -> Result<Self::Ok, SerError> {
        self.object(v)
    }
    fn serialize_u32(self, v: u32) -> Result<Self::Ok, SerError> {
        self.object(v)
    }
    fn serialize_u64(self, v: u64) -> Result<Self::Ok, SerError> {
        self.object(v)
    }
    fn serialize_f32(self, v: f32) -> Result<Self::Ok, SerError> {
        self.object(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<Self::Ok, SerError> {
        self.object(v)
    }
    fn serialize_char(self, v: char) -> Result<Self::Ok, SerError> {
        self.object(v.to_string())
    }
    fn serialize_str(self, v: &str) -> Result<Self::Ok, SerError> {
        self.object(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Self::Ok, SerError> {
        Ok(PyList::new(self.py, v)?.into_any())
    }
    fn serialize_none(self) -> Result<Self::Ok, SerError> {
        Ok(self.py.None().into_bound(self.py))
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Self::Ok, SerError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Self::Ok, SerError> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Self::Ok, SerError> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Self::Ok, SerError> {
        self.object(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Self::Ok, SerError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Self::Ok, SerError> {
        let mut map = DictBuilder::new(self.py, None);
        map.serialize_entry(variant, value)?;
        map.finish()
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<SeqBuilder<'py>, SerError> {
        Ok(SeqBuilder {
            py: self.py,
            items: Vec::with_capacity(len.unwrap_or(0)),
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<SeqBuilder<'py>, SerError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<SeqBuilder<'py>, SerError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        len: usize,
    ) -> Result<SeqBuilder<'py>, SerError> {
        // Not produced by any core type; a plain list is a faithful enough shape.
        self.serialize_seq(Some(len))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<DictBuilder<'py>, SerError> {
        Ok(DictBuilder::new(self.py, None))
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<DictBuilder<'py>, SerError> {
        Ok(DictBuilder::new(self.py, None))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<DictBuilder<'py>, SerError> {
        Ok(DictBuilder::new(self.py, Some(variant)))
    }
}

impl<'py> ser::SerializeSeq for SeqBuilder<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = SerError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerError> {
        self.items
            .push(value.serialize(PySerializer { py: self.py })?);
        Ok(())
    }

    fn end(self) -> Result<Self::Ok, SerError> {
        Ok(PyList::new(self.py, self.items)?.into_any())
    }
}

impl<'py> ser::SerializeTuple for SeqBuilder<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = SerError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerError> {
        ser::SerializeSeq::serialize_element(self, value)
    }

    fn end(self) -> Result<Self::Ok, SerError> {
        ser::SerializeSeq::end(self)
    }
}

impl<'py> ser::SerializeTupleStruct for SeqBuilder<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = SerError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerError> {
        ser::SerializeSeq::serialize_element(self, value)
    }

    fn end(self) -> Result<Self::Ok, SerError> {
        ser::SerializeSeq::end(self)
    }
}

impl<'py> ser::SerializeTupleVariant for SeqBuilder<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = SerError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerError> {
        ser::SerializeSeq::serialize_element(self, value)
    }

    fn end(self) -> Result<Self::Ok, SerError> {
        ser::SerializeSeq::end(self)
    }
}

impl<'py> ser::SerializeMap for DictBuilder<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = SerError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), SerError> {
        let key = key.serialize(PySerializer { py: self.py })?;
        // JSON object keys are strings.
        let key = if key.is_instance_of::<PyString>() {
            key
        } else {
            key.str()?.into_any()
        };
        self.key = Some(key);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerError> {
        let key = self
            .key
            .take()
            .ok_or_else(|| SerError("a map value without a key".into()))?;
        let value = value.serialize(PySerializer { py: self.py })?;
        self.dict.set_item(key, value)?;
        Ok(())
    }

    fn end(self) -> Result<Self::Ok, SerError> {
        self.finish()
    }
}

impl<'py> ser::SerializeStruct for DictBuilder<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = SerError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SerError> {
        let value = value.serialize(PySerializer { py: self.py })?;
        self.dict.set_item(key, value)?;
        Ok(())
    }

    fn end(self) -> Result<Self::Ok, SerError> {
        self.finish()
    }
}

impl<'py> ser::SerializeStructVariant for DictBuilder<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = SerError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SerError> {
        ser::SerializeStruct::serialize_field(self, key, value)
    }

    fn end(self) -> Result<Self::Ok, SerError> {
        self.finish()
    }
}
