//! Type conversion between JavaScript values and the core's JSON: arguments go in as
//! `serde_json::Value` (validated by the core's `from_json` functions), results come out through
//! serde, straight into JavaScript objects.
//!
//! JavaScript has one number type, so the conversion decides what JSON number a value is: a
//! finite number without a fractional part is a JSON integer (`5` and `5.0` are the same value in
//! JavaScript), any other finite number stays fractional, and `NaN`/`±Infinity` (which JSON cannot
//! hold) are a `TypeError`. An object property whose value is `undefined` counts as absent (as in
//! `JSON.stringify`); `undefined` in an array is `null`. Functions, symbols, BigInts and values
//! nested more than [`MAX_DEPTH`] deep (cycles included) are a `TypeError`.
//!
//! Results: every number is a JavaScript number (counts and millisecond timestamps are far below
//! 2^53), `None` is `null`, and objects keep the field order of the core's types.

use napi::bindgen_prelude::{
    Array, JsObjectValue, JsValue, KeyCollectionMode, KeyConversion, KeyFilter, Null, Object,
    Property, PropertyAttributes, ToNapiValue, Unknown,
};
use napi::{Env, ValueType};
use serde::Serialize;
use serde::ser::{self, Impossible};
use serde_json::{Map, Number, Value};

use crate::error::{Context, Failure};

/// How deep a value may nest (a cyclic value hits this limit).
pub const MAX_DEPTH: usize = 128;

/// How many values one argument may hold in all (so a sparse array with a huge length is
/// refused before it is walked).
pub const MAX_VALUES: usize = 10_000_000;

/// Converts a JavaScript value to JSON; a value JSON cannot hold is a `TypeError` with the
/// context's code. `undefined` is `null`. `name` names the argument in messages
/// (`config.failureThreshold must be a finite number, not NaN`).
pub fn from_js_named(value: &Unknown<'_>, context: Context, name: &str) -> Result<Value, Failure> {
    let mut walker = Walker {
        context,
        remaining: MAX_VALUES,
    };
    walker.walk(value, 0, name)
}

/// An optional argument: `undefined` and `null` are `null`, anything else converted.
pub fn from_js_opt(
    value: Option<&Unknown<'_>>,
    context: Context,
    name: &str,
) -> Result<Value, Failure> {
    match value {
        None => Ok(Value::Null),
        Some(v) => from_js_named(v, context, name),
    }
}

/// A required string argument.
pub fn string_arg(value: Option<&Unknown<'_>>, name: &str) -> Result<String, Failure> {
    match value
        .map(|v| from_js_named(v, Context::Argument, name))
        .transpose()?
    {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(Context::Argument
            .type_error(format!("{name} must be a string, not {}", describe(&other)))),
        None => {
            Err(Context::Argument.type_error(format!("{name} must be a string, not undefined")))
        }
    }
}

/// A whole number of milliseconds (`>= 0`).
pub fn millis_arg(value: Option<&Unknown<'_>>, name: &str) -> Result<u64, Failure> {
    let converted = match value {
        Some(v) => from_js_named(v, Context::Argument, name)?,
        None => {
            return Err(Context::Argument.type_error(format!(
                "{name} must be a whole number of milliseconds >= 0, not undefined"
            )));
        }
    };
    match converted.as_u64() {
        Some(ms) => Ok(ms),
        None if converted.is_number() => Err(Failure::Core(agentbreaker::Error::InvalidArgument(
            format!("{name} must be a whole number of milliseconds >= 0, not {converted}"),
        ))),
        None => Err(Context::Argument.type_error(format!(
            "{name} must be a whole number of milliseconds >= 0, not {}",
            describe(&converted)
        ))),
    }
}

/// A short name of a converted value's type, for messages.
pub fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The JSON number of a JavaScript number, `None` for `NaN` and `±Infinity`.
pub fn json_number(x: f64) -> Option<Number> {
    if !x.is_finite() {
        return None;
    }
    // 2^64 and -2^63 are exact in f64; `as` is exact for whole numbers inside the ranges.
    if x.fract() == 0.0 {
        if (0.0..18_446_744_073_709_551_616.0).contains(&x) {
            return Some(Number::from(x as u64));
        }
        if (-9_223_372_036_854_775_808.0..0.0).contains(&x) {
            return Some(Number::from(x as i64));
        }
    }
    Number::from_f64(x)
}

struct Walker {
    context: Context,
    remaining: usize,
}

impl Walker {
    /// Checks that `n` more values fit in the budget.
    fn fits(&self, n: usize, path: &str) -> Result<(), Failure> {
        if n > self.remaining {
            return Err(self
                .context
                .type_error(format!("{} holds more than {MAX_VALUES} values", at(path))));
        }
        Ok(())
    }

    fn count(&mut self, path: &str) -> Result<(), Failure> {
        self.fits(1, path)?;
        self.remaining -= 1;
        Ok(())
    }

    fn walk(&mut self, value: &Unknown<'_>, depth: usize, path: &str) -> Result<Value, Failure> {
        self.count(path)?;
        Ok(match value.get_type()? {
            ValueType::Undefined | ValueType::Null => Value::Null,
            ValueType::Boolean => Value::Bool(value.coerce_to_bool()?),
            ValueType::Number => {
                let x = value.coerce_to_number()?.get_double()?;
                match json_number(x) {
                    Some(n) => Value::Number(n),
                    None => {
                        let shown = if x.is_nan() {
                            "NaN"
                        } else if x > 0.0 {
                            "Infinity"
                        } else {
                            "-Infinity"
                        };
                        return Err(self.context.type_error(format!(
                            "{} must be a finite number, not {shown}",
                            at(path)
                        )));
                    }
                }
            }
            ValueType::String => {
                Value::String(value.coerce_to_string()?.into_utf8()?.into_owned()?)
            }
            ValueType::Object => {
                if depth >= MAX_DEPTH {
                    return Err(self.context.type_error(format!(
                        "{} nests more than {MAX_DEPTH} levels deep (is it cyclic?)",
                        at(path)
                    )));
                }
                let object = value.coerce_to_object()?;
                if object.is_array()? {
                    self.array(&object, depth, path)?
                } else {
                    self.object(&object, depth, path)?
                }
            }
            other => {
                return Err(self.context.type_error(format!(
                    "{} cannot be converted to JSON ({})",
                    at(path),
                    type_word(other)
                )));
            }
        })
    }

    fn array(&mut self, array: &Object<'_>, depth: usize, path: &str) -> Result<Value, Failure> {
        let length = array.get_array_length()?;
        self.fits(length as usize, path)?;
        let mut items = Vec::with_capacity(length as usize);
        for i in 0..length {
            let item: Unknown<'_> = array.get_element(i)?;
            items.push(self.walk(&item, depth + 1, &format!("{path}[{i}]"))?);
        }
        Ok(Value::Array(items))
    }

    fn object(&mut self, object: &Object<'_>, depth: usize, path: &str) -> Result<Value, Failure> {
        let keys = object.get_all_property_names(
            KeyCollectionMode::OwnOnly,
            KeyFilter::Enumerable,
            KeyConversion::NumbersToStrings,
        )?;
        let count = keys.get_array_length()?;
        let mut map = Map::new();
        for i in 0..count {
            let key: Unknown<'_> = keys.get_element(i)?;
            if key.get_type()? != ValueType::String {
                continue; // symbol keys, as JSON.stringify
            }
            let name = key.coerce_to_string()?.into_utf8()?.into_owned()?;
            let item: Unknown<'_> = object.get_property(key)?;
            if item.get_type()? == ValueType::Undefined {
                continue;
            }
            let child = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            let converted = self.walk(&item, depth + 1, &child)?;
            map.insert(name, converted);
        }
        Ok(Value::Object(map))
    }
}

/// A value as a message shows it: its JSON, cut to [`MAX_SHOWN_CHARS`] characters, so that a
/// message never repeats a huge input.
pub fn shown(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.chars().take(MAX_SHOWN_CHARS + 1).collect::<String>(),
        other => other.to_string(),
    };
    let cut = text.chars().count() > MAX_SHOWN_CHARS;
    let text: String = text.chars().take(MAX_SHOWN_CHARS).collect();
    let text = if value.is_string() {
        format!("{text:?}")
    } else {
        text
    };
    if cut { format!("{text}...") } else { text }
}

/// How much of a value a message shows.
pub const MAX_SHOWN_CHARS: usize = 80;

/// The path of a value in messages (the start of a very long one).
fn at(path: &str) -> String {
    const MAX_PATH_CHARS: usize = 80;
    if path.is_empty() {
        "the value".to_string()
    } else if path.chars().count() > MAX_PATH_CHARS {
        let start: String = path.chars().take(MAX_PATH_CHARS).collect();
        format!("{start}...")
    } else {
        path.to_string()
    }
}

fn type_word(t: ValueType) -> &'static str {
    match t {
        ValueType::Function => "a function",
        ValueType::Symbol => "a symbol",
        ValueType::BigInt => "a bigint",
        ValueType::External => "an external",
        _ => "an unsupported value",
    }
}

// ---------------------------------------------------------------------------------------------
// Results: a serde Serializer that builds JavaScript values.

/// Converts a result of the core to a JavaScript value.
pub fn to_js<'e, T: Serialize + ?Sized>(env: &'e Env, value: &T) -> napi::Result<Unknown<'e>> {
    value.serialize(JsSerializer { env }).map_err(|e| e.0)
}

/// [`to_js`] as a [`Failure`].
pub fn result<'e, T: Serialize + ?Sized>(env: &'e Env, value: &T) -> Result<Unknown<'e>, Failure> {
    Ok(to_js(env, value)?)
}

/// A serialization error: a napi call failed, or a value has no JavaScript form.
#[derive(Debug)]
pub struct SerError(napi::Error);

impl std::fmt::Display for SerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.reason)
    }
}

impl std::error::Error for SerError {}

impl ser::Error for SerError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        SerError(napi::Error::from_reason(msg.to_string()))
    }
}

impl From<napi::Error> for SerError {
    fn from(e: napi::Error) -> Self {
        SerError(e)
    }
}

type SerResult<'e> = Result<Unknown<'e>, SerError>;

#[derive(Clone, Copy)]
struct JsSerializer<'e> {
    env: &'e Env,
}

impl<'e> JsSerializer<'e> {
    fn value<T: ToNapiValue>(self, v: T) -> SerResult<'e> {
        Ok(v.into_unknown(self.env)?)
    }

    fn number(self, v: f64) -> SerResult<'e> {
        self.value(v)
    }

    /// `{variant: value}`, serde's external tagging.
    fn tagged(self, variant: &str, value: Unknown<'e>) -> SerResult<'e> {
        let mut object = Object::new(self.env)?;
        object.set(variant, value)?;
        Ok(object.to_unknown())
    }
}

impl<'e> ser::Serializer for JsSerializer<'e> {
    type Ok = Unknown<'e>;
    type Error = SerError;
    type SerializeSeq = ArrayBuilder<'e>;
    type SerializeTuple = ArrayBuilder<'e>;
    type SerializeTupleStruct = ArrayBuilder<'e>;
    type SerializeTupleVariant = ArrayBuilder<'e>;
    type SerializeMap = ObjectBuilder<'e>;
    type SerializeStruct = ObjectBuilder<'e>;
    type SerializeStructVariant = ObjectBuilder<'e>;

    fn serialize_bool(self, v: bool) -> SerResult<'e> {
        self.value(v)
    }
    fn serialize_i8(self, v: i8) -> SerResult<'e> {
        self.number(f64::from(v))
    }
    fn serialize_i16(self, v: i16) -> SerResult<'e> {
        self.number(f64::from(v))
    }
    fn serialize_i32(self, v: i32) -> SerResult<'e> {
        self.number(f64::from(v))
    }
    fn serialize_i64(self, v: i64) -> SerResult<'e> {
        self.number(v as f64)
    }
    fn serialize_u8(self, v: u8) -> SerResult<'e> {
        self.number(f64::from(v))
    }
    fn serialize_u16(self, v: u16) -> SerResult<'e> {
        self.number(f64::from(v))
    }
    fn serialize_u32(self, v: u32) -> SerResult<'e> {
        self.number(f64::from(v))
    }
    fn serialize_u64(self, v: u64) -> SerResult<'e> {
        self.number(v as f64)
    }
    fn serialize_f32(self, v: f32) -> SerResult<'e> {
        self.number(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> SerResult<'e> {
        self.number(v)
    }
    fn serialize_char(self, v: char) -> SerResult<'e> {
        self.value(v.to_string())
    }
    fn serialize_str(self, v: &str) -> SerResult<'e> {
        self.value(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> SerResult<'e> {
        let mut seq = ser::Serializer::serialize_seq(self, Some(v.len()))?;
        for b in v {
            ser::SerializeSeq::serialize_element(&mut seq, b)?;
        }
        ser::SerializeSeq::end(seq)
    }
    fn serialize_none(self) -> SerResult<'e> {
        self.value(Null)
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> SerResult<'e> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> SerResult<'e> {
        self.value(Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> SerResult<'e> {
        self.value(Null)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> SerResult<'e> {
        self.value(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> SerResult<'e> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> SerResult<'e> {
        let inner = value.serialize(self)?;
        self.tagged(variant, inner)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<ArrayBuilder<'e>, SerError> {
        ArrayBuilder::new(self, None)
    }
    fn serialize_tuple(self, _len: usize) -> Result<ArrayBuilder<'e>, SerError> {
        ArrayBuilder::new(self, None)
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<ArrayBuilder<'e>, SerError> {
        ArrayBuilder::new(self, None)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<ArrayBuilder<'e>, SerError> {
        ArrayBuilder::new(self, Some(variant))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<ObjectBuilder<'e>, SerError> {
        ObjectBuilder::new(self, None)
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<ObjectBuilder<'e>, SerError> {
        ObjectBuilder::new(self, None)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<ObjectBuilder<'e>, SerError> {
        ObjectBuilder::new(self, Some(variant))
    }
}

struct ArrayBuilder<'e> {
    ser: JsSerializer<'e>,
    array: Array<'e>,
    next: u32,
    variant: Option<&'static str>,
}

impl<'e> ArrayBuilder<'e> {
    fn new(ser: JsSerializer<'e>, variant: Option<&'static str>) -> Result<Self, SerError> {
        Ok(ArrayBuilder {
            ser,
            array: ser.env.create_array(0)?,
            next: 0,
            variant,
        })
    }

    fn push<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), SerError> {
        let item = value.serialize(self.ser)?;
        self.array.set(self.next, item)?;
        self.next += 1;
        Ok(())
    }

    fn finish(self) -> SerResult<'e> {
        let array = self.array.to_unknown();
        match self.variant {
            Some(variant) => self.ser.tagged(variant, array),
            None => Ok(array),
        }
    }
}

impl<'e> ser::SerializeSeq for ArrayBuilder<'e> {
    type Ok = Unknown<'e>;
    type Error = SerError;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), SerError> {
        self.push(value)
    }
    fn end(self) -> SerResult<'e> {
        self.finish()
    }
}

impl<'e> ser::SerializeTuple for ArrayBuilder<'e> {
    type Ok = Unknown<'e>;
    type Error = SerError;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), SerError> {
        self.push(value)
    }
    fn end(self) -> SerResult<'e> {
        self.finish()
    }
}

impl<'e> ser::SerializeTupleStruct for ArrayBuilder<'e> {
    type Ok = Unknown<'e>;
    type Error = SerError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), SerError> {
        self.push(value)
    }
    fn end(self) -> SerResult<'e> {
        self.finish()
    }
}

impl<'e> ser::SerializeTupleVariant for ArrayBuilder<'e> {
    type Ok = Unknown<'e>;
    type Error = SerError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), SerError> {
        self.push(value)
    }
    fn end(self) -> SerResult<'e> {
        self.finish()
    }
}

struct ObjectBuilder<'e> {
    ser: JsSerializer<'e>,
    object: Object<'e>,
    key: Option<String>,
    variant: Option<&'static str>,
}

impl<'e> ObjectBuilder<'e> {
    fn new(ser: JsSerializer<'e>, variant: Option<&'static str>) -> Result<Self, SerError> {
        Ok(ObjectBuilder {
            ser,
            object: Object::new(ser.env)?,
            key: None,
            variant,
        })
    }

    /// Map keys are data (an error fingerprint, a model name): defined as own properties, so a
    /// key such as `__proto__` is a plain property, as `JSON.parse` makes it.
    fn define(&mut self, key: &str, value: Unknown<'e>) -> Result<(), SerError> {
        let property = Property::new()
            .with_name(self.ser.env, key)?
            .with_value(&value)
            .with_property_attributes(
                PropertyAttributes::Writable
                    | PropertyAttributes::Enumerable
                    | PropertyAttributes::Configurable,
            );
        self.object.define_properties(&[property])?;
        Ok(())
    }

    fn finish(self) -> SerResult<'e> {
        let object = self.object.to_unknown();
        match self.variant {
            Some(variant) => self.ser.tagged(variant, object),
            None => Ok(object),
        }
    }
}

impl<'e> ser::SerializeMap for ObjectBuilder<'e> {
    type Ok = Unknown<'e>;
    type Error = SerError;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), SerError> {
        self.key = Some(key.serialize(KeySerializer)?);
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), SerError> {
        let key = self
            .key
            .take()
            .ok_or_else(|| <SerError as ser::Error>::custom("a map value without a key"))?;
        let value = value.serialize(self.ser)?;
        self.define(&key, value)
    }
    fn end(self) -> SerResult<'e> {
        self.finish()
    }
}

impl<'e> ser::SerializeStruct for ObjectBuilder<'e> {
    type Ok = Unknown<'e>;
    type Error = SerError;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SerError> {
        let value = value.serialize(self.ser)?;
        self.object.set(key, value)?;
        Ok(())
    }
    fn end(self) -> SerResult<'e> {
        self.finish()
    }
}

impl<'e> ser::SerializeStructVariant for ObjectBuilder<'e> {
    type Ok = Unknown<'e>;
    type Error = SerError;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SerError> {
        let value = value.serialize(self.ser)?;
        self.object.set(key, value)?;
        Ok(())
    }
    fn end(self) -> SerResult<'e> {
        self.finish()
    }
}

/// Map keys: strings (and numbers, written as JSON writes them).
struct KeySerializer;

fn key_error() -> SerError {
    <SerError as ser::Error>::custom("map keys must be strings")
}

impl ser::Serializer for KeySerializer {
    type Ok = String;
    type Error = SerError;
    type SerializeSeq = Impossible<String, SerError>;
    type SerializeTuple = Impossible<String, SerError>;
    type SerializeTupleStruct = Impossible<String, SerError>;
    type SerializeTupleVariant = Impossible<String, SerError>;
    type SerializeMap = Impossible<String, SerError>;
    type SerializeStruct = Impossible<String, SerError>;
    type SerializeStructVariant = Impossible<String, SerError>;

    fn serialize_str(self, v: &str) -> Result<String, SerError> {
        Ok(v.to_string())
    }
    fn serialize_char(self, v: char) -> Result<String, SerError> {
        Ok(v.to_string())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<String, SerError> {
        Ok(variant.to_string())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<String, SerError> {
        value.serialize(self)
    }
    fn serialize_bool(self, _v: bool) -> Result<String, SerError> {
        Err(key_error())
    }
    fn serialize_i8(self, v: i8) -> Result<String, SerError> {
        Ok(v.to_string())
    }
    fn serialize_i16(self, v: i16) -> Result<String, SerError> {
        Ok(v.to_string())
    }
    fn serialize_i32(self, v: i32) -> Result<String, SerError> {
        Ok(v.to_string())
    }
    fn serialize_i64(self, v: i64) -> Result<String, SerError> {
        Ok(v.to_string())
    }
    fn serialize_u8(self, v: u8) -> Result<String, SerError> {
        Ok(v.to_string())
    }
    fn serialize_u16(self, v: u16) -> Result<String, SerError> {
        Ok(v.to_string())
    }
    fn serialize_u32(self, v: u32) -> Result<String, SerError> {
        Ok(v.to_string())
    }
    fn serialize_u64(self, v: u64) -> Result<String, SerError> {
        Ok(v.to_string())
    }
    fn serialize_f32(self, _v: f32) -> Result<String, SerError> {
        Err(key_error())
    }
    fn serialize_f64(self, _v: f64) -> Result<String, SerError> {
        Err(key_error())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<String, SerError> {
        Err(key_error())
    }
    fn serialize_none(self) -> Result<String, SerError> {
        Err(key_error())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _value: &T) -> Result<String, SerError> {
        Err(key_error())
    }
    fn serialize_unit(self) -> Result<String, SerError> {
        Err(key_error())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<String, SerError> {
        Err(key_error())
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<String, SerError> {
        Err(key_error())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, SerError> {
        Err(key_error())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, SerError> {
        Err(key_error())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, SerError> {
        Err(key_error())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, SerError> {
        Err(key_error())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, SerError> {
        Err(key_error())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, SerError> {
        Err(key_error())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, SerError> {
        Err(key_error())
    }
}
