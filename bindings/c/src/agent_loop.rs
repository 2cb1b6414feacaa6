//! `ab_loop`: the loop coordinator (contract section 5).

use agentbreaker_core::{Loop, Observation};

use crate::prelude::*;

/// A Loop: analyzes each response, applies an exit strategy, watches for stagnation and budget
/// halts, and says continue or exit. Safe to share between threads. Create with `ab_loop_new`,
/// release with `ab_loop_free`.
#[derive(Debug)]
pub struct ab_loop(Source<Loop>);

listener::handle!(ab_loop(Loop), "agent_loop");

/// Creates a Loop from a JSON config (`{"maxIterations": 50, "strategy": {"type": "auto"},
/// "stagnation": {...}, "budget": {...}}`; NULL = defaults, no budget) reading time from `clock`
/// (NULL = the system clock). `AB_ERR_INVALID_CONFIG` for a bad config.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_loop_new(
    config_json: *const c_char,
    clock: *const ab_manual_clock,
    out_loop: *mut *mut ab_loop,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::construct(config_json, clock, out_loop, "out_loop") }
}

/// Releases a Loop. NULL is a no-op; freeing twice is undefined behaviour.
///
/// # Safety
/// `agent_loop` is NULL or a loop not yet freed that no other thread is using.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_loop_free(agent_loop: *mut ab_loop) {
    // SAFETY: NULL or an unfreed handle (this function's contract).
    unsafe { ffi::free_handle(agent_loop) }
}

/// Observes one iteration given as JSON: `{"output": "...", "filesChanged"?: 0, "testsPassing"?: 0,
/// "error"?: "...", "events"?: [budget events]}`. Writes the decision to `*out_json`:
/// `{"action": "continue"|"exit", "reason", "outcome": "success"|"failure"|null, "iteration",
/// "analysis", "breaker", "halt"}`. Wrong types are `AB_ERR_INVALID_ARGUMENT`, a malformed event
/// `AB_ERR_INVALID_EVENT` (nothing is recorded); observing after an exit is
/// `AB_ERR_INVALID_ARGUMENT` until `ab_loop_reset`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_loop_observe(
    agent_loop: *const ab_loop,
    observation_json: *const c_char,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    boundary(|| unsafe {
        let l = ffi::handle(agent_loop)?;
        let observation = ffi::json(observation_json, "observation_json", ArgKind::Argument)?;
        let out = Out::new(out_json, "out_json")?;
        let decision = l.core.observe(&Observation::from_json(&observation)?)?;
        out.write(ffi::json_string(&decision)?);
        Ok(())
    })
}

/// Writes where the loop stands as JSON to `*out_json`: `{"iteration", "exited", "reason",
/// "outcome", "breaker" (the stagnation breaker's status), "budget" (the budget breaker's
/// snapshot or null)}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_loop_get_status(
    agent_loop: *const ab_loop,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(agent_loop, out_json, |l| l.core.status()) }
}

/// Starts over: iteration 0, the strategy and both breakers reset.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_loop_reset(agent_loop: *const ab_loop) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(agent_loop, |l| l.core.reset()) }
}

/// Adds a listener for every component's events (the stagnation breaker's `stateChange`, the fix
/// plan's `warning`, the budget breaker's `halt`); writes its id (>= 1) to `*out_id`.
///
/// # Safety
/// As for `ab_failure_breaker_add_listener`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_loop_add_listener(
    agent_loop: *const ab_loop,
    listener: ab_listener_fn,
    user_data: *mut c_void,
    out_id: *mut u64,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::add(agent_loop, listener, user_data, out_id) }
}

/// Removes the listener `id`; writes whether there was one to `*out_removed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_loop_remove_listener(
    agent_loop: *const ab_loop,
    id: u64,
    out_removed: *mut bool,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::remove(agent_loop, id, out_removed) }
}
