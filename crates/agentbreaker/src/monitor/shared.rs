//! A Monitor whose per-task budget counters live in Redis (contract section 12;
//! docs/distributed.md, "A Monitor's budgets").
//!
//! The counters of a task — tool calls, calls per tool, spend, the task's start — are one hash,
//! `<key>:task:<taskId>`. Every event that counts (a `tool_use`, a `usage`) is one script call
//! (`lua/count.lua`) that adds the event's increments and returns the new totals; the task adopts
//! them before its budget rules run, so the rules and the warning ladder judge the fleet's totals
//! and no increment is lost. The first event of a task in this process makes the same call with
//! nothing to add, to learn the task's start. Every other event costs no round trip.
//!
//! Everything else stays local: the step detectors, the error rules, the output loop and the idle
//! timer judge the agent this process watches, and its listeners hear its own verdicts.
//!
//! While the store is unreachable, `storeFailure: "open"` counts locally from the last totals the
//! task knew (one `warning` event says so) and keeps what it counted, which the task's first event
//! after the store answers again adds to the shared totals; `"closed"` answers the events that
//! need the store with a halt that is not kept on the task (docs/distributed.md says why).
//!
//! What a task counted during an outage goes out as a numbered batch: a call that timed out may
//! still have run, so the batch is sent again, with its number, until a reply confirms it, and the
//! script adds each batch of a process once. A task closed here (a `done` or `error` heartbeat, the
//! Monitor dropped) sends what it has not had confirmed before it is forgotten.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::Value as RedisValue;
use rustc_hash::FxHashMap;
use serde_json::json;

use super::config::MonitorConfig;
use super::task::{MAX_TRACKED_TOOLS, TaskSync, Totals};
use super::verdict::{Rule, Verdict, VerdictAction};
use crate::error::Result;
use crate::events::{Event, Listeners};
use crate::store::link::{Fault, FaultKind, Link, LinkConfig, LinkGuard, LinkUser, Session};
use crate::store::{StoreFailure, StoreStatus, StoreUrl};

const COUNT: &str = include_str!("lua/count.lua");

/// The longest a task's counters live in the store: a year (the task's duration and idle limits,
/// which set it, may be much larger).
const MAX_TTL_MS: u64 = 365 * 24 * 3600 * 1000;

/// The most batches a task keeps unconfirmed (each failed attempt to send them adds at most one);
/// what the task counts beyond them waits on the task until they are confirmed.
const MAX_BATCHES: usize = 8;

/// An event that adds nothing.
const NOTHING: Delta<'static> = Delta {
    tool: None,
    spend_cents: 0.0,
};

/// The Monitor's Lua script by name (`count`), as it is loaded.
pub fn monitor_store_scripts() -> Vec<(&'static str, String)> {
    vec![("count", COUNT.to_string())]
}

/// The Redis key of a task's budget counters under the prefix `key`.
pub fn task_key(key: &str, task_id: &str) -> String {
    format!("{key}:task:{task_id}")
}

/// What an event asks of the store.
#[derive(Debug, Clone, Copy)]
pub(super) struct Delta<'a> {
    /// A tool call: its name (cut as the task cuts it) and whether `toolLimits` names it.
    pub tool: Option<(&'a str, bool)>,
    /// The cents a `usage` event spent.
    pub spend_cents: f64,
}

impl Delta<'_> {
    fn counts(&self) -> bool {
        self.tool.is_some() || self.spend_cents != 0.0
    }
}

/// What the store said for an event.
#[derive(Debug)]
pub(super) enum Synced {
    /// Nothing was asked (nothing to add, the task's start already known).
    Idle,
    /// The task adopted the store's totals, which hold this event's increments.
    Counted,
    /// The store is unreachable and `storeFailure` is `"open"`: the task counts locally.
    Local,
    /// The store is unreachable and `storeFailure` is `"closed"`: the event is answered with
    /// this halt (not kept on the task).
    Refused(Box<Verdict>),
}

/// What a task counted during an outage, numbered so the store adds it once: the process sends it
/// again, with the same number, until a reply confirms it (a call that timed out may have run).
#[derive(Debug, Clone)]
struct Batch {
    /// Increasing across the batches of this process (the script skips a batch whose number is
    /// not above the last one it applied for the process).
    number: u64,
    calls: u64,
    spend_cents: f64,
    /// Calls per tool: (name, calls, limited).
    tools: Vec<(String, u64, bool)>,
}

impl Batch {
    /// Adds an event's increments (the batch has not been sent yet).
    fn add(&mut self, delta: Delta<'_>) {
        if let Some((name, limited)) = delta.tool {
            self.calls = self.calls.saturating_add(1);
            match self.tools.iter_mut().find(|t| t.0 == name) {
                Some(t) => t.1 = t.1.saturating_add(1),
                None => self.tools.push((name.to_string(), 1, limited)),
            }
        }
        self.spend_cents += delta.spend_cents;
    }
}

/// The link's hooks: a Monitor reads no state when it connects, and nothing is published on its
/// channel (the subscription is how the background thread notices a lost server while no event
/// comes: a restarted server is rejoined before the next event instead of being found out by it).
struct Hooks;

impl LinkUser for Hooks {
    fn on_connect(&self, _session: &mut Session) -> std::result::Result<(), Fault> {
        Ok(())
    }
    fn on_message(&self, _payload: &[u8]) {}
    fn on_up(&self, _rejoined: bool) {}
    fn on_down(&self) {}
}

/// The store side of a Monitor with `store`.
pub(super) struct MonitorStore {
    link: Link,
    prefix: String,
    on_failure: StoreFailure,
    timeout: Duration,
    ttl: String,
    tracked: String,
    /// This Monitor's id in the batches it sends (the script remembers, per id, the last batch it
    /// applied).
    process: String,
    /// The number of the last batch made.
    batches_made: AtomicU64,
    /// Per task: the batches sent and not confirmed yet, oldest first (only for tasks whose
    /// `sync.synced` is false: a reply clears them).
    unconfirmed: Mutex<FxHashMap<String, Vec<Batch>>>,
}

impl std::fmt::Debug for MonitorStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MonitorStore")
            .field("url", self.link.url())
            .field("key", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn protocol(what: &str) -> Fault {
    Fault::new(
        FaultKind::Protocol,
        format!("unexpected reply from the store ({what})"),
    )
}

fn fields(value: RedisValue) -> std::result::Result<Vec<Vec<u8>>, Fault> {
    let RedisValue::Array(items) = value else {
        return Err(protocol("not an array"));
    };
    items
        .into_iter()
        .map(|item| match item {
            RedisValue::BulkString(b) => Ok(b),
            RedisValue::SimpleString(s) => Ok(s.into_bytes()),
            RedisValue::Int(i) => Ok(i.to_string().into_bytes()),
            _ => Err(protocol("a field that is not a string")),
        })
        .collect()
}

/// A whole number in a reply, saturating (Lua writes doubles).
fn whole(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?;
    text.parse::<u64>().ok().or_else(|| {
        let f: f64 = text.parse().ok()?;
        (f.is_finite() && f >= 0.0).then_some(f as u64)
    })
}

fn float(field: &[u8]) -> Option<f64> {
    let f: f64 = std::str::from_utf8(field).ok()?.parse().ok()?;
    f.is_finite().then_some(f)
}

/// The reply of `count`: the start, the tool calls, the spend, then each tool's total.
fn parse_totals(
    value: RedisValue,
    tools: &[(String, u64, bool)],
) -> std::result::Result<Totals, Fault> {
    let fields = fields(value)?;
    let malformed = || protocol("malformed totals");
    let [started, calls, spend, counts @ ..] = fields.as_slice() else {
        return Err(malformed());
    };
    if counts.len() != tools.len() {
        return Err(malformed());
    }
    Ok(Totals {
        started_at: whole(started).ok_or_else(malformed)?,
        tool_calls: whole(calls).ok_or_else(malformed)?,
        spend_cents: float(spend).ok_or_else(malformed)?,
        tools: tools
            .iter()
            .zip(counts)
            .map(|((name, _, _), n)| whole(n).map(|n| (name.clone(), n)))
            .collect::<Option<_>>()
            .ok_or_else(malformed)?,
    })
}

/// The batches argument of `count`: the process's id, then per batch its number, calls, cents and
/// its calls of each tool of `tools`, in their order.
fn batches_arg(process: &str, batches: &[Batch], tools: &[(String, u64, bool)]) -> String {
    let mut s = process.to_string();
    for b in batches {
        let _ = write!(s, " {} {} {}", b.number, b.calls, exact(b.spend_cents));
        for (name, _, _) in tools {
            let n = b.tools.iter().find(|t| t.0 == *name).map_or(0, |t| t.1);
            let _ = write!(s, " {n}");
        }
    }
    s
}

/// A double as the script reads it back exactly.
fn exact(f: f64) -> String {
    if f == 0.0 {
        return "0".to_string();
    }
    // Rust's shortest representation reads back to the same double in Lua's tonumber (strtod).
    let mut s = String::new();
    let _ = write!(s, "{f:?}");
    s
}

impl MonitorStore {
    /// Connects (waiting at most `storeTimeoutMs`).
    pub(super) fn start(config: &MonitorConfig) -> Result<MonitorStore> {
        let url = config.store.clone().unwrap_or_else(|| StoreUrl::new(""));
        let prefix = config.key.clone().unwrap_or_default();
        let timeout = Duration::from_millis(config.store_timeout_ms);
        let budget = &config.budget;
        let ttl = budget
            .max_task_duration_secs
            .saturating_add(budget.max_idle_secs)
            .saturating_mul(1000)
            .min(MAX_TTL_MS);
        let link = Link::start(
            LinkConfig {
                url,
                timeout,
                channel: Some(format!("{prefix}:monitor")),
                scripts: vec![COUNT.to_string()],
            },
            std::sync::Arc::new(Hooks),
        )?;
        Ok(MonitorStore {
            link,
            prefix,
            on_failure: config.store_failure,
            timeout,
            ttl: ttl.to_string(),
            tracked: MAX_TRACKED_TOOLS.to_string(),
            process: crate::store::random_id(2), // 128 bits
            batches_made: AtomicU64::new(0),
            unconfirmed: Mutex::new(FxHashMap::default()),
        })
    }

    fn unconfirmed(&self) -> std::sync::MutexGuard<'_, FxHashMap<String, Vec<Batch>>> {
        self.unconfirmed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets every batch not confirmed yet (`reset()`, `restore()`: this process's tasks are
    /// gone, and so is what they counted during an outage).
    pub(super) fn forget(&self) {
        self.unconfirmed().clear();
    }

    /// A new batch of what the task counted while the store was unreachable (taken from it).
    fn new_batch(&self, sync: &mut TaskSync) -> Batch {
        Batch {
            number: self.batches_made.fetch_add(1, Ordering::Relaxed) + 1,
            calls: std::mem::take(&mut sync.calls),
            spend_cents: std::mem::take(&mut sync.spend_cents),
            tools: std::mem::take(&mut sync.tools),
        }
    }

    /// Where the counters live and how the store is doing.
    pub(super) fn status(&self) -> StoreStatus {
        self.link.store_status(&self.prefix, self.on_failure)
    }

    /// Takes the link for a call, announcing a rejoin or an outage (once each): `None` when the
    /// store is down.
    fn enter(&self, listeners: &Listeners, now: u64) -> Option<LinkGuard<'_>> {
        let mut link = self.link.lock();
        if link.take_rejoin() {
            listeners.enqueue([Event::Warning {
                message: format!(
                    "Shared budget counters reachable again at {} (key {}): each task rejoins \
                     the shared totals with its next event.",
                    self.link.url().redacted(),
                    self.prefix
                ),
                at_ms: now,
            }]);
        }
        if link.is_up() {
            return Some(link);
        }
        self.announce(&mut link, listeners, now);
        None
    }

    /// After the store was found down: one warning per outage.
    fn announce(&self, link: &mut LinkGuard<'_>, listeners: &Listeners, now: u64) {
        let Some(reason) = link.take_outage() else {
            return;
        };
        let then = match self.on_failure {
            StoreFailure::Open => {
                "Each task counts locally until it answers again, then adds what it counted \
                 (storeFailure \"open\")"
            }
            StoreFailure::Closed => {
                "Tool calls and spend are answered with a halt until it answers again \
                 (storeFailure \"closed\")"
            }
        };
        listeners.enqueue([Event::Warning {
            message: format!(
                "Shared budget counters unreachable at {} (key {}): {reason}. {then}.",
                self.link.url().redacted(),
                self.prefix,
            ),
            at_ms: now,
        }]);
    }

    /// Brings a task's counters in line with the store for an event (under the Monitor's lock):
    /// adds the event's increments and what the task counted during an outage, and adopts the
    /// totals. No round trip when the event counts nothing and the task is in line already.
    ///
    /// What the task counted during an outage goes as a new batch, with the batches sent before
    /// and not confirmed (a call that timed out may have run: the script adds each batch once);
    /// with `storeFailure: "open"` the increments of an event sent with batches join the new one.
    /// A reply confirms them all; a failed call keeps them for the task's next call.
    pub(super) fn sync(
        &self,
        task: &mut super::task::Task,
        delta: Delta<'_>,
        c: &MonitorConfig,
        listeners: &Listeners,
        now: u64,
    ) -> Synced {
        if !delta.counts() && task.sync.synced && !task.sync.pending() {
            return Synced::Idle;
        }
        let deadline = Instant::now() + self.timeout;
        let Some(mut link) = self.enter(listeners, now) else {
            return self.unreachable(task, delta, listeners, now);
        };
        // The batches not confirmed yet (only a task not in line has any), and what the task
        // counted since as a new one; with "open", the event's increments join it (added once even
        // if the call times out after it ran). Otherwise they go as they are.
        let mut batches = if task.sync.synced {
            Vec::new()
        } else {
            self.unconfirmed().remove(&task.id).unwrap_or_default()
        };
        let join = self.on_failure == StoreFailure::Open
            && delta.counts()
            && (task.sync.pending() || !batches.is_empty())
            && batches.len() < MAX_BATCHES;
        let mut plain = delta;
        if join || (task.sync.pending() && batches.len() < MAX_BATCHES) {
            let mut batch = self.new_batch(&mut task.sync);
            if join {
                batch.add(delta);
                plain = NOTHING;
            }
            batches.push(batch);
        }
        let mut tools: Vec<(String, u64, bool)> = Vec::new();
        if let Some((name, limited)) = plain.tool {
            tools.push((name.to_string(), 1, limited));
        }
        for (name, _, limited) in batches.iter().flat_map(|b| &b.tools) {
            if !tools.iter().any(|t| t.0 == *name) {
                tools.push((name.clone(), 0, *limited));
            }
        }
        let calls = u64::from(plain.tool.is_some()).to_string();
        let spend = exact(plain.spend_cents);
        let now_text = now.to_string();
        let counts: Vec<String> = tools.iter().map(|t| t.1.to_string()).collect();
        let mut args: Vec<&str> = vec![&now_text, &self.ttl, &self.tracked, &calls, &spend];
        for ((name, _, limited), n) in tools.iter().zip(&counts) {
            args.push(name);
            args.push(n);
            args.push(if *limited { "1" } else { "0" });
        }
        let numbered = (!batches.is_empty()).then(|| batches_arg(&self.process, &batches, &tools));
        args.extend(numbered.as_deref());
        let key = task_key(&self.prefix, &task.id);
        let reply = link
            .eval(0, &[&key], &args, deadline)
            .and_then(|v| parse_totals(v, &tools));
        match reply {
            Ok(totals) => {
                task.sync.synced = true;
                task.adopt(&totals, c);
                Synced::Counted
            }
            Err(fault) => {
                link.fail(&fault);
                self.announce(&mut link, listeners, now);
                drop(link);
                if !batches.is_empty() {
                    // Sent again by the task's next call.
                    task.sync.synced = false;
                    self.unconfirmed().insert(task.id.clone(), batches);
                }
                if join {
                    // The event's increments are in the last batch; the task counts them itself.
                    Synced::Local
                } else {
                    self.unreachable(task, delta, listeners, now)
                }
            }
        }
    }

    /// Before a task is forgotten here (a `done` or `error` heartbeat, the Monitor dropped): sends
    /// what it counted during an outage that the store has not confirmed, in one attempt within
    /// `storeTimeoutMs` (none while the store is known down). What is still unconfirmed then is
    /// dropped, with a `warning` event saying so.
    pub(super) fn flush(
        &self,
        task: &mut super::task::Task,
        c: &MonitorConfig,
        listeners: &Listeners,
        now: u64,
    ) {
        let sent_before = !task.sync.synced && self.unconfirmed().contains_key(&task.id);
        if !sent_before && !task.sync.pending() {
            return;
        }
        self.sync(task, NOTHING, c, listeners, now);
        let left = self.unconfirmed().remove(&task.id).unwrap_or_default();
        if left.is_empty() && !task.sync.pending() {
            return;
        }
        let (calls, spend) = left
            .iter()
            .fold((task.sync.calls, task.sync.spend_cents), |(n, s), b| {
                (n.saturating_add(b.calls), s + b.spend_cents)
            });
        task.sync = TaskSync::default();
        listeners.enqueue([Event::Warning {
            message: format!(
                "Task {} closed before the budget counters at {} (key {}) confirmed what it \
                 counted during an outage ({calls} tool calls, {spend} cents): the shared totals \
                 may not hold it.",
                task.id,
                self.link.url().redacted(),
                self.prefix,
            ),
            at_ms: now,
        }]);
    }

    /// The store is down: `"open"` keeps the event's increments for later and lets the task
    /// count them; `"closed"` refuses the events that count (a usage's spend is kept: it was
    /// spent).
    fn unreachable(
        &self,
        task: &mut super::task::Task,
        delta: Delta<'_>,
        listeners: &Listeners,
        now: u64,
    ) -> Synced {
        match self.on_failure {
            StoreFailure::Open => {
                task.sync.keep(delta.tool, delta.spend_cents);
                Synced::Local
            }
            StoreFailure::Closed if !delta.counts() => Synced::Local,
            StoreFailure::Closed => {
                task.sync.keep(None, delta.spend_cents);
                let verdict = self.refusal(task, delta);
                listeners.enqueue([Event::Verdict {
                    verdict: verdict.clone(),
                    at_ms: now,
                }]);
                Synced::Refused(Box::new(verdict))
            }
        }
    }

    /// The halt of an event that needs the store while it is unreachable (`storeFailure:
    /// "closed"`): the budget rule that cannot be checked, with `detail.store`.
    fn refusal(&self, task: &super::task::Task, delta: Delta<'_>) -> Verdict {
        let (rule, what) = if delta.tool.is_some() {
            (Rule::ToolCallLimit, "tool calls")
        } else {
            (Rule::TokenSpendLimit, "spend")
        };
        let url = self.link.url().redacted();
        let error = self.link.status().last_error.unwrap_or_default();
        Verdict {
            action: VerdictAction::Halt,
            reason: Some(rule),
            message: Some(format!(
                "{what}: cannot be counted: the budget store at {url} (key {}) is unreachable \
                 (storeFailure \"closed\")",
                self.prefix
            )),
            nudge: Some(
                "The budget of this task cannot be checked right now. Stop and report what you \
                 have done and what is left."
                    .to_string(),
            ),
            task_id: Some(task.id.clone()),
            step: task.step_number(),
            detail: Some(json!({
                "store": url,
                "key": self.prefix,
                "mode": "refusing",
                "error": error,
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(fields: &[&str]) -> RedisValue {
        RedisValue::Array(
            fields
                .iter()
                .map(|f| RedisValue::BulkString(f.as_bytes().to_vec()))
                .collect(),
        )
    }

    #[test]
    fn totals_parse() {
        let tools = vec![("Bash".to_string(), 1, false), ("web".to_string(), 1, true)];
        let t = parse_totals(
            bulk(&["1500", "7", "0.30000000000000004", "3", "0"]),
            &tools,
        )
        .unwrap();
        assert_eq!(t.started_at, 1500);
        assert_eq!(t.tool_calls, 7);
        assert_eq!(t.spend_cents, 0.1 + 0.2);
        assert_eq!(t.tools, [("Bash".to_string(), 3), ("web".to_string(), 0)]);
        assert!(parse_totals(bulk(&["1500", "7", "0", "3"]), &tools).is_err());
        assert!(parse_totals(bulk(&["x", "7", "0"]), &[]).is_err());
        assert!(parse_totals(bulk(&["1", "7", "inf"]), &[]).is_err());
        assert!(parse_totals(RedisValue::Nil, &[]).is_err());
    }

    #[test]
    fn doubles_go_out_exactly() {
        for f in [0.0, 0.1, 0.1 + 0.2, 1e15, 123.456, f64::MIN_POSITIVE, -2.5] {
            assert_eq!(exact(f).parse::<f64>().unwrap(), f);
        }
        assert_eq!(task_key("t", "session"), "t:task:session");
    }
}
