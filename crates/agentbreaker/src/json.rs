//! Conversions from JSON values, shared by every binding and the conformance runners, so that
//! every surface validates input the same way and reports the same error codes.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Deserializes a config object; any problem is `INVALID_CONFIG`. `null` means "all defaults",
/// and a field set to `null` is that field's default (as every other reader of optional values
/// treats it: `None`, `null`, `nil` and `undefined` all mean "not given").
pub(crate) fn config_from_value<'a, T: Deserialize<'a> + Default>(
    value: &'a Value,
    what: &str,
) -> Result<T> {
    match value {
        Value::Null => Ok(T::default()),
        // Deserializing from the borrowed value never copies it (a deep copy of a hostile,
        // deeply nested value could overflow the stack); null fields are left out on the way.
        Value::Object(map) => {
            // A null field must still be a known one: alone, an unknown key is refused by name.
            for key in map.iter().filter(|(_, v)| v.is_null()).map(|(k, _)| k) {
                let alone = std::iter::once((key.as_str(), &Value::Null));
                if let Err(e) = T::deserialize(serde::de::value::MapDeserializer::<
                    _,
                    serde_json::Error,
                >::new(alone))
                    && e.to_string().starts_with("unknown field")
                {
                    return Err(Error::config(format_args!("{what} config: {e}")));
                }
            }
            let fields = map
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.as_str(), v));
            T::deserialize(serde::de::value::MapDeserializer::<_, serde_json::Error>::new(fields))
                .map_err(|e| Error::config(format_args!("{what} config: {e}")))
        }
        other => Err(Error::config(format_args!(
            "{what} config must be an object, not {}",
            type_name(other)
        ))),
    }
}

/// A short name of a JSON value's type, for messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a fractional number",
        Value::Number(n) if n.is_i64() && n.as_i64().is_some_and(|i| i < 0) => "a negative number",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads fields of an argument object, rejecting unknown keys, with errors of one code.
pub(crate) struct Fields<'a> {
    map: &'a Map<String, Value>,
    make_error: fn(String) -> Error,
    what: &'static str,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(
        value: &'a Value,
        what: &'static str,
        make_error: fn(String) -> Error,
        allowed: &[&str],
    ) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(make_error(format!(
                "{what} must be an object, not {}",
                type_name(value)
            )));
        };
        if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(make_error(format!(
                "{what}: unknown key {unknown:?} (allowed: {})",
                allowed.join(", ")
            )));
        }
        Ok(Fields {
            map,
            make_error,
            what,
        })
    }

    /// Like [`Fields::new`] but accepting any keys (for objects that other systems extend).
    pub(crate) fn open(
        value: &'a Value,
        what: &'static str,
        make_error: fn(String) -> Error,
    ) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(make_error(format!(
                "{what} must be an object, not {}",
                type_name(value)
            )));
        };
        Ok(Fields {
            map,
            make_error,
            what,
        })
    }

    fn err(&self, key: &str, expected: &str, got: &Value) -> Error {
        (self.make_error)(format!(
            "{}: {key} must be {expected}, not {}",
            self.what,
            type_name(got)
        ))
    }

    /// The value of `key`, `None` when absent or null.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn u64_or(&self, key: &str, default: u64) -> Result<u64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .ok_or_else(|| self.err(key, "a whole number >= 0", v)),
        }
    }

    pub(crate) fn str_opt(&self, key: &str) -> Result<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.err(key, "a string", v)),
        }
    }

    pub(crate) fn str_req(&self, key: &str) -> Result<&'a str> {
        self.str_opt(key)?
            .ok_or_else(|| (self.make_error)(format!("{}: {key} is required", self.what)))
    }

    pub(crate) fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.err(key, "a boolean", v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_reject_unknown_keys_and_wrong_types() {
        let v = json!({"a": 1, "b": "x"});
        let f = Fields::new(&v, "thing", Error::InvalidArgument, &["a", "b"]).unwrap();
        assert_eq!(f.u64_or("a", 0).unwrap(), 1);
        assert_eq!(f.u64_or("zz", 7).unwrap(), 7);
        assert_eq!(f.u64_or("b", 0).unwrap_err().code(), "INVALID_ARGUMENT");
        assert_eq!(f.str_req("b").unwrap(), "x");
        let e = Fields::new(&v, "thing", Error::InvalidEvent, &["a"])
            .err()
            .unwrap();
        assert_eq!(e.code(), "INVALID_EVENT");
        let e = Fields::new(&json!(3), "thing", Error::InvalidEvent, &[])
            .err()
            .unwrap();
        assert!(e.message().contains("must be an object"));
    }

    #[test]
    fn fractional_and_negative_numbers_are_not_whole() {
        let v = json!({"a": 1.5, "b": -1});
        let f = Fields::new(&v, "m", Error::InvalidArgument, &["a", "b"]).unwrap();
        assert!(f.u64_or("a", 0).is_err());
        assert!(f.u64_or("b", 0).is_err());
    }
}
