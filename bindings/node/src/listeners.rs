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
use std::sync::Arc;

use agentbreaker::interop::{self, ArgKind};
use agentbreaker::metrics::{self, Recorder, Update};
use agentbreaker::{Event, Listener, ListenerId};
use napi::Env;
use napi::bindgen_prelude::{Either, FromNapiValue, Function, FunctionRef, Unknown};

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

/// `{task}` of a metrics call (`interop::metric_options`); a bad one is a `TypeError`.
pub fn metric_options(options: Option<&Unknown<'_>>) -> Result<metrics::Options, Failure> {
    let options = opt_json(options, ArgKind::Argument, "options")?;
    interop::metric_options(&options, "options").map_err(Failure::Type)
}

/// A core metrics recorder calling `function` with the updates (`interop::updates_json`), as a
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
            && let Ok(argument) = result(&env, &interop::updates_json(updates))
        {
            let _ = function.borrow_back(&env).and_then(|f| f.call(argument));
        }
    }))
}

/// Registers `function` through `register` for events of `kind` (one of `types`); returns the
/// number that removes it (the core's: `ListenerId::number`).
pub fn add(
    register: impl FnOnce(Listener) -> ListenerId,
    types: &[&'static str],
    kind: &Unknown<'_>,
    function: &ListenerArg<'_>,
) -> Result<f64, Failure> {
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
    Ok(register(listener).number() as f64)
}

/// Removes a listener added by [`add`]; false when `number` is not one.
pub fn remove(
    unregister: impl FnOnce(ListenerId) -> bool,
    number: Option<&Unknown<'_>>,
) -> Result<bool, Failure> {
    let number = opt_json(number, ArgKind::Argument, "id")?;
    Ok(number
        .as_u64()
        .is_some_and(|n| unregister(ListenerId::from_number(n))))
}
