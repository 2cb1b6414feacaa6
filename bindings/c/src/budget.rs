//! `ab_budget_breaker`: per-task halt conditions over an event stream (SPEC 4, seed 003).

use std::ffi::{c_char, c_void};

use agentbreaker_core::interop::ArgKind;
use agentbreaker_core::{BudgetBreaker, BudgetConfig};

use crate::clock::ab_manual_clock;
use crate::env::read_env;
use crate::ffi::{self, Out, boundary};
use crate::listener::{self, ListenerTable, ab_listener_fn};
use crate::status::ab_status;

/// A BudgetBreaker (SPEC 4): per-task tool-call, spend, duration, idle and output-loop limits over
/// an agent's event stream. Safe to share between threads. Create with `ab_budget_breaker_new`
/// (or `ab_budget_breaker_new_from_env`), release with `ab_budget_breaker_free`.
#[derive(Debug)]
pub struct ab_budget_breaker {
    breaker: BudgetBreaker,
    listeners: ListenerTable,
}

listener::source!(ab_budget_breaker, breaker);

fn into_handle(breaker: BudgetBreaker) -> *mut ab_budget_breaker {
    ffi::into_handle(ab_budget_breaker {
        breaker,
        listeners: ListenerTable::default(),
    })
}

/// Creates a BudgetBreaker from a JSON config (`{"maxToolCallsPerTask": 50,
/// "maxTokenSpendCentsPerTask": 5000, "maxTaskDurationSecs": 1800, "maxIdleSecs": 300,
/// "similarityJaccardThreshold": 0.95, "loopWindow": 3, "maxTokensPerOutput": 512, "prices": {...}}`;
/// NULL = defaults) reading time from `clock` (NULL = the system clock).
///
/// # Safety
///
/// `config_json` is NULL or a NUL-terminated string; `clock` is NULL or a live clock;
/// `out_breaker` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_new(
    config_json: *const c_char,
    clock: *const ab_manual_clock,
    out_breaker: *mut *mut ab_budget_breaker,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (this function's contract).
        let (config, clock, out) = unsafe {
            (
                ffi::config(config_json)?,
                ffi::clock_arg(clock),
                Out::new(out_breaker, "out_breaker")?,
            )
        };
        let breaker = BudgetBreaker::with_clock(BudgetConfig::from_json(&config)?, clock)?;
        out.write(into_handle(breaker));
        Ok(())
    })
}

/// Creates a BudgetBreaker configured from the environment (SPEC 7): `env_json` is a JSON object
/// of strings (`{"AGENTBREAKER_TOOL_CAP": "20"}`), or NULL to read the process environment.
/// Invalid variables fall back to the defaults; the warnings (`[{"variable", "value",
/// "message"}]`) are written as JSON to `*out_warnings_json`.
///
/// # Safety
///
/// `env_json` is NULL or a NUL-terminated string; `clock` is NULL or a live clock; `out_breaker`
/// and `out_warnings_json` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_new_from_env(
    env_json: *const c_char,
    clock: *const ab_manual_clock,
    out_breaker: *mut *mut ab_budget_breaker,
    out_warnings_json: *mut *mut c_char,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (this function's contract).
        let (env, clock, out, out_warnings) = unsafe {
            (
                read_env(env_json)?,
                ffi::clock_arg(clock),
                Out::new(out_breaker, "out_breaker")?,
                Out::new(out_warnings_json, "out_warnings_json")?,
            )
        };
        let breaker = BudgetBreaker::with_clock(env.config, clock)?;
        let warnings = ffi::json_string(&env.warnings)?;
        out.write(into_handle(breaker));
        out_warnings.write(warnings);
        Ok(())
    })
}

/// Releases a BudgetBreaker. NULL is a no-op; freeing twice is undefined behaviour.
///
/// # Safety
///
/// `breaker` is NULL or a breaker from this library that has not been freed and that no other
/// thread is using.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_free(breaker: *mut ab_budget_breaker) {
    // SAFETY: NULL or an unfreed handle (this function's contract).
    unsafe { ffi::free_handle(breaker) }
}

/// Ingests one event given as JSON (`{"type": "tool_use", "name": "web_fetch"}`,
/// `{"type": "heartbeat", "taskId": "t1", "phase": "starting"}`, `assistant`, `usage`; unknown
/// types are ignored). Writes the halt it caused as JSON (`{"kind", "slug", "taskId", "message",
/// ...}`) to `*out_halt_json`, or NULL when it caused none. A malformed event is
/// `AB_ERR_INVALID_EVENT` and changes nothing.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `event_json` is NULL or a NUL-terminated string;
/// `out_halt_json` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_ingest(
    breaker: *const ab_budget_breaker,
    event_json: *const c_char,
    out_halt_json: *mut *mut c_char,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (this function's contract).
        let (b, event, out) = unsafe {
            (
                ffi::handle(breaker, "breaker")?,
                ffi::json(event_json, "event_json", false, ArgKind::Event)?,
                Out::new(out_halt_json, "out_halt_json")?,
            )
        };
        let halt = b.breaker.ingest(&event)?;
        out.write(ffi::optional_json_string(halt.as_ref())?);
        Ok(())
    })
}

/// Checks duration and idle time of every open task (call it about once a second); writes the
/// halts as a JSON array to `*out_json` (`[]` when none), tasks in the order they were opened.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `out_json` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_tick(
    breaker: *const ab_budget_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, "breaker", out_json, |b| Ok(b.breaker.tick())) }
}

/// Writes the live snapshot as JSON to `*out_json`: `{"tasks": [{"taskId", "toolCalls",
/// "spendCents", "durationSecs", "idleSecs", "halted"}], "stack": [...], "ignoredEvents"}`.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `out_json` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_snapshot(
    breaker: *const ab_budget_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, "breaker", out_json, |b| Ok(b.breaker.snapshot())) }
}

/// Forgets every task, the stack and the counters.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_reset(breaker: *const ab_budget_breaker) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(breaker, "breaker", |b| b.breaker.reset()) }
}

/// Adds a listener for `halt` events; writes its id (>= 1) to `*out_id`.
///
/// # Safety
///
/// As for `ab_failure_breaker_add_listener`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_add_listener(
    breaker: *const ab_budget_breaker,
    listener: ab_listener_fn,
    user_data: *mut c_void,
    out_id: *mut u64,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::add(breaker, "breaker", listener, user_data, out_id) }
}

/// Removes the listener `id`; writes whether there was one to `*out_removed`.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `out_removed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_remove_listener(
    breaker: *const ab_budget_breaker,
    id: u64,
    out_removed: *mut bool,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::remove(breaker, "breaker", id, out_removed) }
}
