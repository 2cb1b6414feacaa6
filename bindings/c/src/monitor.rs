//! `ab_monitor`: one agent watched event by event (contract section 11, docs/monitor.md). JSON in,
//! JSON out: every event answered with a verdict.

use agentbreaker_core::Monitor;

use crate::prelude::*;

/// A Monitor: takes the events an agent emits (model calls, tool calls and results, usage,
/// errors, progress, heartbeats) and answers each with a verdict: continue, warn (with a nudge for
/// the model) or halt. Safe to share between threads. Create with `ab_monitor_new`, release with
/// `ab_monitor_free`.
#[derive(Debug)]
pub struct ab_monitor(Source<Monitor>);

listener::handle!(ab_monitor(Monitor), "monitor");

/// Creates a Monitor from a JSON config (`{"profile": "coding-agent", "failure": {...},
/// "stagnation": {...}, "budget": {...}, "toolLimits": {"web_fetch": 20}, "warnBefore": 2,
/// "budgetWarnPercent": 80}`; NULL = the defaults, the `coding-agent` profile) reading time from
/// `clock` (NULL = the system clock). With `"store": "redis://..."` and `"key"` (and
/// `"storeTimeoutMs"`, `"storeFailure"`), each task's budget counters are shared through Redis
/// by every monitor on the key (docs/distributed.md); construction then waits at most
/// `storeTimeoutMs` for it (`AB_ERR_IO` when the server refuses the credentials).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_monitor_new(
    config_json: *const c_char,
    clock: *const ab_manual_clock,
    out_monitor: *mut *mut ab_monitor,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::construct(config_json, clock, out_monitor, "out_monitor") }
}

/// Releases a Monitor. NULL is a no-op; freeing twice is undefined behaviour.
///
/// # Safety
/// `monitor` is NULL or a monitor not yet freed that no other thread is using.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_monitor_free(monitor: *mut ab_monitor) {
    // SAFETY: NULL or an unfreed handle (this function's contract).
    unsafe { ffi::free_handle(monitor) }
}

/// Observes one event given as JSON (`{"type": "tool_use", "name": "Bash", "input": {...},
/// "id": "t1"}`; the types `assistant`, `tool_use`, `tool_result`, `usage`, `error`, `progress`,
/// `heartbeat`, `alive`; unknown types are ignored). Writes its verdict to `*out_verdict_json`:
/// `{"action": "continue"|"warn"|"halt", "reason", "message", "nudge", "taskId", "step",
/// "detail"}`. A halt is a verdict (`AB_OK`), not an error. A malformed event is
/// `AB_ERR_INVALID_EVENT` and changes nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_monitor_observe(
    monitor: *const ab_monitor,
    event_json: *const c_char,
    out_verdict_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    boundary(|| unsafe {
        let m = ffi::handle(monitor)?;
        let event = ffi::json(event_json, "event_json", ArgKind::Event)?;
        let out = Out::new(out_verdict_json, "out_verdict_json")?;
        out.write(ffi::json_string(&m.core.observe(&event)?)?);
        Ok(())
    })
}

/// Checks the duration and idle limits of every open task now (call it about once a second);
/// writes the warnings and halts as a JSON array of verdicts to `*out_json` (`[]` when none).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_monitor_tick(
    monitor: *const ab_monitor,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(monitor, out_json, |m| m.core.tick()) }
}

/// Writes where every task and rule stands as JSON to `*out_json`: `{"profile", "tasks":
/// [{"taskId", "steps", "toolCalls", "toolCallsByName", "spendCents", "durationSecs",
/// "idleSecs", "rules": {slug: {"count", "threshold"}}, "halted", "halt", "unpairedResults"}],
/// "stack", "ignoredEvents"}` (and, with a store, `"store"`: as `ab_monitor_store_status`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_monitor_status(
    monitor: *const ab_monitor,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(monitor, out_json, |m| m.core.status()) }
}

/// Writes where the budget counters live as JSON to `*out_json`: with a `store` in the config,
/// `{"url", "key", "mode", "outages", "lastError"}` (`mode` is `"shared"`, `"local"` or
/// `"refusing"`; the URL without its password); `null` without a store.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_monitor_store_status(
    monitor: *const ab_monitor,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(monitor, out_json, |m| m.core.store_status()) }
}

/// Writes everything needed to continue later (in another process too) as JSON to `*out_json`:
/// `{"version": 1, "kind": "monitor", "tasks", "stack", "ignoredEvents", "lastEventAt"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_monitor_snapshot(
    monitor: *const ab_monitor,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(monitor, out_json, |m| m.core.snapshot()) }
}

/// Replaces the state with a snapshot's (JSON, as `ab_monitor_snapshot` writes it). A malformed
/// snapshot, one of another kind or version, or one beyond a monitor's bounds is
/// `AB_ERR_INVALID_SNAPSHOT` and changes nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_monitor_restore(
    monitor: *const ab_monitor,
    snapshot_json: *const c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::restore(monitor, snapshot_json, |m, s| m.core.restore(s)) }
}

/// Forgets every task and counter; the configuration stays.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_monitor_reset(monitor: *const ab_monitor) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(monitor, |m| m.core.reset()) }
}

/// Adds a listener for `verdict` events (every warning and halt: the verdict's keys with
/// `"type": "verdict"` and `"atMs"`); writes its id (>= 1) to `*out_id`.
///
/// # Safety
/// As for `ab_failure_breaker_add_listener`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_monitor_add_listener(
    monitor: *const ab_monitor,
    listener: ab_listener_fn,
    user_data: *mut c_void,
    out_id: *mut u64,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::add(monitor, listener, user_data, out_id) }
}

/// Removes the listener `id`; writes whether there was one to `*out_removed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_monitor_remove_listener(
    monitor: *const ab_monitor,
    id: u64,
    out_removed: *mut bool,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::remove(monitor, id, out_removed) }
}
