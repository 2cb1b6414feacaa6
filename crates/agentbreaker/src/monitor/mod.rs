//! The Monitor (contract section 11): one agent watched event by event, every event answered with
//! a verdict. It is the front door of the library: the CLI's `run`, `replay`, `hook` and `eval`,
//! every binding and every framework integration feed it the same events and get the same
//! decisions.
//!
//! It is built from the breakers' rules, per task:
//! - the BudgetBreaker's (tool calls, spend, duration, idle, the output loop), plus per-tool
//!   limits;
//! - the StagnationBreaker's (no progress, the same error, output decline) and its step detectors
//!   (repeated steps, cycles, fail streaks, the fail window), fed one **step** at a time: a model
//!   call with the tool calls it made and their results;
//! - the FailureBreaker's consecutive failures (a failed step is a failure, a step with a
//!   successful result a success).
//!
//! Each count-based rule with threshold T warns when its count reaches T − `warnBefore` (once per
//! episode) and halts at T; each budget warns once at `budgetWarnPercent` of its limit and halts
//! past it. A halted task answers every later event with the same halt until `reset()`.
//!
//! ```
//! use agentbreaker::{ManualClock, Monitor, MonitorConfig};
//! use serde_json::json;
//!
//! let monitor = Monitor::with_clock(MonitorConfig::default(), ManualClock::shared(0)).unwrap();
//! let mut last = None;
//! for i in 0..5 {
//!     monitor.observe(&json!({"type": "assistant", "text": "Let me run the tests."})).unwrap();
//!     monitor.observe(&json!({"type": "tool_use", "name": "Bash", "id": format!("t{i}"),
//!                              "input": {"command": "pytest -q"}})).unwrap();
//!     last = Some(monitor.observe(&json!({"type": "tool_result", "id": format!("t{i}"),
//!                                          "ok": false, "text": "1 failed"})).unwrap());
//! }
//! let verdict = last.unwrap();
//! assert_eq!(verdict.reason.unwrap().slug(), "repeated_step");
//! assert!(verdict.is_halt());
//! ```

mod config;
mod event;
#[cfg(feature = "redis")]
mod shared;
mod task;
mod verdict;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::budget::{AgentEvent, Phase, SESSION_TASK};
use crate::clock::{SharedClock, SystemClock};
use crate::error::{Error, Result};
use crate::events::{Event, Listeners};
use crate::metrics::{self, Recorder, TaskOutcome, Update};
use crate::persist;

pub use config::{DEFAULT_PROFILE, MAX_TOOL_LIMITS, MonitorConfig};
pub use event::{
    EventFields, EventKey, Field, MAX_NAME_BYTES, MonitorEvent, MonitorEventKind, Spend,
};
pub use task::{MAX_DIGESTS, MAX_STEP_CALLS, MAX_TASK_ERRORS, MAX_TRACKED_TOOLS};
pub use verdict::{Rule, Verdict, VerdictAction};

#[cfg(feature = "redis")]
pub use shared::{monitor_store_scripts, task_key};

use crate::store::StoreStatus;
use task::{Outcome, Task, usage_cost};

/// The most tasks a Monitor keeps open at once (more is `INVALID_EVENT`: close tasks with a
/// `done` heartbeat).
pub const MAX_MONITOR_TASKS: usize = 4096;

#[derive(Debug, Default, Clone, PartialEq)]
struct Inner {
    /// Open tasks in the order they were opened.
    tasks: Vec<Task>,
    by_id: FxHashMap<String, usize>,
    stack: Vec<String>,
    ignored_events: u64,
    last_event_at: Option<u64>,
}

impl Inner {
    fn index(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    fn reindex(&mut self) {
        self.by_id = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.clone(), i))
            .collect();
    }

    fn open(&mut self, id: &str, now: u64) -> usize {
        match self.index(id) {
            Some(i) => i,
            None => {
                self.tasks.push(Task::new(id, now));
                let i = self.tasks.len() - 1;
                self.by_id.insert(id.to_string(), i);
                i
            }
        }
    }

    fn close(&mut self, id: &str) {
        if let Some(i) = self.index(id) {
            self.tasks.remove(i);
            self.reindex();
        }
        self.stack.retain(|t| t != id);
    }

    fn idle_since(&self, task: &Task) -> u64 {
        if task.id == SESSION_TASK {
            self.last_event_at.unwrap_or(task.last_event_at)
        } else {
            task.last_event_at
        }
    }
}

/// Where the metric updates of one call go while the state lock is held (`None`: no recorder,
/// no metrics work).
struct MetricsOut<'a> {
    updates: &'a mut Vec<Update>,
    options: metrics::Options,
}

/// Watches one agent (contract section 11). Every method takes `&self`; it is `Send + Sync`.
pub struct Monitor {
    config: MonitorConfig,
    clock: SharedClock,
    inner: Mutex<Inner>,
    listeners: Listeners,
    /// The metrics recorder and its options ([`Monitor::set_metrics_recorder`]).
    recorder: RwLock<Option<(Recorder, metrics::Options)>>,
    /// Whether a recorder is set: one relaxed load on the hot path when none is.
    recording: AtomicBool,
    /// The store of the budget counters, with `store`.
    #[cfg(feature = "redis")]
    shared: Option<shared::MonitorStore>,
}

impl fmt::Debug for Monitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Monitor")
            .field("profile", &self.config.profile)
            .finish_non_exhaustive()
    }
}

/// The persistent form of a [`Monitor`] (`kind: "monitor"`, `version: 1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MonitorSnapshot {
    version: u32,
    kind: String,
    tasks: Vec<Task>,
    stack: Vec<String>,
    ignored_events: u64,
    last_event_at: Option<u64>,
}

impl Monitor {
    /// A monitor on the system clock.
    pub fn new(config: MonitorConfig) -> Result<Self> {
        Self::with_clock(config, SystemClock::shared())
    }

    /// A monitor reading time from `clock`. With `store`, the monitor connects, waiting at most
    /// `storeTimeoutMs`: credentials the server refuses are `IO`; no answer in time is an outage
    /// (`storeFailure` decides until the store answers).
    pub fn with_clock(config: MonitorConfig, clock: SharedClock) -> Result<Self> {
        config.failure.validate()?;
        config.stagnation.validate()?;
        config.budget.validate()?;
        config.validate_store()?;
        #[cfg(feature = "redis")]
        let shared = match config.store {
            Some(_) => Some(shared::MonitorStore::start(&config)?),
            None => None,
        };
        Ok(Monitor {
            config,
            clock,
            inner: Mutex::new(Inner::default()),
            listeners: Listeners::default(),
            recorder: RwLock::new(None),
            recording: AtomicBool::new(false),
            #[cfg(feature = "redis")]
            shared,
        })
    }

    /// Sends the metric updates of every later event to `recorder` (`None` stops it): tool calls,
    /// spend, warnings, halts and the steps of each task that ends, in the vocabulary of
    /// [`crate::metrics`]. The recorder is called after the event, outside the Monitor's lock,
    /// once per event that changed a metric, with that event's updates; a halt is reported once
    /// (a halted task's later events repeat its verdict but record nothing). Without a recorder
    /// the Monitor does no metrics work.
    pub fn set_metrics_recorder(&self, recorder: Option<Recorder>, options: metrics::Options) {
        let mut slot = self.recorder.write().unwrap_or_else(|p| p.into_inner());
        self.recording.store(recorder.is_some(), Ordering::Release);
        *slot = recorder.map(|r| (r, options));
    }

    fn metrics_options(&self) -> Option<metrics::Options> {
        if !self.recording.load(Ordering::Acquire) {
            return None;
        }
        let slot = self.recorder.read().unwrap_or_else(|p| p.into_inner());
        slot.as_ref().map(|(_, o)| *o)
    }

    fn record(&self, updates: &[Update]) {
        if updates.is_empty() {
            return;
        }
        let recorder = {
            let slot = self.recorder.read().unwrap_or_else(|p| p.into_inner());
            slot.as_ref().map(|(r, _)| std::sync::Arc::clone(r))
        };
        if let Some(r) = recorder {
            // A recorder that panics must not take the caller down (as a listener would not).
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r(updates)));
        }
    }

    /// A monitor from a JSON config (contract section 11's keys).
    pub fn from_json(config: &Value, clock: SharedClock) -> Result<Self> {
        Self::with_clock(MonitorConfig::from_json(config)?, clock)
    }

    /// The configuration.
    pub fn config(&self) -> &MonitorConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Validates and observes one JSON event. A malformed event is `INVALID_EVENT` and changes
    /// nothing.
    pub fn observe(&self, event: &Value) -> Result<Verdict> {
        let event = MonitorEvent::from_json(event)?;
        self.observe_valid(&event)
    }

    /// Observes one typed event (checked as a JSON one would be).
    pub fn observe_event(&self, event: &MonitorEvent<'_>) -> Result<Verdict> {
        event.validate()?;
        self.observe_valid(event)
    }

    fn observe_valid(&self, event: &MonitorEvent<'_>) -> Result<Verdict> {
        let now = self.clock.now_ms();
        let mut updates = Vec::new();
        let options = self.metrics_options();
        let verdict = {
            let mut inner = self.lock();
            let m = options.map(|options| MetricsOut {
                updates: &mut updates,
                options,
            });
            let verdict = self.observe_locked(&mut inner, &event.task_id, &event.kind, now, m)?;
            // An assistant event with its spend: the usage event it carries comes next, and
            // the more severe of the two verdicts is the answer (a halt, else the first warning).
            match &event.kind {
                MonitorEventKind::Assistant {
                    spend: Some(spend), ..
                } => {
                    let m = options.map(|options| MetricsOut {
                        updates: &mut updates,
                        options,
                    });
                    let usage = spend.as_usage();
                    let then = self.observe_locked(&mut inner, &event.task_id, &usage, now, m)?;
                    if then.action > verdict.action {
                        then
                    } else {
                        verdict
                    }
                }
                _ => verdict,
            }
        };
        self.listeners.deliver();
        self.record(&updates);
        Ok(verdict)
    }

    fn observe_locked(
        &self,
        inner: &mut Inner,
        task_id: &Option<Cow<'_, str>>,
        kind: &MonitorEventKind<'_>,
        now: u64,
        mut m: Option<MetricsOut<'_>>,
    ) -> Result<Verdict> {
        let c = &self.config;
        if let MonitorEventKind::Unknown = kind {
            inner.ignored_events = inner.ignored_events.saturating_add(1);
            return Ok(Verdict::proceed(None, 0));
        }
        if let MonitorEventKind::Heartbeat(phase @ (Phase::Done | Phase::Error)) = kind {
            inner.last_event_at = Some(now);
            let id = task_id.as_deref().unwrap_or(SESSION_TASK);
            if let Some(m) = &mut m
                && let Some(task) = inner.index(id).map(|i| &inner.tasks[i])
                && task.halt.is_none()
            {
                let outcome = if *phase == Phase::Done {
                    TaskOutcome::Done
                } else {
                    TaskOutcome::Error
                };
                m.updates
                    .push(metrics::task_end(task.step_number(), outcome));
            }
            if let Some(i) = inner.index(id) {
                self.flush(&mut inner.tasks[i], now);
            }
            inner.close(id);
            return Ok(Verdict::proceed(Some(id.to_string()), 0));
        }
        let id: String = match task_id.as_deref() {
            Some(id) => id.to_string(),
            None => inner
                .stack
                .last()
                .cloned()
                .unwrap_or_else(|| SESSION_TASK.to_string()),
        };
        if inner.index(&id).is_none() && inner.tasks.len() >= MAX_MONITOR_TASKS {
            return Err(Error::event(format_args!(
                "more than {MAX_MONITOR_TASKS} tasks would be open; close tasks with a done \
                 heartbeat"
            )));
        }
        let i = inner.open(&id, now);
        if let MonitorEventKind::Heartbeat(Phase::Starting) = kind
            && !inner.stack.contains(&id)
        {
            inner.stack.push(id.clone());
        }
        if let Some(halt) = &inner.tasks[i].halt {
            return Ok(halt.clone());
        }
        inner.last_event_at = Some(now);
        let task = &mut inner.tasks[i];
        task.last_event_at = now;
        let cost = match kind {
            MonitorEventKind::Usage {
                model,
                usage,
                cost_cents,
            } => usage_cost(model.as_deref(), usage, *cost_cents, c),
            _ => 0.0,
        };
        // With a store: the task's counters from it (the event's increments added).
        let counted = match self.sync(task, kind, cost, now) {
            Ok(counted) => counted,
            Err(refusal) => return Ok(*refusal),
        };
        let mut out = Outcome::default();
        match kind {
            MonitorEventKind::Assistant { text, .. } => task.assistant(text, c, now, &mut out),
            MonitorEventKind::ToolUse { name, input, id } => {
                if let Some(m) = &mut m {
                    m.updates
                        .push(metrics::tool_call(Some(&task.id), m.options));
                }
                task.tool_use(name, input, id.as_deref(), counted, c, now, &mut out)
            }
            MonitorEventKind::ToolResult { ok, text, id, name } => {
                task.tool_result(*ok, text, id.as_deref(), name.as_deref(), c, now, &mut out)
            }
            MonitorEventKind::Usage { .. } => task.usage(cost, counted, c, now, &mut out),
            MonitorEventKind::Error { text, transient } => {
                task.error(text, *transient, c, now, &mut out)
            }
            MonitorEventKind::Progress {
                files,
                tests_passing,
                digest,
            } => task.progress(*files, *tests_passing, digest.as_deref(), c, now, &mut out),
            MonitorEventKind::Heartbeat(_) | MonitorEventKind::Alive => {
                task.check_duration(c, now, &mut out)
            }
            MonitorEventKind::Unknown => {}
        }
        // This process's spend (with a store, the task's total holds the fleet's).
        if let Some(m) = &mut m
            && cost > 0.0
        {
            m.updates
                .push(metrics::spend(cost, Some(&task.id), m.options));
        }
        let step = task.step_number();
        Ok(self.settle(task, out, step, now, m))
    }

    /// With a store, brings the task's counters in line with it for an event (contract section
    /// 12): `Ok(true)` when the task's totals already hold the event's increments, `Ok(false)`
    /// when the task counts them itself, `Err(halt)` when the event is refused (the store is
    /// unreachable and `storeFailure` is `"closed"`). Without a store, `Ok(false)` at once.
    #[inline]
    fn sync(
        &self,
        task: &mut Task,
        kind: &MonitorEventKind<'_>,
        cost: f64,
        now: u64,
    ) -> std::result::Result<bool, Box<Verdict>> {
        #[cfg(feature = "redis")]
        if let Some(store) = &self.shared {
            let tool = match kind {
                MonitorEventKind::ToolUse { name, .. } => {
                    let name = crate::text::truncate(name, task::MAX_ID_BYTES);
                    Some((name, self.config.tool_limits.contains_key(name)))
                }
                _ => None,
            };
            let delta = shared::Delta {
                tool,
                spend_cents: cost,
            };
            return match store.sync(task, delta, &self.config, &self.listeners, now) {
                shared::Synced::Counted => Ok(true),
                shared::Synced::Idle | shared::Synced::Local => Ok(false),
                shared::Synced::Refused(halt) => Err(halt),
            };
        }
        let _ = (task, kind, cost, now);
        Ok(false)
    }

    /// With a store, before a task is forgotten here (a `done` or `error` heartbeat, the Monitor
    /// dropped): sends what it counted during an outage that the store has not confirmed (one
    /// attempt within `storeTimeoutMs`, none while the store is known down; a `warning` event
    /// names what could not be sent).
    fn flush(&self, task: &mut Task, now: u64) {
        #[cfg(feature = "redis")]
        if let Some(store) = &self.shared {
            store.flush(task, &self.config, &self.listeners, now);
        }
        let _ = (task, now);
    }

    /// With a store: forgets what this process's tasks counted during an outage and the store has
    /// not confirmed (`reset()`, `restore()`: the tasks are gone, and nothing is sent).
    fn forget_unconfirmed(&self) {
        #[cfg(feature = "redis")]
        if let Some(store) = &self.shared {
            store.forget();
        }
    }

    /// With a store: where the budget counters live now (shared, local, refusing), the URL
    /// without its password, the key, the outages so far and the last error. `None` without a
    /// store.
    pub fn store_status(&self) -> Option<StoreStatus> {
        #[cfg(feature = "redis")]
        if let Some(store) = &self.shared {
            return Some(store.status());
        }
        None
    }

    /// The verdict of an outcome: its halt (kept on the task), else its first warning, else
    /// continue. Every warning and halt goes to the listeners (and the metrics).
    fn settle(
        &self,
        task: &mut Task,
        out: Outcome,
        step: u64,
        now: u64,
        m: Option<MetricsOut<'_>>,
    ) -> Verdict {
        if let Some(m) = m {
            for v in out.warnings.iter().chain(out.halt.iter()) {
                m.updates.extend(metrics::verdict_updates(v, m.options));
            }
        }
        let events = out
            .warnings
            .iter()
            .chain(out.halt.iter())
            .map(|v| Event::Verdict {
                verdict: v.clone(),
                at_ms: now,
            });
        self.listeners.enqueue(events);
        if let Some(halt) = out.halt {
            task.halt = Some(halt.clone());
            return halt;
        }
        out.warnings
            .into_iter()
            .next()
            .unwrap_or_else(|| Verdict::proceed(Some(task.id.clone()), step))
    }

    /// Checks the duration and idle limits of every open task at the clock's now (call it about
    /// once a second); returns the warnings and halts (a task's two warnings in turn, or its halt).
    pub fn tick(&self) -> Vec<Verdict> {
        let now = self.clock.now_ms();
        let mut verdicts = Vec::new();
        let mut updates = Vec::new();
        let options = self.metrics_options();
        {
            let mut guard = self.lock();
            let inner = &mut *guard;
            let idle: Vec<u64> = inner.tasks.iter().map(|t| inner.idle_since(t)).collect();
            for (task, idle_since) in inner.tasks.iter_mut().zip(idle) {
                if task.halt.is_some() {
                    continue;
                }
                let mut out = Outcome::default();
                task.check_duration(&self.config, now, &mut out);
                if out.halt.is_none() {
                    task.check_idle(&self.config, idle_since, now, &mut out);
                }
                let step = task.step_number();
                let m = options.map(|options| MetricsOut {
                    updates: &mut updates,
                    options,
                });
                // Both limits' warnings are returned (a halt alone, as it overtakes them): a
                // warning not returned would never be given again (contract §11.8).
                let more = match out.halt {
                    None => out.warnings.iter().skip(1).cloned().collect(),
                    Some(_) => Vec::new(),
                };
                let v = self.settle(task, out, step, now, m);
                if v.action != VerdictAction::Continue {
                    verdicts.push(v);
                }
                verdicts.extend(more);
            }
        }
        self.listeners.deliver();
        self.record(&updates);
        verdicts
    }

    /// The live snapshot: per task its steps, tool calls (also per tool), spend, duration, idle
    /// time, where each rule stands (`{count, threshold}` by slug) and its halt, if any.
    pub fn status(&self) -> Value {
        let now = self.clock.now_ms();
        let inner = self.lock();
        let tasks: Vec<Value> = inner
            .tasks
            .iter()
            .map(|t| {
                let rules: BTreeMap<&str, Value> = t
                    .rule_counts(&self.config)
                    .into_iter()
                    .map(|(slug, (count, threshold))| {
                        (slug, json!({"count": count, "threshold": threshold}))
                    })
                    .collect();
                json!({
                    "taskId": t.id,
                    "steps": t.step_number(),
                    "toolCalls": t.tool_calls,
                    "toolCallsByName": t.per_tool,
                    "spendCents": t.spent(),
                    "durationSecs": now.saturating_sub(t.started_at) as f64 / 1000.0,
                    "idleSecs": now.saturating_sub(inner.idle_since(t)) as f64 / 1000.0,
                    "rules": rules,
                    "halted": t.halt.is_some(),
                    "halt": t.halt,
                    "unpairedResults": t.unpaired_results,
                })
            })
            .collect();
        let mut status = json!({
            "profile": self.config.profile,
            "tasks": tasks,
            "stack": inner.stack,
            "ignoredEvents": inner.ignored_events,
        });
        drop(inner);
        if let Some(store) = self.store_status() {
            status["store"] = serde_json::to_value(store).unwrap_or(Value::Null);
        }
        status
    }

    /// Everything needed to continue where this monitor is: a monitor restored from it and fed
    /// the rest of a stream gives the verdicts this one would have given.
    pub fn snapshot(&self) -> Value {
        let inner = self.lock();
        let snap = MonitorSnapshot {
            version: 1,
            kind: "monitor".into(),
            tasks: inner.tasks.clone(),
            stack: inner.stack.clone(),
            ignored_events: inner.ignored_events,
            last_event_at: inner.last_event_at,
        };
        serde_json::to_value(&snap).unwrap_or(Value::Null)
    }

    /// Replaces the state with a snapshot's. A malformed snapshot, one of another kind or
    /// version, or one beyond the bounds a live monitor keeps is `INVALID_SNAPSHOT` and changes
    /// nothing.
    pub fn restore(&self, snapshot: &Value) -> Result<()> {
        let snap = MonitorSnapshot::deserialize(snapshot)
            .map_err(|e| Error::snapshot(format_args!("not a Monitor snapshot: {e}")))?;
        persist::check_snapshot_header(snap.version, &snap.kind, "monitor")?;
        let mut inner = Inner {
            tasks: snap.tasks,
            by_id: FxHashMap::default(),
            stack: snap.stack,
            ignored_events: snap.ignored_events,
            last_event_at: snap.last_event_at,
        };
        if inner.tasks.len() > MAX_MONITOR_TASKS
            || inner.stack.len() > MAX_MONITOR_TASKS
            || !inner.tasks.iter().all(|t| t.within_bounds(&self.config))
            || !inner
                .stack
                .iter()
                .all(|id| AgentEvent::check_task_id(id).is_ok())
        {
            return Err(Error::snapshot(
                "the snapshot holds more than a monitor keeps",
            ));
        }
        inner.reindex();
        if inner.by_id.len() != inner.tasks.len() {
            return Err(Error::snapshot("the snapshot names a task twice"));
        }
        for t in &mut inner.tasks {
            t.fit(&self.config);
        }
        let mut state = self.lock();
        *state = inner;
        self.forget_unconfirmed();
        Ok(())
    }

    /// Forgets every task and counter; the configuration stays. With a store, the shared counters
    /// stay too, and what this process counted during an outage and the store has not confirmed
    /// is forgotten with its tasks, not sent (docs/distributed.md, "A Monitor's budgets").
    pub fn reset(&self) {
        let mut state = self.lock();
        *state = Inner::default();
        self.forget_unconfirmed();
    }

    crate::events::listener_methods!(
        "`verdict` (every warning and halt) and, with a store, `warning` (its outages)"
    );
}

/// With a store, a Monitor dropped sends what its tasks counted during an outage and the store has
/// not confirmed, as their `done` heartbeats would (one attempt within `storeTimeoutMs`, none
/// while the store is known down; no listener is called).
impl Drop for Monitor {
    fn drop(&mut self) {
        #[cfg(feature = "redis")]
        if let Some(store) = &self.shared {
            let now = self.clock.now_ms();
            let inner = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
            for task in &mut inner.tasks {
                store.flush(task, &self.config, &self.listeners, now);
            }
        }
    }
}

#[cfg(test)]
mod tests;
