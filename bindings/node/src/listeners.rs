//! JavaScript listeners on the core's event sources.
//!
//! The core calls listeners after releasing its locks, on the thread that caused the event. A
//! breaker object belongs to the JavaScript thread that created it (napi objects cannot cross
//! worker threads), so every call into the core comes from that thread and every delivery runs
//! on it, inside the export that caused the event: listeners are called synchronously, before
//! that export returns, and no ThreadsafeFunction (which would defer them to a later tick) is
//! needed. [`EnvScope`] records the env of the export in progress; a listener invoked on a
//! thread without one (which the core never does for these objects) fails and is counted in
//! `listenerErrors`.
//!
//! Each JavaScript listener is one core listener, so the core isolates them from each other and
//! counts the ones that throw. The JavaScript side (`agentbreaker.js`) keeps the user's function
//! and hands the addon a trampoline that reaches it through a `WeakRef`: the addon's strong
//! reference never keeps a breaker alive through a listener that refers to the breaker.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agentbreaker::{Event, Listener, ListenerId};
use napi::Env;
use napi::bindgen_prelude::{Either, Function, FunctionRef, Unknown};

use crate::convert::to_js;
use crate::error::{Context, Failure};

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
        f.debug_struct("EnvScope")
            .field("nested", &self.previous.is_some())
            .finish()
    }
}

impl EnvScope {
    /// Enters an export.
    pub fn enter(env: &Env) -> Self {
        EnvScope {
            previous: CURRENT_ENV.with(|c| c.replace(Some(*env))),
        }
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

/// The event types one class emits, as `on()` accepts them.
pub type EventTypes = &'static [&'static str];

/// The core's listener registry, as each core type exposes it.
pub trait EventSource {
    /// Adds a core listener.
    fn add(&self, listener: Listener) -> ListenerId;
    /// Removes a core listener.
    fn remove(&self, id: ListenerId) -> bool;
    /// Failed listener calls.
    fn errors(&self) -> u64;
}

macro_rules! event_source {
    ($($t:ty),*) => {$(
        impl EventSource for $t {
            fn add(&self, listener: Listener) -> ListenerId {
                self.add_listener(listener)
            }
            fn remove(&self, id: ListenerId) -> bool {
                self.remove_listener(id)
            }
            fn errors(&self) -> u64 {
                self.listener_errors()
            }
        }
    )*};
}

event_source!(
    agentbreaker::FailureBreaker,
    agentbreaker::StagnationBreaker,
    agentbreaker::BudgetBreaker,
    agentbreaker::ExitStrategy,
    agentbreaker::Loop
);

fn event_type(event: &Event) -> &'static str {
    match event {
        Event::StateChange { .. } => "stateChange",
        Event::Warning { .. } => "warning",
        Event::Halt { .. } => "halt",
        // A Monitor's verdict (the core's serde name); no Node object emits one yet.
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
        source: &dyn EventSource,
        types: EventTypes,
        kind: &Unknown<'_>,
        function: &ListenerArg<'_>,
    ) -> Result<u32, Failure> {
        let Either::A(function) = function else {
            return Err(Context::Argument.type_error("a listener must be a function"));
        };
        let kind = crate::convert::from_js_named(kind, Context::Argument, "type")?;
        let kind: &'static str = match kind.as_str().and_then(|k| types.iter().find(|t| **t == k)) {
            Some(t) => t,
            None => {
                return Err(Failure::Core(agentbreaker::Error::InvalidArgument(
                    format!(
                        "unknown event type {} (this object emits {})",
                        crate::convert::shown(&kind),
                        types.join(", ")
                    ),
                )));
            }
        };
        let function: Arc<FunctionRef<Unknown<'static>, Unknown<'static>>> =
            Arc::new(function.create_ref()?);
        let listener: Listener = Arc::new(move |event: &Event| {
            if event_type(event) != kind {
                return Ok(());
            }
            let env = CURRENT_ENV
                .with(Cell::get)
                .ok_or("event delivered outside a JavaScript call on this thread")?;
            let callback = function.borrow_back(&env)?;
            let argument = to_js(&env, event).map_err(|e| format!("{e:?}"))?;
            callback.call(argument)?;
            Ok(())
        });
        let id = source.add(listener);
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        table.next = table.next.wrapping_add(1);
        let number = table.next;
        table.ids.insert(number, id);
        Ok(number)
    }

    /// Removes a listener added by [`JsListeners::add`]; false when `number` is not one.
    pub fn remove(
        &self,
        source: &dyn EventSource,
        number: Option<&Unknown<'_>>,
    ) -> Result<bool, Failure> {
        let number = crate::convert::from_js_opt(number, Context::Argument, "id")?;
        let Some(number) = number.as_u64().and_then(|n| u32::try_from(n).ok()) else {
            return Ok(false);
        };
        let id = self
            .table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ids
            .remove(&number);
        Ok(id.is_some_and(|id| source.remove(id)))
    }
}
