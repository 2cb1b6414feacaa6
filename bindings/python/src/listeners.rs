//! Python callables as core listeners (contract section 8).
//!
//! The core calls a listener outside its locks, from a thread that has released the GIL; the
//! listener re-acquires it, converts the event to a dict and calls the callable. An exception it
//! raises becomes the listener's `Err`: the core counts it (`listener_errors`) and goes on.
//!
//! Each object also keeps the callables it registered (for `remove_listener` by identity and for
//! the garbage collector: a listener that refers back to its object is a cycle the GC can break).

use std::sync::{Arc, Mutex, MutexGuard};

use agentbreaker::{Event, Listener, ListenerId};
use pyo3::PyTraverseError;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;

use crate::convert::{callable, to_py};
use crate::errors::IntoPyResult;

/// The Python callables registered with one core event source, with their core ids.
#[derive(Debug, Default)]
pub struct PyListeners {
    entries: Mutex<Vec<(ListenerId, Arc<Py<PyAny>>)>>,
}

impl PyListeners {
    fn lock(&self) -> MutexGuard<'_, Vec<(ListenerId, Arc<Py<PyAny>>)>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `callback` through `register` (the core's `add_listener`); returns the callback,
    /// so `add_listener` works as a decorator.
    pub fn add<'py>(
        &self,
        callback: &Bound<'py, PyAny>,
        register: impl FnOnce(Listener) -> ListenerId,
    ) -> PyResult<Bound<'py, PyAny>> {
        callable(callback, "a listener").or_raise(callback.py())?;
        // One reference, shared with the core, so that `__traverse__` accounts for it.
        let shared = Arc::new(callback.clone().unbind());
        let for_core = Arc::clone(&shared);
        let id = register(Arc::new(move |event: &Event| {
            let outcome = Python::try_attach(|py| for_core.call1(py, (to_py(py, event)?,)));
            let outcome = outcome.ok_or("the Python interpreter is not available")?;
            outcome.map(drop).map_err(|e| e.to_string().into())
        }));
        self.lock().push((id, shared));
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
        let registered: Vec<_> = self
            .lock()
            .iter()
            .map(|(id, cb)| (*id, cb.clone_ref(py)))
            .collect();
        let equal = |cb: &Py<PyAny>| cb.bind(py).eq(callback).unwrap_or(false);
        let found = registered.iter().find(|(_, cb)| cb.is(callback));
        let Some(&(id, _)) = found.or_else(|| registered.iter().find(|(_, cb)| equal(cb))) else {
            return false;
        };
        let mut entries = self.lock();
        let Some(position) = entries.iter().position(|(i, _)| *i == id) else {
            return false;
        };
        entries.remove(position);
        drop(entries);
        unregister(id);
        true
    }

    /// Visits every registered callable (`__traverse__`).
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        // Never block inside the GC; a list being changed right now is skipped this round.
        if let Ok(entries) = self.entries.try_lock() {
            for (_, callback) in entries.iter() {
                visit.call(&**callback)?;
            }
        }
        Ok(())
    }

    /// Unregisters every callable (`__clear__`), breaking reference cycles through listeners.
    pub fn clear(&self, unregister: impl Fn(ListenerId) -> bool) {
        for (id, _) in std::mem::take(&mut *self.lock()) {
            unregister(id);
        }
    }
}
