//! `ab_stagnation_breaker`: no progress, repeated errors, declining output (contract section 3).

use agentbreaker_core::{AgentStep, IterationMetrics, StagnationBreaker};

use crate::prelude::*;

/// A StagnationBreaker: watches a loop's iterations for no progress, the same error repeated and
/// declining output, and (when configured) an agent's steps for repeated actions, cycles and fail
/// streaks. Safe to share between threads. Create with `ab_stagnation_breaker_new`, release with
/// `ab_stagnation_breaker_free`.
#[derive(Debug)]
pub struct ab_stagnation_breaker(Source<StagnationBreaker>);

listener::handle!(ab_stagnation_breaker(StagnationBreaker), "breaker");

/// Creates a StagnationBreaker from a JSON config (`{"noProgressThreshold": 3,
/// "sameErrorThreshold": 5, "outputDeclineThreshold": 70, "errorMatch": "normalized"}`; NULL =
/// defaults) reading time from `clock` (NULL = the system clock). `AB_ERR_INVALID_CONFIG` for a
/// bad config.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_new(
    config_json: *const c_char,
    clock: *const ab_manual_clock,
    out_breaker: *mut *mut ab_stagnation_breaker,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::construct(config_json, clock, out_breaker, "out_breaker") }
}

/// Releases a StagnationBreaker. NULL is a no-op; freeing twice is undefined behaviour.
///
/// # Safety
/// `breaker` is NULL or a breaker not yet freed that no other thread is using.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_free(breaker: *mut ab_stagnation_breaker) {
    // SAFETY: NULL or an unfreed handle (this function's contract).
    unsafe { ffi::free_handle(breaker) }
}

/// Records one iteration given as JSON: `{"filesChanged": 2, "testsPassing": 10,
/// "outputLength": 900}` (missing keys are 0). Anything but whole numbers >= 0, or another key,
/// is `AB_ERR_INVALID_ARGUMENT` and records nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_record_progress(
    breaker: *const ab_stagnation_breaker,
    metrics_json: *const c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    boundary(|| unsafe {
        let b = ffi::handle(breaker)?;
        let m = ffi::json(metrics_json, "metrics_json", ArgKind::Argument)?;
        b.core.record_progress(IterationMetrics::from_json(&m)?);
        Ok(())
    })
}

/// Records an error (UTF-8 text). A `transient` error (rate limit, 5xx, timeout) never counts.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_record_error(
    breaker: *const ab_stagnation_breaker,
    error: *const c_char,
    transient: bool,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe {
        ffi::text_in(breaker, error, "error", |b, e| {
            b.core.record_error(e, transient)
        })
    }
}

/// Records one agent step given as JSON for the step detectors (`repeatThreshold`,
/// `cycleRepeats`, `failStreakThreshold`, `failWindow`; all off unless configured):
/// `{"action": "bash: pytest -q", "result"?: "3 failed", "failed"?: true}`. Wrong types or another
/// key are `AB_ERR_INVALID_ARGUMENT` and record nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_record_step(
    breaker: *const ab_stagnation_breaker,
    step_json: *const c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    boundary(|| unsafe {
        let b = ffi::handle(breaker)?;
        let step = ffi::json(step_json, "step_json", ArgKind::Argument)?;
        b.core.record_step(&AgentStep::from_json(&step)?);
        Ok(())
    })
}

/// Writes `{"allowContinue": bool, "state", "reason": string|null}` to `*out_json`;
/// `allowContinue` is false only in OPEN.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_check(
    breaker: *const ab_stagnation_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, out_json, |b| b.core.check()) }
}

/// Writes the current state to `*out_state`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_state(
    breaker: *const ab_stagnation_breaker,
    out_state: *mut ab_state,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::write_out(breaker, out_state, "out_state", |b| Ok(b.core.state())) }
}

/// Writes the status as JSON to `*out_json`: `{"state", "consecutiveNoProgress", "errorCounts",
/// "outputTrend", "lastProgress"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_get_status(
    breaker: *const ab_stagnation_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, out_json, |b| b.core.status()) }
}

/// Back to CLOSED with every counter cleared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_reset(
    breaker: *const ab_stagnation_breaker,
) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(breaker, |b| b.core.reset()) }
}

/// Writes the snapshot as JSON to `*out_json` (`{"version": 1, "kind": "stagnation", ...}`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_snapshot(
    breaker: *const ab_stagnation_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, out_json, |b| b.core.snapshot()) }
}

/// Restores a snapshot given as JSON (OPEN stays OPEN; HALF_OPEN comes back CLOSED).
/// `AB_ERR_INVALID_SNAPSHOT` changes nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_restore(
    breaker: *const ab_stagnation_breaker,
    snapshot_json: *const c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::restore(breaker, snapshot_json, |b, s| b.core.restore_json(s)) }
}

/// Adds a listener for `stateChange` events; writes its id (>= 1) to `*out_id`.
///
/// # Safety
/// As for `ab_failure_breaker_add_listener`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_add_listener(
    breaker: *const ab_stagnation_breaker,
    listener: ab_listener_fn,
    user_data: *mut c_void,
    out_id: *mut u64,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::add(breaker, listener, user_data, out_id) }
}

/// Removes the listener `id`; writes whether there was one to `*out_removed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_stagnation_breaker_remove_listener(
    breaker: *const ab_stagnation_breaker,
    id: u64,
    out_removed: *mut bool,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::remove(breaker, id, out_removed) }
}
