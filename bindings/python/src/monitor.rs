//! `Monitor` (contract section 11, docs/monitor.md): one agent watched event by event, every
//! event answered with a verdict dict. Every call that may wait for a store (construction,
//! `observe` and `tick` with a store) releases the GIL; `observe` without a store keeps it.

use std::borrow::Cow;
use std::sync::Arc;

use agentbreaker::VerdictAction::{self, Continue, Halt, Warn};
use agentbreaker::budget::Usage;
use agentbreaker::interop::{ArgKind, catch};
use agentbreaker::metrics::{Options, Recorder, Update};
use agentbreaker::monitor::Spend;
use agentbreaker::{MonitorEvent, MonitorEventKind, Rule, Verdict};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString};

use crate::convert::{Arg, callable, json_or_null, json_to_py, to_json};
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
/// `task`: the event's `taskId` as given, with its text: the verdict of that task reuses the
/// caller's `str` instead of making a new one.
fn verdict_to_py<'py>(
    py: Python<'py>,
    v: &Verdict,
    task: Option<(&Bound<'py, PyString>, &str)>,
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
    match (&v.task_id, task) {
        (Some(id), Some((given, text))) if id == text => {
            dict.set_item(intern!(py, "taskId"), given)?;
        }
        (Some(id), _) => dict.set_item(intern!(py, "taskId"), id)?,
        (None, _) => {}
    }
    Ok(dict.into_any())
}

/// An event read straight from a dict of the shapes the framework adapters send (`assistant`,
/// `tool_use`, `tool_result`, `usage` with token counts: every key one the core reads, every value
/// of the type it expects), for `Monitor::observe_event`, which validates it as a JSON event
/// would be. `None` for anything else (another type, an unknown key, a `None`, a wrong type):
/// the general path reads that (`to_json`, `MonitorEvent::from_json`) and gives the same result
/// or the same error as every other binding. Kept because issue 17's goal (at most 20 us per
/// tool call in a framework's loop) needs it: going through a JSON value (a string key and a
/// tree node per field, all freed again) was about half of `observe`'s instructions (callgrind,
/// LangChain's loop: 6.7M of 15.0M).
fn typed_event<'py>(
    event: &Bound<'py, PyAny>,
) -> Option<(MonitorEvent<'static>, Option<Bound<'py, PyString>>)> {
    let py = event.py();
    let dict = event.cast::<PyDict>().ok()?;
    let mut used = 0;
    let mut get = |key: &Bound<'py, PyString>| {
        let value = dict.get_item(key).ok().flatten();
        used += usize::from(value.is_some());
        value
    };
    fn text(value: &Bound<'_, PyAny>) -> Option<String> {
        Some(value.cast::<PyString>().ok()?.to_cow().ok()?.into_owned())
    }
    fn text_opt(value: Option<Bound<'_, PyAny>>) -> Option<Option<Cow<'static, str>>> {
        match value {
            None => Some(None),
            Some(v) => text(&v).map(|t| Some(Cow::Owned(t))),
        }
    }
    let kind = text(&get(intern!(py, "type"))?)?;
    let task = match get(intern!(py, "taskId")) {
        None => None,
        Some(v) => Some(v.cast_into::<PyString>().ok()?),
    };
    let task_id = match &task {
        None => None,
        Some(t) => Some(Cow::Owned(t.to_cow().ok()?.into_owned())),
    };
    // A usage event's fields (`usage` with token counts, `model`); `None` without `usage`.
    let spend = |get: &mut dyn FnMut(&Bound<'py, PyString>) -> Option<Bound<'py, PyAny>>| {
        let Some(counts) = get(intern!(py, "usage")) else {
            return Some(None);
        };
        let counts = counts.cast_into::<PyDict>().ok()?;
        let mut usage = Usage::default();
        for (key, count) in counts.iter() {
            if count.is_instance_of::<PyBool>() || !count.is_instance_of::<PyInt>() {
                return None;
            }
            let count = count.extract::<u64>().ok()?;
            match text(&key)?.as_str() {
                "input_tokens" => usage.input_tokens = count,
                "output_tokens" => usage.output_tokens = count,
                "cache_read_input_tokens" => usage.cache_read_input_tokens = count,
                "cache_creation_input_tokens" => usage.cache_creation_input_tokens = count,
                _ => return None,
            }
        }
        let model = text_opt(get(intern!(py, "model")))?;
        Some(Some(Spend {
            model,
            usage,
            cost_cents: None,
        }))
    };
    let kind = match kind.as_str() {
        "assistant" => MonitorEventKind::Assistant {
            text: Cow::Owned(text(&get(intern!(py, "text"))?)?),
            spend: spend(&mut get)?,
        },
        "tool_use" => MonitorEventKind::ToolUse {
            name: Cow::Owned(text(&get(intern!(py, "name"))?)?),
            input: Cow::Owned(match get(intern!(py, "input")) {
                None => serde_json::Value::Null,
                Some(input) => to_json(&input, "event.input", ArgKind::Event).ok()?,
            }),
            id: text_opt(get(intern!(py, "id")))?,
        },
        "tool_result" => MonitorEventKind::ToolResult {
            ok: get(intern!(py, "ok"))?.cast::<PyBool>().ok()?.is_true(),
            text: text_opt(get(intern!(py, "text")))?.unwrap_or_default(),
            id: text_opt(get(intern!(py, "id")))?,
            name: text_opt(get(intern!(py, "name")))?,
        },
        "usage" => {
            let Spend { model, usage, .. } = spend(&mut get)??;
            MonitorEventKind::Usage {
                model,
                usage,
                cost_cents: None,
            }
        }
        _ => return None,
    };
    if used != dict.len() {
        return None;
    }
    Some((MonitorEvent { task_id, kind }, task))
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
                if let Some((typed, task)) = event.and_then(typed_event) {
                    let verdict = if local {
                        catch(|| self.inner.observe_event(&typed)).or_raise(py)?
                    } else {
                        detached_result(py, || self.inner.observe_event(&typed))?
                    };
                    let task = task.as_ref().zip(typed.task_id.as_deref());
                    return verdict_to_py(py, &verdict, task);
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
