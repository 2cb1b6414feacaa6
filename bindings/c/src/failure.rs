//! `ab_failure_breaker`: consecutive failures with cooldown (contract section 2).

use std::ffi::CStr;

use agentbreaker_core::{CallError, FailureBreaker};

use crate::prelude::*;

/// A FailureBreaker: consecutive failures open the circuit; after a cooldown a probe decides
/// whether it closes again. Safe to share between threads. Create with `ab_failure_breaker_new`,
/// release with `ab_failure_breaker_free`.
#[derive(Debug)]
pub struct ab_failure_breaker(Source<FailureBreaker>);

listener::handle!(ab_failure_breaker(FailureBreaker), "breaker");

/// The operation of a guarded call (`ab_failure_breaker_call`): returns NULL when it succeeded,
/// or a NUL-terminated error text when it failed. The text must stay valid until
/// `ab_failure_breaker_call` returns (a string literal, or memory `user_data` owns); text that is
/// not UTF-8 is recorded with U+FFFD replacements. It must not unwind (C++ exceptions, longjmp).
pub type ab_guarded_fn = Option<unsafe extern "C" fn(user_data: *mut c_void) -> *const c_char>;

/// Creates a FailureBreaker from a JSON config with camelCase keys
/// (`{"failureThreshold": 5, "cooldownMs": 30000, ...}`; NULL or `"{}"` = the defaults)
/// reading time from `clock` (NULL = the system clock). With `statePath` the state file is loaded
/// now (a corrupt file is `AB_ERR_INVALID_SNAPSHOT`). With `"store": "redis://..."` and `"key"`
/// (and `"storeTimeoutMs"`, `"storeFailure"`) the state lives in Redis, one circuit for every
/// breaker on the key (docs/distributed.md); construction then waits at most `storeTimeoutMs`
/// for it (`AB_ERR_IO` when the server refuses the credentials or the key holds another type).
///
/// Errors: `AB_ERR_INVALID_CONFIG` (not JSON, unknown key, wrong type, out of range),
/// `AB_ERR_INVALID_SNAPSHOT`, `AB_ERR_IO`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_new(
    config_json: *const c_char,
    clock: *const ab_manual_clock,
    out_breaker: *mut *mut ab_failure_breaker,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::construct(config_json, clock, out_breaker, "out_breaker") }
}

/// Releases a FailureBreaker. NULL is a no-op; freeing twice is undefined behaviour.
///
/// # Safety
/// `breaker` is NULL or a breaker not yet freed that no other thread is using.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_free(breaker: *mut ab_failure_breaker) {
    // SAFETY: NULL or an unfreed handle (this function's contract).
    unsafe { ffi::free_handle(breaker) }
}

/// Records a success: the failure count goes to 0; in HALF_OPEN the circuit closes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_record_success(
    breaker: *const ab_failure_breaker,
) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(breaker, |b| b.core.record_success()) }
}

/// Records a failure with its error text (UTF-8; compared by `errorMatch` for the identical-error
/// rule). May open the circuit and emit `warning` / `stateChange` events.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_record_failure(
    breaker: *const ab_failure_breaker,
    error: *const c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::text_in(breaker, error, "error", |b, e| b.core.record_failure(e)) }
}

/// Asks whether an operation may run: writes `{"allowed": bool, "message": string|null}` to
/// `*out_json`. In OPEN after the cooldown this call moves to HALF_OPEN and is the probe.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_should_allow_operation(
    breaker: *const ab_failure_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, out_json, |b| b.core.should_allow_operation()) }
}

/// The first half of a guarded call, for callers that run the operation themselves: `AB_OK` when
/// the operation may run (then record its outcome with `ab_failure_breaker_record_success` /
/// `_record_failure`; an outcome never recorded is a lost probe, whose permit comes back after
/// `probeTimeoutMs`), `AB_ERR_CIRCUIT_OPEN` with the refusal message in `ab_last_error_message()`
/// when it may not.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_try_acquire(
    breaker: *const ab_failure_breaker,
) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(breaker, |b| b.core.try_acquire()) }
}

/// A guarded call: asks the breaker; when refused returns `AB_ERR_CIRCUIT_OPEN` (message in
/// `ab_last_error_message()`) without calling `operation`. Otherwise calls
/// `operation(user_data)`, records a success (it returned NULL) or a failure with the text it
/// returned, returns `AB_OK` and writes whether the operation succeeded to `*out_ok`.
///
/// # Safety
/// Pointer arguments as the conventions say; `operation` is NULL or a function as
/// `ab_guarded_fn` describes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_call(
    breaker: *const ab_failure_breaker,
    operation: ab_guarded_fn,
    user_data: *mut c_void,
    out_ok: *mut bool,
) -> ab_status {
    // SAFETY: NULL or valid pointers, `operation` and the text it returns as `ab_guarded_fn` says
    // (this function's contract).
    unsafe {
        ffi::write_out(breaker, out_ok, "out_ok", |b| {
            let operation = operation.ok_or(ffi::Failure::Null("operation"))?;
            let result = b.core.call(|| match operation(user_data) {
                error if error.is_null() => Ok(()),
                error => Err(CStr::from_ptr(error).to_string_lossy().into_owned()),
            });
            match result {
                Err(CallError::Rejected(refusal)) => Err(refusal.into()),
                result => Ok(result.is_ok()),
            }
        })
    }
}

/// Writes the current state to `*out_state` (the OPEN→HALF_OPEN move is lazy: OPEN until
/// `ab_failure_breaker_should_allow_operation` is asked after the cooldown).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_state(
    breaker: *const ab_failure_breaker,
    out_state: *mut ab_state,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::write_out(breaker, out_state, "out_state", |b| Ok(b.core.state())) }
}

/// Writes the status as JSON to `*out_json`: `{"state", "consecutiveFailures", "threshold",
/// "failureHistory": [{"atMs", "error", "state"}], "openedAt", "cooldownMs",
/// "cooldownRemainingMs", "trips"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_get_status(
    breaker: *const ab_failure_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, out_json, |b| b.core.status()) }
}

/// Writes the lifetime metrics as JSON to `*out_json`: `{"totalFailures", "totalSuccesses",
/// "trips", "recoveries", "reopenings", "recoveryRate", "mtbfMs"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_metrics(
    breaker: *const ab_failure_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, out_json, |b| b.core.metrics()) }
}

/// Writes where the state lives as JSON to `*out_json`: with a `store` in the config,
/// `{"url", "key", "mode", "outages", "lastError"}` (`mode` is `"shared"`, `"local"` or
/// `"refusing"`; the URL without its password); `null` without a store.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_store_status(
    breaker: *const ab_failure_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, out_json, |b| b.core.store_status()) }
}

/// Back to CLOSED with zeroed counters, history and backoff; metrics keep counting.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_reset(breaker: *const ab_failure_breaker) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(breaker, |b| b.core.reset()) }
}

/// Writes the snapshot as JSON to `*out_json`: `{"version": 1, "kind": "failure", "state",
/// "consecutiveFailures", "openedAt", "backoffLevel", "trips", "failureHistory"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_snapshot(
    breaker: *const ab_failure_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, out_json, |b| b.core.snapshot()) }
}

/// Restores a snapshot given as JSON (OPEN stays OPEN with its `openedAt`; HALF_OPEN comes back
/// CLOSED). `AB_ERR_INVALID_SNAPSHOT` (not JSON, malformed, other kind or version) changes
/// nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_restore(
    breaker: *const ab_failure_breaker,
    snapshot_json: *const c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::restore(breaker, snapshot_json, |b, s| b.core.restore_json(s)) }
}

/// Writes the snapshot to the file `path` (UTF-8) atomically (temporary file, fsync, rename).
/// `AB_ERR_IO` when it cannot (a missing directory is never created).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_save(
    breaker: *const ab_failure_breaker,
    path: *const c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::text_in(breaker, path, "path", |b, path| b.core.save(path)) }
}

/// Restores from the file `path` (UTF-8). Writes false to `*out_loaded` (and changes nothing) when
/// the file does not exist; `AB_ERR_INVALID_SNAPSHOT` for a corrupt file, `AB_ERR_IO` when it
/// cannot be read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_load(
    breaker: *const ab_failure_breaker,
    path: *const c_char,
    out_loaded: *mut bool,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    boundary(|| unsafe {
        let (b, path) = (ffi::handle(breaker)?, ffi::text(path, "path")?);
        let out = Out::new(out_loaded, "out_loaded")?;
        out.write(b.core.load(path)?);
        Ok(())
    })
}

/// Adds a listener for `stateChange` and `warning` events; writes its id (>= 1) to `*out_id`.
///
/// # Safety
/// Pointer arguments as the conventions say; `listener` is NULL or a function as
/// `ab_listener_fn` describes, which may be called with `user_data` until it is removed or the
/// handle is freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_add_listener(
    breaker: *const ab_failure_breaker,
    listener: ab_listener_fn,
    user_data: *mut c_void,
    out_id: *mut u64,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::add(breaker, listener, user_data, out_id) }
}

/// Removes the listener `id`; writes whether there was one to `*out_removed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_remove_listener(
    breaker: *const ab_failure_breaker,
    id: u64,
    out_removed: *mut bool,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::remove(breaker, id, out_removed) }
}
