//! What every binding shares (issue 21): one place decides how a host value becomes the core's
//! JSON, which error code a bad value gets, what a panic becomes and what an optional argument
//! defaults to, so that Python, Node, Lua and C cannot drift apart.
//!
//! A binding walks a host value into a [`serde_json::Value`] (refusing nesting deeper than
//! [`MAX_DEPTH`], numbers through [`whole_number`] or [`float`], failures through the
//! [`ArgKind`] of the argument), hands it to the core's `from_json` validators, and turns results
//! back with `serde_json::to_value` and one walk into host objects. Every entry point runs inside
//! [`catch`] (or turns a caught payload into [`panic_error`]), so a panic is `INTERNAL`, never a
//! crash. The parsers at the end ([`state`], [`error_match`]) give optional arguments the core's
//! defaults. Each core object is made from its JSON config and a clock by [`FromConfig`], as
//! every binding's constructor makes it, and the six event sources share [`EventSource`].

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::Deserialize;
use serde_json::{Map, Number, Value};

use crate::StrategyConfig;
use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::events::{Listener, ListenerId};
use crate::fingerprint::ErrorMatch;
use crate::metrics::{self, Update};
use crate::state::State;
use crate::{BudgetBreaker, BudgetConfig, ExitStrategy, FailureBreaker, FailureConfig, Loop};
use crate::{LoopConfig, Monitor, MonitorConfig, StagnationBreaker, StagnationConfig};

/// How many containers (arrays and objects; a host's lists, tuples, dicts, mappings, tables) a
/// value may nest, the outermost counting as one: `{"input": [[1]]}` nests 3, a scalar adds none.
/// A cyclic or hostile structure stops here instead of overflowing the stack.
///
/// The same for every binding and for JSON text: it is the recursion limit of serde_json's parser
/// (which every JSON-text entry point uses: the C binding, the CLI), which accepts 127 containers
/// and refuses the 128th. A walker counts the containers around a value (0 for the argument
/// itself; 1 for a field of an object the binding makes, such as a keyword argument) and refuses
/// a container found inside `MAX_DEPTH` others with [`ArgKind::too_deep`].
pub const MAX_DEPTH: usize = 127;

/// What kind of value a binding is converting: decides the error code of a bad one. A
/// constructor's config is `INVALID_CONFIG`, an operation's argument `INVALID_ARGUMENT`, an event
/// `INVALID_EVENT`, a snapshot `INVALID_SNAPSHOT`, whatever the host type that was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// A constructor's configuration (or one of its keywords).
    Config,
    /// An operation's argument.
    Argument,
    /// An event (`ingest`, `observe`, a loop's `events`).
    Event,
    /// A snapshot given to `restore`.
    Snapshot,
}

impl ArgKind {
    /// The error of this kind, with `message` (cut at [`crate::error::MAX_MESSAGE_BYTES`]).
    pub fn error(self, message: impl fmt::Display) -> Error {
        match self {
            ArgKind::Config => Error::config(message),
            ArgKind::Argument => Error::argument(message),
            ArgKind::Event => Error::event(message),
            ArgKind::Snapshot => Error::snapshot(message),
        }
    }

    /// The stable code of this kind (`"INVALID_CONFIG"`, ...).
    pub fn code(self) -> &'static str {
        self.error("").code()
    }

    /// `{what} must be {expected}, not {got}`.
    pub fn wrong_type(self, what: &str, expected: &str, got: &str) -> Error {
        self.error(format_args!("{what} must be {expected}, not {got}"))
    }

    /// A value nesting more than [`MAX_DEPTH`] containers.
    pub fn too_deep(self, what: &str) -> Error {
        self.error(format_args!(
            "{what} is nested more than {MAX_DEPTH} levels deep (is it cyclic?)"
        ))
    }

    /// NaN or an infinity, which JSON cannot hold.
    pub fn not_finite(self, what: &str, x: f64) -> Error {
        let shown = if x.is_nan() {
            "NaN"
        } else if x > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        };
        self.error(format_args!("{what} must be a finite number, not {shown}"))
    }

    /// A host integer outside the 64-bit range.
    pub fn out_of_range(self, what: &str) -> Error {
        self.error(format_args!("{what} is an integer out of the 64-bit range"))
    }
}

/// Where a value sits in an argument (`event.input[2]`; in Python `event['input'][2]`), written
/// out only for a message.
#[derive(Debug, Clone, Copy)]
pub enum At<'a> {
    /// The argument, by its name.
    Root(&'a str),
    /// An item of a list: `[2]`.
    Index(&'a At<'a>, i64),
    /// A field of an object: `.key`.
    Key(&'a At<'a>, &'a str),
    /// A key of a Python mapping: `['key']`.
    Item(&'a At<'a>, &'a str),
}

impl At<'_> {
    /// The name of the argument the value sits in.
    pub fn root(&self) -> &str {
        match self {
            At::Root(name) => name,
            At::Index(parent, _) | At::Key(parent, _) | At::Item(parent, _) => parent.root(),
        }
    }
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Root(name) => f.write_str(name),
            At::Index(parent, i) => write!(f, "{parent}[{i}]"),
            At::Key(parent, key) => write!(f, "{parent}.{key}"),
            At::Item(parent, key) => write!(f, "{parent}['{key}']"),
        }
    }
}

/// Keys whose value is a list in the contract's shapes: an empty table there is `[]`.
const LIST_KEYS: &str =
    "failureHistory outputTrend baselineOutputs steps members events files tasks stack";

/// A Lua table as JSON, from its string keys' values (`map`) and its number keys' (`items`, by
/// index), and its `__jsontype` marker (`Some(true)`: `"array"`), for a host whose one container
/// is both list and object. Unmarked, keys `1..n` make a list, string keys an object, and an empty
/// table is an object but under a key whose value is a list in the contract's shapes. Mixed keys
/// and keys that are not `1..n` are refused (a marked list may have holes where its nulls were).
pub fn table(
    map: Map<String, Value>,
    mut items: Vec<(i64, Value)>,
    marked: Option<bool>,
    at: &At<'_>,
    kind: ArgKind,
) -> Result<Value> {
    let empty = map.is_empty() && items.is_empty();
    let under_list_key = |at: &At| match at {
        At::Key(_, key) => LIST_KEYS.split(' ').any(|list| list == *key),
        _ => false,
    };
    if !marked.unwrap_or(if empty {
        under_list_key(at)
    } else {
        map.is_empty()
    }) {
        return match items.first() {
            None => Ok(Value::Object(map)),
            Some(_) => Err(kind.error(format_args!("{at} mixes list items and named keys"))),
        };
    }
    if let Some(key) = map.keys().next() {
        return Err(kind.error(format_args!("{at} is a list but has the key {key:?}")));
    }
    // Keys exactly 1..n; a marked list (dkjson) may leave holes where its nulls were.
    items.sort_unstable_by_key(|item| item.0);
    let (len, last) = (items.len() as i64, items.last().map_or(0, |item| item.0));
    let from_one = items.first().is_none_or(|item| item.0 >= 1);
    if !(from_one && (last == len || (marked.is_some() && last <= 4 * len + 16))) {
        return Err(kind.error(format_args!("{at} is not a list: its keys are not 1..n")));
    }
    let mut list = vec![Value::Null; last as usize];
    for (index, item) in items {
        list[index as usize - 1] = item;
    }
    Ok(Value::Array(list))
}

/// `{what} is required`: a required argument left out (or given as the host's null).
pub fn missing(what: &str) -> Error {
    Error::argument(format_args!("{what} is required"))
}

/// The JSON number of a host number from a host with one number type (JavaScript, LuaJIT, Lua
/// 5.1): a finite whole number is a JSON integer (`5` and `5.0` are one value there), any other
/// finite number stays fractional; `None` for NaN and the infinities.
pub fn whole_number(x: f64) -> Option<Number> {
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

/// The JSON number of a host float from a host whose integers are a type of their own (Python):
/// always fractional, even `5.0`, so a float given where a whole number belongs is refused as a
/// JSON `5.0` would be; `None` for NaN and the infinities.
pub fn float(x: f64) -> Option<Number> {
    Number::from_f64(x)
}

/// The text of a panic's payload (`panic!("...")` gives a `&str` or a `String`).
pub fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "a panic without a message"
    }
}

/// The `INTERNAL` error of a panic caught at a language boundary: `panic: <message>`.
pub fn panic_error(payload: &(dyn Any + Send)) -> Error {
    Error::Internal(crate::error::bounded(format_args!(
        "panic: {}",
        panic_message(payload)
    )))
}

/// Runs `f` as a language boundary: a panic becomes [`panic_error`] (its payload dropped inside
/// a boundary too, since dropping a payload can itself panic).
pub fn catch<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let error = panic_error(&*payload);
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            Err(error)
        }
    }
}

/// A circuit state given as an optional argument: `None` is the core's default (`CLOSED`), a
/// name other than `CLOSED`, `HALF_OPEN` or `OPEN` is `INVALID_ARGUMENT`.
pub fn state(name: Option<&str>) -> Result<State> {
    name.map_or(Ok(State::default()), str::parse)
}

/// An error-match mode given as an optional argument (not as a config field): `None` is the
/// core's default (`normalized`), an unknown name is `INVALID_ARGUMENT`.
pub fn error_match(name: Option<&str>) -> Result<ErrorMatch> {
    name.map_or(Ok(ErrorMatch::default()), ErrorMatch::from_argument)
}

/// A boolean of an option bag (`{transient}` of `recordError`, `{task}` of the metrics calls):
/// `options` is null or an object, `key` a boolean in it (left out or null: false). With `only`,
/// any other key is refused, so that a misspelt option is not silently ignored. Every refusal is
/// `INVALID_ARGUMENT`, its message naming the option bag `what`.
pub fn option_flag(options: &Value, what: &'static str, key: &str, only: bool) -> Result<bool> {
    let error = |m: String| Error::argument(m);
    let fields = match options {
        Value::Null => return Ok(false),
        _ if only => Fields::new(options, what, error, &[key])?,
        _ => Fields::open(options, what, error)?,
    };
    fields.bool_or(key, false)
}

/// The config key of a keyword argument (Python's): `failure_threshold` → `failureThreshold`. A
/// keyword that is not snake_case (lower-case words of letters and digits joined by single
/// underscores) is `INVALID_CONFIG`, with the snake_case spelling of a camelCase one as a hint.
pub fn config_key(keyword: &str) -> Result<String> {
    camel_case(keyword).ok_or_else(|| {
        // `failureThreshold` → `failure_threshold`, for the message.
        let mut hint = String::new();
        for c in keyword.chars() {
            if c.is_ascii_uppercase() {
                hint.push('_');
            }
            hint.push(c.to_ascii_lowercase());
        }
        let mut message = format!("unknown keyword argument '{keyword}'");
        if hint != keyword && camel_case(&hint).is_some() {
            message += &format!(" (did you mean '{hint}'?)");
        }
        Error::config(message)
    })
}

/// `failure_threshold` → `failureThreshold`; `None` when the keyword is not snake_case.
fn camel_case(keyword: &str) -> Option<String> {
    let word_ok = |w: &str| {
        !w.is_empty()
            && w.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    };
    if !keyword.starts_with(|c: char| c.is_ascii_lowercase()) || !keyword.split('_').all(word_ok) {
        return None;
    }
    let mut words = keyword.split('_');
    let mut out = words.next().unwrap_or_default().to_string();
    for word in words {
        out.push(word.as_bytes()[0].to_ascii_uppercase().into());
        out.push_str(&word[1..]);
    }
    Some(out)
}

/// A fix plan (an `ExitStrategy`) from a fix-plan config without `type` (`{steps}` or
/// `{markdown}`, optional `maxAttempts`) on `clock`: every binding's `FixPlan` constructor.
pub fn fix_plan(config: &Value, clock: SharedClock) -> Result<ExitStrategy> {
    let config = StrategyConfig::fix_plan_from_json(config)?;
    Ok(ExitStrategy::with_clock(config, clock))
}

/// Metric updates as Node and Lua hand them to a recorder: `[[name, value, attributes], ...]`.
pub fn updates_json(updates: &[Update]) -> Value {
    let attributes = |u: &Update| u.attributes.iter().cloned().collect::<BTreeMap<_, _>>();
    let update = |u: &Update| serde_json::json!([u.metric.name, u.value, attributes(u)]);
    Value::Array(updates.iter().map(update).collect())
}

/// The `{task}` option of a metrics call (`options` null or an object; other keys ignored).
pub fn metric_options(options: &Value, what: &'static str) -> Result<metrics::Options> {
    Ok(metrics::Options {
        task: option_flag(options, what, "task", false)?,
    })
}

/// A core object with listeners (contract section 8): the six event sources, for bindings that
/// handle them alike. Each method is the object's own method of the same name.
pub trait EventSource {
    /// Adds a listener.
    fn add_listener(&self, listener: Listener) -> ListenerId;
    /// Removes a listener; false when it was not registered.
    fn remove_listener(&self, id: ListenerId) -> bool;
    /// How many listener calls failed.
    fn listener_errors(&self) -> u64;
}

/// A core object made from its JSON config (`null` = the defaults, validated by the config's
/// `from_json`) and a clock: what every binding's constructor does.
pub trait FromConfig: Sized {
    /// The object of `config` on `clock`.
    fn from_config(config: &Value, clock: SharedClock) -> Result<Self>;
}

/// `EventSource` and `FromConfig` for each type, made by the expression after it.
macro_rules! core_objects {
    ($($t:ty: |$config:ident, $clock:ident| $make:expr;)*) => {$(
        impl EventSource for $t {
            fn add_listener(&self, listener: Listener) -> ListenerId {
                <$t>::add_listener(self, listener)
            }
            fn remove_listener(&self, id: ListenerId) -> bool {
                <$t>::remove_listener(self, id)
            }
            fn listener_errors(&self) -> u64 {
                <$t>::listener_errors(self)
            }
        }

        impl FromConfig for $t {
            fn from_config($config: &Value, $clock: SharedClock) -> Result<Self> {
                $make
            }
        }
    )*};
}

core_objects! {
    FailureBreaker: |c, clock| Self::with_clock(FailureConfig::from_json(c)?, clock);
    StagnationBreaker: |c, clock| Self::with_clock(StagnationConfig::from_json(c)?, clock);
    BudgetBreaker: |c, clock| Self::with_clock(BudgetConfig::from_json(c)?, clock);
    ExitStrategy: |c, clock| Ok(Self::with_clock(StrategyConfig::from_json(c)?, clock));
    Loop: |c, clock| Self::with_clock(LoopConfig::from_json(c)?, clock);
    Monitor: |c, clock| Self::with_clock(MonitorConfig::from_json(c)?, clock);
}

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
pub fn type_name(v: &Value) -> &'static str {
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

    #[test]
    fn each_kind_has_its_code() {
        for (kind, code) in [
            (ArgKind::Config, "INVALID_CONFIG"),
            (ArgKind::Argument, "INVALID_ARGUMENT"),
            (ArgKind::Event, "INVALID_EVENT"),
            (ArgKind::Snapshot, "INVALID_SNAPSHOT"),
        ] {
            assert_eq!(kind.code(), code);
            assert_eq!(kind.too_deep("x").code(), code);
            assert_eq!(kind.not_finite("x", f64::NAN).code(), code);
            assert_eq!(kind.wrong_type("x", "a str", "int").code(), code);
        }
        let e = ArgKind::Config.not_finite("cooldown_ms", f64::NEG_INFINITY);
        assert_eq!(
            e.message(),
            "cooldown_ms must be a finite number, not -Infinity"
        );
        assert!(ArgKind::Event.error("é".repeat(4096)).message().len() < 1100);
        assert_eq!(missing("error").code(), "INVALID_ARGUMENT");
    }

    #[test]
    fn numbers_follow_the_host_rules() {
        assert_eq!(whole_number(5.0), Some(Number::from(5u64)));
        assert_eq!(whole_number(-3.0), Some(Number::from(-3i64)));
        assert_eq!(whole_number(2.5).and_then(|n| n.as_f64()), Some(2.5));
        assert!(whole_number(18_446_744_073_709_551_616.0).is_some_and(|n| n.is_f64()));
        assert_eq!(whole_number(f64::NAN), None);
        assert_eq!(whole_number(f64::INFINITY), None);
        assert!(
            float(5.0).is_some_and(|n| n.is_f64()),
            "a float stays fractional"
        );
        assert_eq!(float(f64::NAN), None);
    }

    #[test]
    fn max_depth_is_what_serde_json_parses() {
        let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let object = |n: usize| format!("{}{{}}{}", "{\"a\":".repeat(n - 1), "}".repeat(n - 1));
        for text in [nested(MAX_DEPTH), object(MAX_DEPTH)] {
            assert!(serde_json::from_str::<Value>(&text).is_ok(), "{text}");
        }
        for text in [nested(MAX_DEPTH + 1), object(MAX_DEPTH + 1)] {
            let e = serde_json::from_str::<Value>(&text).unwrap_err();
            assert!(e.to_string().starts_with("recursion limit exceeded"), "{e}");
        }
        let e = ArgKind::Event.too_deep("event");
        assert_eq!(
            e.message(),
            "event is nested more than 127 levels deep (is it cyclic?)"
        );
    }

    #[test]
    fn panics_become_internal_errors() {
        let e = catch::<()>(|| panic!("boom {}", 1)).unwrap_err();
        assert_eq!((e.code(), e.message()), ("INTERNAL", "panic: boom 1"));
        let e = catch::<()>(|| std::panic::panic_any(7)).unwrap_err();
        assert_eq!(e.message(), "panic: a panic without a message");
        assert_eq!(catch(|| Ok(3)).unwrap(), 3);
        let huge = "x".repeat(10_000);
        assert!(
            catch::<()>(|| panic!("{huge}"))
                .unwrap_err()
                .message()
                .len()
                < 1100
        );
    }

    #[test]
    fn core_objects_come_from_configs_and_take_listeners() {
        let clock = crate::SystemClock::shared();
        let bad = json!({"noSuchKey": 1});
        let e = FailureBreaker::from_config(&bad, clock.clone()).err();
        assert_eq!(e.map(|e| e.code()), Some("INVALID_CONFIG"));
        let e = ExitStrategy::from_config(&bad, clock.clone()).err();
        assert_eq!(e.map(|e| e.code()), Some("INVALID_CONFIG"));
        let monitor = Monitor::from_config(&Value::Null, clock).unwrap();
        let source: &dyn EventSource = &monitor;
        let id = source.add_listener(std::sync::Arc::new(|_| Ok(())));
        assert!(source.remove_listener(id) && !source.remove_listener(id));
        assert_eq!(source.listener_errors(), 0);
    }

    #[test]
    fn paths_option_bags_and_keywords() {
        let root = At::Root("event");
        let (input, item) = (At::Key(&root, "input"), At::Item(&root, "input"));
        assert_eq!(At::Index(&input, 2).to_string(), "event.input[2]");
        assert_eq!(At::Index(&item, 2).to_string(), "event['input'][2]");
        assert_eq!(At::Index(&item, 2).root(), "event");
        let flag = |v: Value, only| option_flag(&v, "options", "transient", only);
        assert!(
            !flag(Value::Null, true).unwrap() && flag(json!({"transient": true}), true).unwrap()
        );
        assert!(!flag(json!({"transient": null, "x": 1}), false).unwrap());
        for bad in [json!({"x": true}), json!({"transient": 1}), json!(3)] {
            assert_eq!(flag(bad, true).unwrap_err().code(), "INVALID_ARGUMENT");
        }
        assert_eq!(config_key("failure_threshold").unwrap(), "failureThreshold");
        let e = config_key("failureThreshold").unwrap_err();
        assert_eq!(e.code(), "INVALID_CONFIG");
        assert!(e.message().ends_with("(did you mean 'failure_threshold'?)"));
        assert!(config_key("_x").is_err() && config_key("a__b").is_err());
        let monitor = Monitor::from_config(&Value::Null, crate::SystemClock::shared()).unwrap();
        let other = Monitor::from_config(&Value::Null, crate::SystemClock::shared()).unwrap();
        let id = monitor.add_listener(std::sync::Arc::new(|_| Ok(())));
        let other_id = other.add_listener(std::sync::Arc::new(|_| Ok(())));
        assert!(id.number() > 0 && other_id.number() != id.number());
        assert!(!other.remove_listener(ListenerId::from_number(id.number())));
        assert!(monitor.remove_listener(ListenerId::from_number(id.number())));
        assert!(other.remove_listener(other_id));
    }

    #[test]
    fn optional_arguments_take_the_core_defaults() {
        assert_eq!(state(None).unwrap(), State::Closed);
        assert_eq!(state(Some("OPEN")).unwrap(), State::Open);
        assert_eq!(state(Some("open")).unwrap_err().code(), "INVALID_ARGUMENT");
        assert_eq!(error_match(None).unwrap(), ErrorMatch::default());
        assert_eq!(error_match(Some("exact")).unwrap(), ErrorMatch::Exact);
        assert_eq!(
            error_match(Some("x")).unwrap_err().code(),
            "INVALID_ARGUMENT"
        );
    }
}
