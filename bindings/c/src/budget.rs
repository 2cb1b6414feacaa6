//! `ab_budget_breaker`: per-task halt conditions over an event stream (contract section 4), and
//! its configuration from the environment (contract section 7).

use agentbreaker_core::{BudgetBreaker, EnvConfig};
use agentbreaker_core::{config_from_env_json, config_from_process_env};

use crate::ffi::Result;
use crate::prelude::*;

/// A BudgetBreaker: per-task tool-call, spend, duration, idle and output-loop limits over an
/// agent's event stream. Safe to share between threads. Create with `ab_budget_breaker_new` (or
/// `ab_budget_breaker_new_from_env`), release with `ab_budget_breaker_free`.
#[derive(Debug)]
pub struct ab_budget_breaker(Source<BudgetBreaker>);

listener::handle!(ab_budget_breaker(BudgetBreaker), "breaker");

/// Creates a BudgetBreaker from a JSON config (`{"maxToolCallsPerTask": 50,
/// "maxTokenSpendCentsPerTask": 5000, "maxTaskDurationSecs": 1800, "maxIdleSecs": 300,
/// "similarityJaccardThreshold": 0.95, "loopWindow": 3, "maxTokensPerOutput": 512, "prices": {...}}`;
/// NULL = defaults) reading time from `clock` (NULL = the system clock).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_new(
    config_json: *const c_char,
    clock: *const ab_manual_clock,
    out_breaker: *mut *mut ab_budget_breaker,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::construct(config_json, clock, out_breaker, "out_breaker") }
}

/// The environment named by `env_json`: a JSON object of strings, or the process environment for
/// NULL.
///
/// # Safety
///
/// `env_json` is NULL or a NUL-terminated string.
unsafe fn read_env(env_json: *const c_char) -> Result<EnvConfig> {
    if env_json.is_null() {
        return Ok(config_from_process_env());
    }
    // SAFETY: a non-NULL NUL-terminated string (this function's contract).
    let env = unsafe { ffi::json(env_json, "env_json", ArgKind::Argument) }?;
    Ok(config_from_env_json(&env)?)
}

/// Creates a BudgetBreaker configured from the environment: `env_json` is a JSON object of
/// strings (`{"AGENTBREAKER_TOOL_CAP": "20"}`), or NULL to read the process environment.
/// Invalid variables fall back to the defaults; the warnings (`[{"variable", "value",
/// "message"}]`) are written as JSON to `*out_warnings_json`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_new_from_env(
    env_json: *const c_char,
    clock: *const ab_manual_clock,
    out_breaker: *mut *mut ab_budget_breaker,
    out_warnings_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    boundary(|| unsafe {
        let env = read_env(env_json)?;
        let out = Out::new(out_breaker, "out_breaker")?;
        let out_warnings = Out::new(out_warnings_json, "out_warnings_json")?;
        let breaker = BudgetBreaker::with_clock(env.config, ffi::clock_arg(clock))?;
        let warnings = ffi::json_string(&env.warnings)?;
        out.wrap(breaker);
        out_warnings.write(warnings);
        Ok(())
    })
}

/// Releases a BudgetBreaker. NULL is a no-op; freeing twice is undefined behaviour.
///
/// # Safety
/// `breaker` is NULL or a breaker not yet freed that no other thread is using.
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
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_ingest(
    breaker: *const ab_budget_breaker,
    event_json: *const c_char,
    out_halt_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    boundary(|| unsafe {
        let b = ffi::handle(breaker)?;
        let event = ffi::json(event_json, "event_json", ArgKind::Event)?;
        let out = Out::new(out_halt_json, "out_halt_json")?;
        out.write(ffi::optional_json_string(b.core.ingest(&event)?.as_ref())?);
        Ok(())
    })
}

/// Checks duration and idle time of every open task (call it about once a second); writes the
/// halts as a JSON array to `*out_json` (`[]` when none), tasks in the order they were opened.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_tick(
    breaker: *const ab_budget_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, out_json, |b| b.core.tick()) }
}

/// Writes the live snapshot as JSON to `*out_json`: `{"tasks": [{"taskId", "toolCalls",
/// "spendCents", "durationSecs", "idleSecs", "halted"}], "stack": [...], "ignoredEvents"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_snapshot(
    breaker: *const ab_budget_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, out_json, |b| b.core.snapshot()) }
}

/// Forgets every task, the stack and the counters.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_reset(breaker: *const ab_budget_breaker) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(breaker, |b| b.core.reset()) }
}

/// Adds a listener for `halt` events; writes its id (>= 1) to `*out_id`.
///
/// # Safety
/// As for `ab_failure_breaker_add_listener`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_add_listener(
    breaker: *const ab_budget_breaker,
    listener: ab_listener_fn,
    user_data: *mut c_void,
    out_id: *mut u64,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::add(breaker, listener, user_data, out_id) }
}

/// Removes the listener `id`; writes whether there was one to `*out_removed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_budget_breaker_remove_listener(
    breaker: *const ab_budget_breaker,
    id: u64,
    out_removed: *mut bool,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::remove(breaker, id, out_removed) }
}

/// Reads the BudgetBreaker settings from an environment: `env_json` is a JSON object of strings
/// (`{"AGENTBREAKER_TOOL_CAP": "20", "BB_CIRCUIT_BREAKER_IDLE_SECS": "60"}`), or NULL to read the
/// process environment. Writes `{"config": {...a full BudgetBreaker config...}, "warnings":
/// [{"variable", "value", "message"}]}` to `*out_json`; the `config` object can be passed to
/// `ab_budget_breaker_new` as it is. Invalid values fall back to the defaults with a warning;
/// `env_json` that is not an object of strings is `AB_ERR_INVALID_ARGUMENT`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_config_from_env(
    env_json: *const c_char,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    boundary(|| unsafe {
        let (env, out) = (read_env(env_json)?, Out::new(out_json, "out_json")?);
        out.write(ffi::json_string(&env)?);
        Ok(())
    })
}
