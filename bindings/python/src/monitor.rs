//! `Monitor` (contract section 11, docs/monitor.md): one agent watched event by event, every
//! event answered with a verdict dict. Every call that may wait for a store (construction,
//! `observe` and `tick` with a store) releases the GIL; `observe` without a store keeps it.

use std::sync::Arc;

use agentbreaker::VerdictAction::{self, Continue, Halt, Warn};
use agentbreaker::interop::{ArgKind, catch};
use agentbreaker::metrics::{Options, Recorder, Update};
use agentbreaker::monitor::{EventFields, EventKey, Field};
use agentbreaker::{MonitorEvent, Rule, Verdict};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString};

use crate::convert::{Arg, callable, json_or_null, json_to_py, to_json_in};
use crate::errors::{IntoPyResult, boundary, detached, detached_result};
use crate::functions::updates_to_py;

/// The verdict's actions and rule slugs as Python strings, made once.
static NAMES: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();

/// A continue verdict of no task at step 0, with every key: each verdict dict is a copy of it
/// (one allocation of its size and a copy of its table) with the verdict's own values set.
static TEMPLATE: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// A verdict as a dict, built directly (the one fast path of this crate's results): `observe` is
/// called for every event an agent emits, and issue 15 wants it under 5 us from Python.
/// Through `serde_json::to_value` and the generic walk, an `observe` of an `alive` event took
/// 2.2 us on a loaded 2-core machine (BTreeMap inserts, a new key string and its hash per key)
/// and the `make bench-python` row 5.5 us, over the goal; with this, 0.9 us and 3.7 us. A copy of
/// a template dict then only replaces the values that are not `None` (a continue verdict's step
/// and task), where seven inserts into a new dict would grow its table once (issue 17).
///
/// `task`: the verdict's `taskId` as the caller's `str`, when it is the event's (else a new one).
fn verdict_to_py<'py>(
    py: Python<'py>,
    v: &Verdict,
    task: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let names = NAMES.get_or_init(py, || {
        let actions = [Continue, Warn, Halt]
            .map(VerdictAction::as_str)
            .into_iter();
        let slugs = Rule::ALL.map(Rule::slug).into_iter();
        let names = actions.chain(slugs);
        names.map(|s| PyString::intern(py, s).unbind()).collect()
    });
    let name = |i: usize| names[i].bind(py).clone().into_any();
    let template = TEMPLATE.get_or_try_init(py, || -> PyResult<_> {
        // The keys in JSON object order (sorted), as every other result has them.
        let dict = PyDict::new(py);
        dict.set_item(intern!(py, "action"), name(Continue as usize))?;
        for key in ["detail", "message", "nudge", "reason"] {
            dict.set_item(key, py.None())?;
        }
        dict.set_item(intern!(py, "step"), 0)?;
        dict.set_item(intern!(py, "taskId"), py.None())?;
        Ok(dict.unbind())
    })?;
    let dict = template.bind(py).copy()?;
    if v.action != Continue {
        dict.set_item(intern!(py, "action"), name(v.action as usize))?;
    }
    if let Some(detail) = &v.detail {
        dict.set_item(intern!(py, "detail"), json_to_py(py, detail)?)?;
    }
    if let Some(message) = &v.message {
        dict.set_item(intern!(py, "message"), message)?;
    }
    if let Some(nudge) = &v.nudge {
        dict.set_item(intern!(py, "nudge"), nudge)?;
    }
    if let Some(reason) = v.reason {
        dict.set_item(intern!(py, "reason"), name(3 + reason as usize))?;
    }
    if v.step != 0 {
        dict.set_item(intern!(py, "step"), v.step)?;
    }
    match (task, &v.task_id) {
        (Some(given), _) => dict.set_item(intern!(py, "taskId"), given)?,
        (None, Some(id)) => dict.set_item(intern!(py, "taskId"), id)?,
        (None, None) => {}
    }
    Ok(dict.into_any())
}

/// The event keys as Python strings, made once (`EventKey as usize` indexes them).
static KEYS: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();

/// An event dict read field by field (`MonitorEvent::read_fields`: the core reads the common
/// shapes from it, anything else goes through `to_json`). Kept because issue 17's goal (at most
/// 20 us per tool call in a framework's loop) needs it: going through a JSON value (a string key
/// and a tree node per field, all freed again) was about half of `observe`'s instructions
/// (callgrind, LangChain's loop: 15.0M of them in 10 runs, 9.0M without; about 3 us per tool
/// call). `task` keeps the `taskId` it read: the verdict of that task reuses the caller's `str`.
struct DictFields<'a, 'py> {
    dict: &'a Bound<'py, PyDict>,
    task: Option<Bound<'py, PyAny>>,
}

impl<'py> DictFields<'_, 'py> {
    fn get<T>(&self, key: EventKey, read: impl FnOnce(Bound<'py, PyAny>) -> Option<T>) -> Field<T> {
        let py = self.dict.py();
        let keys = KEYS.get_or_init(py, || {
            let keys = EventKey::ALL.map(|k| PyString::intern(py, k.name()).unbind());
            keys.into_iter().collect()
        });
        match self.dict.get_item(keys[key as usize].bind(py)) {
            Ok(Some(value)) => read(value).map_or(Field::Other, Field::Is),
            Ok(None) => Field::Absent,
            Err(_) => Field::Other,
        }
    }
}

fn text(value: &Bound<'_, PyAny>) -> Option<String> {
    Some(value.cast::<PyString>().ok()?.to_cow().ok()?.into_owned())
}

impl EventFields for DictFields<'_, '_> {
    fn keys(&self) -> usize {
        self.dict.len()
    }
    fn text(&mut self, key: EventKey) -> Field<String> {
        match self.get(key, Some) {
            Field::Is(value) => {
                let field = text(&value).map_or(Field::Other, Field::Is);
                if key == EventKey::TaskId {
                    self.task = Some(value);
                }
                field
            }
            Field::Absent => Field::Absent,
            Field::Other => Field::Other,
        }
    }
    fn flag(&mut self, key: EventKey) -> Field<bool> {
        self.get(key, |v| Some(v.cast::<PyBool>().ok()?.is_true()))
    }
    fn json(&mut self, key: EventKey) -> Field<serde_json::Value> {
        self.get(key, |v| to_json_in(&v, "event", ArgKind::Event, 1).ok())
    }
    fn counts(&mut self, key: EventKey) -> Field<Vec<(String, u64)>> {
        let count = |n: &Bound<'_, PyAny>| match n.is_instance_of::<PyBool>() {
            true => None,
            false => n.cast::<PyInt>().ok()?.extract::<u64>().ok(),
        };
        self.get(key, |v| {
            let pairs = v.cast_into::<PyDict>().ok()?;
            pairs
                .iter()
                .map(|(k, n)| Some((text(&k)?, count(&n)?)))
                .collect()
        })
    }
}

event_source_class! {
    /// Watches an agent: `Monitor(profile="coding-agent", tool_limits={"web_fetch": 20})`, then
    /// `observe(event)` for every event the agent emits; each answer is a verdict dict
    /// (`{action, reason, message, nudge, taskId, step, detail}`) saying continue, warn (with a
    /// nudge for the model) or halt.
    Monitor {
        /// Takes one event (a dict: `assistant`, `tool_use`, `tool_result`, `usage`, `error`,
        /// `progress`, `heartbeat`, `alive`); returns its verdict. A malformed event raises
        /// `InvalidEventError` and changes nothing.
        #[pyo3(signature = (event = None), text_signature = "($self, event)")]
        fn observe<'py>(&self, py: Python<'py>, event: Arg<'_, 'py>) -> PyResult<Bound<'py, PyAny>> {
            boundary(py, || {
                // Without a store an event is a few microseconds of work that never waits (the
                // core calls no Python while it holds a lock of its own: listeners and the
                // metrics recorder run after), so the GIL is kept: releasing it hands it to any
                // thread waiting for it (a framework's executor) and waits to get it back, which
                // inside LangChain's loop cost more than the event itself (issue 17).
                let local = self.inner.config().store.is_none();
                let mut fields = event
                    .and_then(|e| e.cast::<PyDict>().ok())
                    .map(|dict| DictFields { dict, task: None });
                let typed = fields.as_mut().and_then(|f| MonitorEvent::read_fields(f));
                if let (Some(typed), Some(fields)) = (typed, fields) {
                    let verdict = if local {
                        catch(|| self.inner.observe_event(&typed)).or_raise(py)?
                    } else {
                        detached_result(py, || self.inner.observe_event(&typed))?
                    };
                    let same = typed.task_id == verdict.task_id.as_deref().map(Into::into);
                    return verdict_to_py(py, &verdict, fields.task.filter(|_| same));
                }
                let event = json_or_null(event, "event", ArgKind::Event).or_raise(py)?;
                let verdict = if local {
                    catch(|| self.inner.observe(&event)).or_raise(py)?
                } else {
                    detached_result(py, || self.inner.observe(&event))?
                };
                verdict_to_py(py, &verdict, None)
            })
        }

        /// Checks the duration and idle limits of every open task now (call it about once a
        /// second); returns the warnings and halts as verdict dicts.
        fn tick<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
            let verdicts = detached(py, || self.inner.tick())?;
            let verdicts = verdicts.iter().map(|v| verdict_to_py(py, v, None));
            PyList::new(py, verdicts.collect::<PyResult<Vec<_>>>()?)
        }

        /// Sends the metric updates of every later event to `recorder(updates)` (None stops it),
        /// a list of `(name, value, attributes)` (docs/observability.md); `task=True` adds the
        /// task attribute. An exception it raises is reported as unraisable and ignored. The
        /// recorder must not refer back to the monitor (the monitor keeps it alive).
        #[pyo3(signature = (recorder, /, *, task = false))]
        fn set_metrics_recorder(&self, py: Python<'_>, recorder: Arg, task: bool) -> PyResult<()> {
            boundary(py, || {
                let recorder = recorder.filter(|r| !r.is_none());
                if let Some(r) = recorder {
                    callable(r, "a recorder").or_raise(py)?;
                }
                let recorder = recorder.map(|r| -> Recorder {
                    let callback = r.clone().unbind();
                    Arc::new(move |updates: &[Update]| {
                        let _ = Python::try_attach(|py| {
                            let list = updates_to_py(py, updates);
                            if let Err(e) = list.and_then(|list| callback.call1(py, (list,))) {
                                e.write_unraisable(py, None);
                            }
                        });
                    })
                });
                self.inner.set_metrics_recorder(recorder, Options { task });
                Ok(())
            })
        }

        fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
            let profile = &slf.get().inner.config().profile;
            Ok(format!("{}(profile='{profile}')", slf.get_type().name()?))
        }
    }
    /// `{profile, tasks, stack, ignoredEvents}`: where every task and rule stands now.
    fn status = detached_py(status);
    /// Everything needed to continue later, in another process too (`restore` takes it back).
    fn snapshot = detached_py(snapshot);
    /// Replaces the state with a snapshot's; a bad one raises `InvalidSnapshotError` and
    /// changes nothing.
    fn restore(snapshot: json_or_null(Snapshot) "($self, snapshot)") = detached_result_py(restore);
    /// With `store`: `{url, key, mode, outages, lastError}` (where the budget counters live now
    /// — `"shared"`, `"local"` or `"refusing"` — the URL without its password, the key, the
    /// outages so far and the last error); `None` without a store.
    fn store_status = attached_py(store_status);
    /// Forgets every task and counter of this process (with `store`, the shared counters stay);
    /// the configuration stays.
    fn reset = detached_py(reset);
    /// The configuration in effect (the profile with the overrides), with camelCase keys.
    #[getter]
    fn config = attached_py(config);
}
