//! The response analyzer and `ab_exit_strategy` (contract section 5).

use agentbreaker_core::{ExitStrategy, analyze};
use serde_json::json;

use crate::prelude::*;

/// Analyzes an agent's response text (UTF-8) and writes the analysis as JSON to `*out_json`:
/// `{"completionSignal": {"detected", "confidence", "phrases"}, "confidence", "exitSignal",
/// "testsPassing", "testsFailing"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_analyze(text: *const c_char, out_json: *mut *mut c_char) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    boundary(|| unsafe {
        let (text, out) = (ffi::text(text, "text")?, Out::new(out_json, "out_json")?);
        out.write(ffi::json_string(&analyze(text))?);
        Ok(())
    })
}

/// An exit strategy: `auto`, `done_signals`, `fix_plan`, `circuit_breaker` or `composite`.
/// Stateful; safe to share between threads. Create with `ab_exit_strategy_new`,
/// `ab_exit_strategy_new_fix_plan` or `ab_exit_strategy_new_fix_plan_markdown`; release with
/// `ab_exit_strategy_free`.
#[derive(Debug)]
pub struct ab_exit_strategy(Source<ExitStrategy>);

listener::handle!(ab_exit_strategy(ExitStrategy), "strategy");

/// Creates a strategy from a JSON strategy config: `{"type": "auto", "threshold": 70}`,
/// `{"type": "done_signals", "threshold": 40, "window": 5}`, `{"type": "fix_plan", "steps": [...]}`
/// or `{"type": "fix_plan", "markdown": "- [ ] ..."}`, `{"type": "circuit_breaker"}`,
/// `{"type": "composite", "mode": "any"|"all", "members": [...]}`; NULL = `auto`. `clock` (NULL =
/// the system clock) only stamps events. `AB_ERR_INVALID_CONFIG` for a bad config.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_exit_strategy_new(
    config_json: *const c_char,
    clock: *const ab_manual_clock,
    out_strategy: *mut *mut ab_exit_strategy,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::construct(config_json, clock, out_strategy, "out_strategy") }
}

/// Creates a `fix_plan` strategy from a fix-plan config without `type`: `{"steps":
/// [{"description", "completed"?, "attempts"?, "maxAttempts"?}], "maxAttempts"?}` or
/// `{"markdown": "- [ ] ...", "maxAttempts"?}`. NULL is `AB_ERR_INVALID_CONFIG` (a plan needs
/// steps).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_exit_strategy_new_fix_plan(
    config_json: *const c_char,
    clock: *const ab_manual_clock,
    out_strategy: *mut *mut ab_exit_strategy,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe {
        let fix_plan = interop::fix_plan;
        ffi::construct_with(config_json, clock, out_strategy, "out_strategy", fix_plan)
    }
}

/// Creates a `fix_plan` strategy from a markdown checklist (`- [ ] step`, `- [x] done step`;
/// other lines are ignored), each step with the default 3 attempts. The same as
/// `ab_exit_strategy_new_fix_plan` with `{"markdown": markdown}`, without escaping the text into
/// JSON.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_exit_strategy_new_fix_plan_markdown(
    markdown: *const c_char,
    clock: *const ab_manual_clock,
    out_strategy: *mut *mut ab_exit_strategy,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    boundary(|| unsafe {
        let (markdown, clock) = (ffi::text(markdown, "markdown")?, ffi::clock_arg(clock));
        let out = Out::new(out_strategy, "out_strategy")?;
        out.wrap(interop::fix_plan(&json!({ "markdown": markdown }), clock)?);
        Ok(())
    })
}

/// Releases a strategy. NULL is a no-op; freeing twice is undefined behaviour.
///
/// # Safety
/// `strategy` is NULL or a strategy not yet freed that no other thread is using.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_exit_strategy_free(strategy: *mut ab_exit_strategy) {
    // SAFETY: NULL or an unfreed handle (this function's contract).
    unsafe { ffi::free_handle(strategy) }
}

/// Sees one iteration: analyzes `response_text` (UTF-8, as `ab_analyze` does) and hands the
/// analysis and `circuit_state` (`"CLOSED"`, `"HALF_OPEN"` or `"OPEN"`; NULL = `"CLOSED"`) to the
/// strategy. Writes `{"exit": bool, "reason": string|null}` to `*out_json`. Another circuit state
/// is `AB_ERR_INVALID_ARGUMENT` and changes nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_exit_strategy_should_exit(
    strategy: *const ab_exit_strategy,
    response_text: *const c_char,
    circuit_state: *const c_char,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    boundary(|| unsafe {
        let s = ffi::handle(strategy)?;
        let text = ffi::text(response_text, "response_text")?;
        let state = ffi::optional_text(circuit_state, "circuit_state")?;
        let out = Out::new(out_json, "out_json")?;
        let decision = s.core.should_exit(&analyze(text), interop::state(state)?);
        out.write(ffi::json_string(&decision)?);
        Ok(())
    })
}

/// Writes a fix plan's progress as JSON to `*out_json`: `{"steps": [{"description", "completed",
/// "skipped", "attempts", "maxAttempts"}], "currentStep": index|null}`, or NULL for a strategy
/// without a fix plan.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_exit_strategy_plan_status(
    strategy: *const ab_exit_strategy,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe {
        ffi::write_out(strategy, out_json, "out_json", |s| {
            ffi::optional_json_string(s.core.plan_status().as_ref())
        })
    }
}

/// Forgets everything seen: back to the configured state.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_exit_strategy_reset(strategy: *const ab_exit_strategy) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(strategy, |s| s.core.reset()) }
}

/// Adds a listener for `warning` events (a fix plan skipping a step); writes its id (>= 1) to
/// `*out_id`.
///
/// # Safety
/// As for `ab_failure_breaker_add_listener`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_exit_strategy_add_listener(
    strategy: *const ab_exit_strategy,
    listener: ab_listener_fn,
    user_data: *mut c_void,
    out_id: *mut u64,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::add(strategy, listener, user_data, out_id) }
}

/// Removes the listener `id`; writes whether there was one to `*out_removed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_exit_strategy_remove_listener(
    strategy: *const ab_exit_strategy,
    id: u64,
    out_removed: *mut bool,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::remove(strategy, id, out_removed) }
}
