//! Python callables as core listeners (SPEC 8).
//!
//! The core calls a listener outside its locks, from a thread that has released the GIL; the
//! listener re-acquires it, converts the event to a dict and calls the callable. An exception it
//! raises becomes the listener's `Err`: the core counts it (`listener_errors`) and goes on.
//!
//! Each breaker also keeps the callables it registered (for `remove_listener` by identity and for
//! the garbage collector: a listener that refers back to its breaker is a cycle the GC can break).

use std::sync::{Arc, Mutex, MutexGuard};

use agentbreaker::{Event, Listener, ListenerId, ListenerResult};
use pyo3::PyTraverseError;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;

use agentbreaker::interop::ArgKind;

use crate::convert::{to_py, type_name};
use crate::errors::IntoPyResult;

struct Entry {
    id: ListenerId,
    callback: Arc<Py<PyAny>>,
}

/// The Python callables registered with one core event source.
#[derive(Default)]
pub struct PyListeners {
    entries: Mutex<Vec<Entry>>,
}

impl std::fmt::Debug for PyListeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyListeners")
            .field("count", &self.lock().len())
            .finish()
    }
}

fn call(callback: &Py<PyAny>, event: &Event) -> ListenerResult {
    let outcome = Python::try_attach(|py| -> Result<(), String> {
        let event = to_py(py, event).map_err(|e| e.to_string())?;
        callback
            .call1(py, (event,))
            .map(drop)
            .map_err(|e| e.to_string())
    });
    match outcome {
        Some(result) => result.map_err(Into::into),
        None => Err("the Python interpreter is not available".into()),
    }
}

impl PyListeners {
    fn lock(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `callback` through `register` (the core's `add_listener`); returns the callback,
    /// so `add_listener` works as a decorator.
    pub fn add<'py>(
        &self,
        callback: &Bound<'py, PyAny>,
        register: impl FnOnce(Listener) -> ListenerId,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = callback.py();
        if !callback.is_callable() {
            let got = type_name(callback);
            return Err(ArgKind::Argument.wrong_type("a listener", "callable", &got)).or_raise(py);
        }
        let shared = Arc::new(callback.clone().unbind());
        let for_core = Arc::clone(&shared);
        let listener: Listener = Arc::new(move |event: &Event| call(&for_core, event));
        let id = register(listener);
        self.lock().push(Entry {
            id,
            callback: shared,
        });
        Ok(callback.clone())
    }

    /// Removes the first registration of `callback` (the same object, or one equal to it, as a
    /// bound method is); false when it was not registered.
    pub fn remove(
        &self,
        callback: &Bound<'_, PyAny>,
        unregister: impl FnOnce(ListenerId) -> bool,
    ) -> bool {
        let py = callback.py();
        // Compare outside the lock: `==` may run Python code (and release the GIL).
        let registered: Vec<(ListenerId, Py<PyAny>)> = self
            .lock()
            .iter()
            .map(|e| (e.id, e.callback.clone_ref(py)))
            .collect();
        let found = registered
            .iter()
            .find(|(_, cb)| cb.is(callback))
            .or_else(|| {
                registered
                    .iter()
                    .find(|(_, cb)| cb.bind(py).eq(callback).unwrap_or(false))
            })
            .map(|(id, _)| *id);
        let Some(id) = found else {
            return false;
        };
        let mut entries = self.lock();
        let Some(position) = entries.iter().position(|e| e.id == id) else {
            return false;
        };
        let entry = entries.remove(position);
        drop(entries);
        unregister(entry.id);
        true
    }

    /// Visits every registered callable (`__traverse__`).
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        // Never block inside the GC; a list being changed right now is skipped this round.
        if let Ok(entries) = self.entries.try_lock() {
            for entry in entries.iter() {
                visit.call(&*entry.callback)?;
            }
        }
        Ok(())
    }

    /// Unregisters every callable (`__clear__`), breaking reference cycles through listeners.
    pub fn clear(&self, unregister: impl Fn(ListenerId) -> bool) {
        let entries = std::mem::take(&mut *self.lock());
        for entry in entries {
            unregister(entry.id);
        }
    }
}

/// The listener methods of the core's event sources (each has them as inherent methods).
pub trait CoreSource {
    /// The core's `add_listener`.
    fn add(&self, listener: Listener) -> ListenerId;
    /// The core's `remove_listener`.
    fn remove(&self, id: ListenerId) -> bool;
    /// The core's `listener_errors`.
    fn errors(&self) -> u64;
}

macro_rules! core_sources {
    ($($ty:ty),*) => {$(
        impl CoreSource for $ty {
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

core_sources!(
    agentbreaker::FailureBreaker,
    agentbreaker::StagnationBreaker,
    agentbreaker::BudgetBreaker,
    agentbreaker::ExitStrategy,
    agentbreaker::Loop,
    agentbreaker::Monitor
);

/// `#[pymethods] impl $ty { ... }` with the listener methods every event source has added to the
/// methods given (pyo3 takes one `#[pymethods]` block per class). The class holds the core object
/// in `inner` and its Python callables in `listeners`.
macro_rules! pymethods_with_listeners {
    ($ty:ty { $($methods:tt)* }) => {
        #[pyo3::pymethods]
        impl $ty {
            $($methods)*

            /// Calls `listener(event)` for every event (a dict: `stateChange`, `warning`,
            /// `halt`, `verdict`); returns `listener`, so this works as a decorator. A listener
            /// that raises is isolated: counted in `listener_errors`, the object goes on.
            fn add_listener<'py>(
                &self,
                py: pyo3::Python<'py>,
                listener: &pyo3::Bound<'py, pyo3::PyAny>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                use crate::listeners::CoreSource as _;
                crate::errors::boundary(py, || self.listeners.add(listener, |l| self.inner.add(l)))
            }

            /// Removes a listener added with `add_listener`; false when it was not there.
            fn remove_listener(
                &self,
                py: pyo3::Python<'_>,
                listener: &pyo3::Bound<'_, pyo3::PyAny>,
            ) -> pyo3::PyResult<bool> {
                use crate::listeners::CoreSource as _;
                crate::errors::boundary(py, || {
                    Ok(self.listeners.remove(listener, |id| self.inner.remove(id)))
                })
            }

            /// How many listener calls raised (and were isolated).
            #[getter]
            fn listener_errors(&self) -> u64 {
                use crate::listeners::CoreSource as _;
                self.inner.errors()
            }

            fn __traverse__(
                &self,
                visit: pyo3::gc::PyVisit<'_>,
            ) -> Result<(), pyo3::PyTraverseError> {
                self.listeners.traverse(&visit)
            }

            fn __clear__(&self) {
                use crate::listeners::CoreSource as _;
                self.listeners.clear(|id| self.inner.remove(id))
            }
        }
    };
}
pub(crate) use pymethods_with_listeners;
