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
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agentbreaker::interop::ArgKind;
use agentbreaker::{Event, Listener, ListenerId};
use napi::Env;
use napi::bindgen_prelude::{Either, Function, FunctionRef, Unknown};

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

impl std::fmt::Debug for EnvScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nested = self.previous.is_some();
        f.debug_struct("EnvScope").field("nested", &nested).finish()
    }
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
