//! JavaScript listeners on the core's event sources (the methods `agentbreaker.js` builds `on()`
//! and `off()` on are written by the crate's `methods!` macro).
//!
//! The core calls listeners after releasing its locks, on the thread that caused the event. An
//! object belongs to the JavaScript thread that made it, so every delivery runs inside the export
//! that caused the event: listeners are called synchronously, before it returns, with the env
//! [`EnvScope`] recorded (no ThreadsafeFunction, which would defer them to a later tick). Each
//! JavaScript listener is one core listener, so the core isolates them and counts the ones that
//! throw. `agentbreaker.js` keeps the user's function and hands the addon a trampoline reaching
//! it through a `WeakRef`, so a listener never keeps its object alive.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use agentbreaker::interop::{ArgKind, type_name};
use agentbreaker::metrics::{self, Recorder, Update};
use agentbreaker::{Event, Listener, ListenerId};
use napi::Env;
use napi::bindgen_prelude::{Either, FromNapiValue, Function, FunctionRef, Unknown};
use serde_json::{Value, json};

use crate::convert::{cut, opt_json, result, to_json};
use crate::error::Failure;

thread_local! {
    static CURRENT_ENV: Cell<Option<Env>> = const { Cell::new(None) };
}

/// Records the env of the export in progress on this thread (restored on drop, so exports
/// called from a listener nest).
pub struct EnvScope {
    previous: Option<Env>,
}

impl EnvScope {
    /// Enters an export.
    pub fn enter(env: &Env) -> Self {
        let previous = CURRENT_ENV.with(|c| c.replace(Some(*env)));
        EnvScope { previous }
    }
}

impl Drop for EnvScope {
    fn drop(&mut self) {
        CURRENT_ENV.with(|c| c.set(self.previous));
    }
}

/// A JavaScript function that receives one event.
pub type JsListener<'scope> = Function<'scope, Unknown<'static>, Unknown<'static>>;

/// The listener argument: a function, or anything else (refused with a `TypeError`).
pub type ListenerArg<'scope> = Either<JsListener<'scope>, Unknown<'scope>>;

fn event_type(event: &Event) -> &'static str {
    match event {
        Event::StateChange { .. } => "stateChange",
        Event::Warning { .. } => "warning",
        Event::Halt { .. } => "halt",
        Event::Verdict { .. } => "verdict",
    }
}

/// Updates as JavaScript gets them: `[[name, value, attributes], ...]`.
pub fn updates_json(updates: &[Update]) -> Value {
    let attributes = |u: &Update| u.attributes.iter().cloned().collect::<BTreeMap<_, _>>();
    let update = |u: &Update| json!([u.metric.name, u.value, attributes(u)]);
    Value::Array(updates.iter().map(update).collect())
}

/// `{task}` of a metrics call: `task` a boolean (default false); other keys are ignored.
pub fn metric_options(options: Option<&Unknown<'_>>) -> Result<metrics::Options, Failure> {
    let options = opt_json(options, ArgKind::Argument, "options")?;
    if !matches!(options, Value::Null | Value::Object(_)) {
        let e = ArgKind::Argument.wrong_type("options", "an object", type_name(&options));
        return Err(Failure::Type(e));
    }
    let task = flag(options.get("task"), "options.task")?;
    Ok(metrics::Options { task })
}

/// A boolean option: left out or `null` is false, anything else but a boolean a `TypeError`.
pub fn flag(value: Option<&Value>, what: &str) -> Result<bool, Failure> {
    match value {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => {
            let e = ArgKind::Argument.wrong_type(what, "a boolean", type_name(v));
            Err(Failure::Type(e))
        }
    }
}

/// A core metrics recorder calling `function` with the updates ([`updates_json`]), as a
/// listener is called: on the JavaScript thread, inside the call that caused them. What it
/// throws is dropped (a recorder must not stop the agent: the core contains a panicking one).
pub fn recorder(function: Unknown<'_>) -> Result<Recorder, Failure> {
    let Either::A(function) = ListenerArg::from_unknown(function)? else {
        let e = ArgKind::Argument.wrong_type("a recorder", "a function or null", "another value");
        return Err(Failure::Type(e));
    };
    let function: FunctionRef<Unknown<'static>, Unknown<'static>> = function.create_ref()?;
    Ok(Arc::new(move |updates: &[Update]| {
        if let Some(env) = CURRENT_ENV.with(Cell::get)
            && let Ok(argument) = result(&env, &updates_json(updates))
        {
            let _ = function.borrow_back(&env).and_then(|f| f.call(argument));
        }
    }))
}

/// The JavaScript listeners of one object, by the numbers handed to JavaScript.
#[derive(Debug, Default)]
pub struct JsListeners {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    next: u32,
    ids: HashMap<u32, ListenerId>,
}

impl JsListeners {
    /// Registers `function` for events of `kind` (one of `types`); returns the number that
    /// removes it.
    pub fn add(
        &self,
        register: impl FnOnce(Listener) -> ListenerId,
        types: &[&'static str],
        kind: &Unknown<'_>,
        function: &ListenerArg<'_>,
    ) -> Result<u32, Failure> {
        let Either::A(function) = function else {
            let e = ArgKind::Argument.wrong_type("a listener", "a function", "another value");
            return Err(Failure::Type(e));
        };
        let kind = to_json(kind, ArgKind::Argument, "type")?;
        let Some(kind) = types.iter().copied().find(|t| kind.as_str() == Some(*t)) else {
            let (shown, known) = (cut(kind.to_string()), types.join(", "));
            let message = format_args!("unknown event type {shown} (this object emits {known})");
            return Err(ArgKind::Argument.error(message).into());
        };
        let function: FunctionRef<Unknown<'static>, Unknown<'static>> = function.create_ref()?;
        let listener: Listener = Arc::new(move |event: &Event| {
            if event_type(event) != kind {
                return Ok(());
            }
            let env = CURRENT_ENV
                .with(Cell::get)
                .ok_or("event delivered outside a JavaScript call on this thread")?;
            let argument = result(&env, event).map_err(|e| format!("{e:?}"))?;
            function.borrow_back(&env)?.call(argument)?;
            Ok(())
        });
        let id = register(listener);
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        table.next = table.next.wrapping_add(1);
        let number = table.next;
        table.ids.insert(number, id);
        Ok(number)
    }

    /// Removes a listener added by [`JsListeners::add`]; false when `number` is not one.
    pub fn remove(
        &self,
        unregister: impl FnOnce(ListenerId) -> bool,
        number: Option<&Unknown<'_>>,
    ) -> Result<bool, Failure> {
        let number = opt_json(number, ArgKind::Argument, "id")?;
        let Some(number) = number.as_u64().and_then(|n| u32::try_from(n).ok()) else {
            return Ok(false);
        };
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let id = table.ids.remove(&number);
        drop(table);
        Ok(id.is_some_and(unregister))
    }
}
