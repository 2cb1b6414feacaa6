//! `Monitor` (contract section 11, docs/monitor.md): one agent watched event by event, every event
//! answered with a verdict object.

use agentbreaker::interop::{ArgKind, FromConfig, updates_json};
use agentbreaker::metrics::{json_event_updates, vocabulary_json};
use napi::Env;
use napi_derive::napi;
use serde_json::Value;

use crate::clock::{ClockArg, clock_in, shared_clock};
use crate::convert::{opt_json, result, string};
use crate::error::{self, Arg, Failure, internal, run};
use crate::listeners::{self, metric_options};

functions! {
    "The metrics vocabulary (docs/observability.md): `{name, prometheusName, instrument, unit,"
    "description, attributes, buckets?}` per metric."
    fn metric_definitions() "" -> "MetricDefinition[]" = |env| result(env, &vocabulary_json());
    "The metric updates of a listener event of the breaker kind `breaker` (`failure`,"
    "`stagnation`, `budget`, `loop`, `strategy`, `monitor`); `{task: true}` adds the task."
    fn metric_updates(event, breaker, options)
        "event: BreakerEvent | VerdictEvent, breaker: string, options?: MetricOptions | null"
        -> "MetricUpdate[]" = |env| {
            let event = opt_json(event.as_ref(), ArgKind::Event, "event")?;
            let breaker = string(breaker.as_ref(), "breaker")?;
            let options = metric_options(options.as_ref())?;
            result(env, &updates_json(&json_event_updates(&event, &breaker, options)))
        };
}

/// Watches an agent: `new Monitor({profile: 'coding-agent', toolLimits: {web_fetch: 20}})`,
/// then `observe(event)` for every event the agent emits; each answer is a verdict
/// (`{action, reason, message, nudge, taskId, step, detail}`) saying continue, warn (with a
/// nudge for the model) or halt.
#[napi]
#[derive(Debug)]
pub struct Monitor(agentbreaker::Monitor);

#[napi]
impl Monitor {
    /// A monitor from `{profile?, failure?, stagnation?, budget?, toolLimits?, warnBefore?,
    /// budgetWarnPercent?, store?, key?, storeTimeoutMs?, storeFailure?, clock?}` (omitted keys
    /// take the `coding-agent` profile's values); the clock may also come second, as for the other
    /// classes (default: the system clock).
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "config?: MonitorConfig | null, clock?: Clock | null"
    )]
    pub fn new(env: &Env, config: Arg<'_>, clock: ClockArg<'_>) -> error::Result<Self> {
        run(env, || {
            let clock = match (clock_in(config.as_ref())?, &clock) {
                (None, clock) => shared_clock(clock)?,
                (Some(inside), None) => inside,
                (Some(_), Some(_)) => {
                    let twice = "clock is given twice: in the config and as an argument";
                    return Err(Failure::Type(ArgKind::Argument.error(twice)));
                }
            };
            let mut config = opt_json(config.as_ref(), ArgKind::Config, "config")?;
            if let Value::Object(map) = &mut config {
                map.remove("clock");
            }
            Ok(agentbreaker::Monitor::from_config(&config, clock)?.into())
        })
    }

    /// `observe()` of an event given as JSON text, answered as JSON text: the fast path of
    /// `agentbreaker.js`, which sends plain events through `JSON.stringify` and reads the verdict
    /// with `JSON.parse` (issue 15 wants observe under 5 us). CPU time of `observe()` of a
    /// tool_use on the shared 2-core machine of the first measure: 4.3 us through the walker and a
    /// `JSON.parse` called from Rust, 2.7 us this way (3.6 us a tool_use/tool_result/progress).
    #[doc(hidden)]
    #[napi(js_name = "_observeJson", catch_unwind, skip_typescript)]
    pub fn observe_json(&self, env: &Env, event: Arg<'_>) -> error::Result<String> {
        run(env, || {
            let event: Value = serde_json::from_str(&string(event.as_ref(), "event")?)
                .map_err(|e| ArgKind::Event.error(format_args!("event is not JSON: {e}")))?;
            let verdict = self.0.observe(&event)?;
            serde_json::to_string(&verdict).map_err(|e| internal(format!("a verdict: {e}")))
        })
    }
}

methods!(Monitor(agentbreaker::Monitor) emits ["verdict"] {
    "Calls `recorder` with the metric updates (`[[name, value, attributes], ...]`) of every"
    "later event that changed a metric, inside the call that caused them; `null` stops it."
    "`{task: true}` adds the `task` attribute. What the recorder throws is dropped. It is held"
    "strongly: one that refers to its Monitor keeps it alive until `setMetricsRecorder(null)`."
    fn set_metrics_recorder(recorder, options)
        "recorder: ((updates: MetricUpdate[]) => void) | null, options?: MetricOptions | null"
        -> "void" = |m, env| {
            let options = metric_options(options.as_ref())?;
            let recorder = recorder.map(listeners::recorder).transpose();
            recorder.map(|recorder| m.set_metrics_recorder(recorder, options))
        };
    "The configuration in effect: the profile with the overrides."
    fn config() [getter] -> "ResolvedMonitorConfig" = |m, env| result(env, m.config());
    "Takes one event; returns its verdict. A malformed event is `INVALID_EVENT`, changes nothing."
    fn observe(event: Event "event: MonitorEvent") -> "Verdict" = observe;
    "Replaces the state with a snapshot's; a bad one is `INVALID_SNAPSHOT` and changes nothing."
    fn restore(snapshot: Snapshot "snapshot: MonitorSnapshot") = restore;
    "Checks the duration and idle limits of every open task now (call it about once a second)."
    fn tick() -> "Verdict[]" = tick;
    "Where every task and rule stands now."
    fn status() -> "MonitorStatus" = status;
    "Everything needed to continue later, in another process too (`restore` takes it back)."
    fn snapshot() -> "MonitorSnapshot" = snapshot;
    "Forgets every task and counter; the configuration stays."
    fn reset() = reset;
    "With `store`: where the budget counters live now, the URL without its password; else `null`."
    fn store_status() -> "StoreStatus | null" = store_status;
});
