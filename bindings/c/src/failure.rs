//! `ab_failure_breaker`: consecutive failures with cooldown (SPEC 2, seed 004).

use std::ffi::{CStr, c_char, c_void};

use agentbreaker_core::interop::ArgKind;
use agentbreaker_core::{CallError, FailureBreaker, FailureConfig};

use crate::ffi::{self, Out, boundary};
use crate::listener::{self, ListenerTable, ab_listener_fn};
use crate::status::{ab_state, ab_status};

/// A FailureBreaker (SPEC 2): consecutive failures open the circuit; after a cooldown a probe
/// decides whether it closes again. Safe to share between threads. Create with
/// `ab_failure_breaker_new`, release with `ab_failure_breaker_free`.
#[derive(Debug)]
pub struct ab_failure_breaker {
    breaker: FailureBreaker,
    listeners: ListenerTable,
}

listener::source!(ab_failure_breaker, breaker);

/// The operation of a guarded call (`ab_failure_breaker_call`): returns NULL when it succeeded,
/// or a NUL-terminated error text when it failed. The text must stay valid until
/// `ab_failure_breaker_call` returns (a string literal, or memory `user_data` owns); text that is
/// not UTF-8 is recorded with U+FFFD replacements. It must not unwind (C++ exceptions, longjmp).
pub type ab_guarded_fn = Option<unsafe extern "C" fn(user_data: *mut c_void) -> *const c_char>;

/// Creates a FailureBreaker from a JSON config with the SPEC's camelCase keys
/// (`{"failureThreshold": 5, "cooldownMs": 30000, ...}`; NULL or `"{}"` = the seed's defaults)
/// reading time from `clock` (NULL = the system clock). With `statePath` the state file is loaded
/// now (a corrupt file is `AB_ERR_INVALID_SNAPSHOT`). With `"store": "redis://..."` and `"key"`
/// (and `"storeTimeoutMs"`, `"storeFailure"`) the state lives in Redis, one circuit for every
/// breaker on the key (docs/distributed.md); construction then waits at most `storeTimeoutMs`
/// for it (`AB_ERR_IO` when the server refuses the credentials or the key holds another type).
///
/// Errors: `AB_ERR_INVALID_CONFIG` (not JSON, unknown key, wrong type, out of range),
/// `AB_ERR_INVALID_SNAPSHOT`, `AB_ERR_IO`.
///
/// # Safety
///
/// `config_json` is NULL or a NUL-terminated string; `clock` is NULL or a live clock;
/// `out_breaker` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_new(
    config_json: *const c_char,
    clock: *const crate::clock::ab_manual_clock,
    out_breaker: *mut *mut ab_failure_breaker,
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
        let breaker = FailureBreaker::with_clock(FailureConfig::from_json(&config)?, clock)?;
        out.write(ffi::into_handle(ab_failure_breaker {
            breaker,
            listeners: ListenerTable::default(),
        }));
        Ok(())
    })
}

/// Releases a FailureBreaker. NULL is a no-op; freeing twice is undefined behaviour.
///
/// # Safety
///
/// `breaker` is NULL or a breaker from `ab_failure_breaker_new` that has not been freed and that
/// no other thread is using.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_free(breaker: *mut ab_failure_breaker) {
    // SAFETY: NULL or an unfreed handle (this function's contract).
    unsafe { ffi::free_handle(breaker) }
}

/// Records a success: the failure count goes to 0; in HALF_OPEN the circuit closes.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_record_success(
    breaker: *const ab_failure_breaker,
) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(breaker, "breaker", |b| b.breaker.record_success()) }
}

/// Records a failure with its error text (UTF-8; compared by `errorMatch` for the identical-error
/// rule). May open the circuit and emit `warning` / `stateChange` events.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `error` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_record_failure(
    breaker: *const ab_failure_breaker,
    error: *const c_char,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (this function's contract).
        let (b, error) = unsafe { (ffi::handle(breaker, "breaker")?, ffi::text(error, "error")?) };
        b.breaker.record_failure(error);
        Ok(())
    })
}

/// Asks whether an operation may run: writes `{"allowed": bool, "message": string|null}` to
/// `*out_json`. In OPEN after the cooldown this call moves to HALF_OPEN and is the probe.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `out_json` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_should_allow_operation(
    breaker: *const ab_failure_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe {
        ffi::json_out(breaker, "breaker", out_json, |b| {
            Ok(b.breaker.should_allow_operation())
        })
    }
}

/// The first half of a guarded call, for callers that run the operation themselves: `AB_OK` when
/// the operation may run (then record its outcome with `ab_failure_breaker_record_success` /
/// `_record_failure`; an outcome never recorded is a lost probe, whose permit comes back after
/// `probeTimeoutMs`), `AB_ERR_CIRCUIT_OPEN` with the refusal message in `ab_last_error_message()`
/// when it may not.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_try_acquire(
    breaker: *const ab_failure_breaker,
) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(breaker, "breaker", |b| b.breaker.try_acquire()) }
}

/// A guarded call (SPEC 2): asks the breaker; when refused returns `AB_ERR_CIRCUIT_OPEN` (message
/// in `ab_last_error_message()`) without calling `operation`. Otherwise calls
/// `operation(user_data)`, records a success (it returned NULL) or a failure with the text it
/// returned, returns `AB_OK` and writes whether the operation succeeded to `*out_ok`.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `operation` is NULL or a function as `ab_guarded_fn`
/// describes; `out_ok` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_call(
    breaker: *const ab_failure_breaker,
    operation: ab_guarded_fn,
    user_data: *mut c_void,
    out_ok: *mut bool,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (this function's contract).
        let (b, out) = unsafe {
            (
                ffi::handle(breaker, "breaker")?,
                Out::new(out_ok, "out_ok")?,
            )
        };
        let operation = operation.ok_or(ffi::Failure::Null("operation"))?;
        let result = b.breaker.call(|| {
            // SAFETY: a non-NULL function pointer the caller passed with this user_data.
            let error = unsafe { operation(user_data) };
            if error.is_null() {
                Ok(())
            } else {
                // SAFETY: the operation returned a NUL-terminated string that stays valid until
                // this function returns (`ab_guarded_fn`'s contract).
                let text = unsafe { CStr::from_ptr(error) };
                Err(text.to_string_lossy().into_owned())
            }
        });
        match result {
            Ok(()) => out.write(true),
            Err(CallError::Failed(_)) => out.write(false),
            Err(CallError::Rejected(refusal)) => return Err(refusal.into()),
        }
        Ok(())
    })
}

/// Writes the current state to `*out_state` (the OPEN→HALF_OPEN move is lazy: OPEN until
/// `ab_failure_breaker_should_allow_operation` is asked after the cooldown).
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `out_state` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_state(
    breaker: *const ab_failure_breaker,
    out_state: *mut ab_state,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (this function's contract).
        let (b, out) = unsafe {
            (
                ffi::handle(breaker, "breaker")?,
                Out::new(out_state, "out_state")?,
            )
        };
        out.write(b.breaker.state().into());
        Ok(())
    })
}

/// Writes the status as JSON to `*out_json`: `{"state", "consecutiveFailures", "threshold",
/// "failureHistory": [{"atMs", "error", "state"}], "openedAt", "cooldownMs",
/// "cooldownRemainingMs", "trips"}`.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `out_json` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_get_status(
    breaker: *const ab_failure_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, "breaker", out_json, |b| Ok(b.breaker.status())) }
}

/// Writes the lifetime metrics as JSON to `*out_json`: `{"totalFailures", "totalSuccesses",
/// "trips", "recoveries", "reopenings", "recoveryRate", "mtbfMs"}`.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `out_json` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_metrics(
    breaker: *const ab_failure_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, "breaker", out_json, |b| Ok(b.breaker.metrics())) }
}

/// Writes where the state lives as JSON to `*out_json`: with a `store` in the config,
/// `{"url", "key", "mode", "outages", "lastError"}` (`mode` is `"shared"`, `"local"` or
/// `"refusing"`; the URL without its password); `null` without a store.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `out_json` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_store_status(
    breaker: *const ab_failure_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe {
        ffi::json_out(breaker, "breaker", out_json, |b| {
            Ok(b.breaker.store_status())
        })
    }
}

/// Back to CLOSED with zeroed counters, history and backoff; metrics keep counting.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_reset(breaker: *const ab_failure_breaker) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(breaker, "breaker", |b| b.breaker.reset()) }
}

/// Writes the snapshot as JSON to `*out_json`: `{"version": 1, "kind": "failure", "state",
/// "consecutiveFailures", "openedAt", "backoffLevel", "trips", "failureHistory"}`.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `out_json` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_snapshot(
    breaker: *const ab_failure_breaker,
    out_json: *mut *mut c_char,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::json_out(breaker, "breaker", out_json, |b| Ok(b.breaker.snapshot())) }
}

/// Restores a snapshot given as JSON (OPEN stays OPEN with its `openedAt`; HALF_OPEN comes back
/// CLOSED). `AB_ERR_INVALID_SNAPSHOT` (not JSON, malformed, other kind or version) changes
/// nothing.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `snapshot_json` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_restore(
    breaker: *const ab_failure_breaker,
    snapshot_json: *const c_char,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (this function's contract).
        let (b, snapshot) = unsafe {
            (
                ffi::handle(breaker, "breaker")?,
                ffi::json(snapshot_json, "snapshot_json", false, ArgKind::Snapshot)?,
            )
        };
        b.breaker.restore_json(&snapshot)?;
        Ok(())
    })
}

/// Writes the snapshot to the file `path` (UTF-8) atomically (temporary file, fsync, rename).
/// `AB_ERR_IO` when it cannot (a missing directory is never created).
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `path` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_save(
    breaker: *const ab_failure_breaker,
    path: *const c_char,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (this function's contract).
        let (b, path) = unsafe { (ffi::handle(breaker, "breaker")?, ffi::text(path, "path")?) };
        b.breaker.save(path)?;
        Ok(())
    })
}

/// Restores from the file `path` (UTF-8). Writes false to `*out_loaded` (and changes nothing) when
/// the file does not exist; `AB_ERR_INVALID_SNAPSHOT` for a corrupt file, `AB_ERR_IO` when it
/// cannot be read.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `path` is NULL or a NUL-terminated string; `out_loaded`
/// is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_load(
    breaker: *const ab_failure_breaker,
    path: *const c_char,
    out_loaded: *mut bool,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (this function's contract).
        let (b, path, out) = unsafe {
            (
                ffi::handle(breaker, "breaker")?,
                ffi::text(path, "path")?,
                Out::new(out_loaded, "out_loaded")?,
            )
        };
        out.write(b.breaker.load(path)?);
        Ok(())
    })
}

/// Adds a listener for `stateChange` and `warning` events; writes its id (>= 1) to `*out_id`.
///
/// # Safety
///
/// `breaker` is NULL or a live breaker; `listener` is NULL or a function as `ab_listener_fn`
/// describes, which may be called with `user_data` until it is removed or the breaker is freed;
/// `out_id` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_failure_breaker_add_listener(
    breaker: *const ab_failure_breaker,
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
pub unsafe extern "C" fn ab_failure_breaker_remove_listener(
    breaker: *const ab_failure_breaker,
    id: u64,
    out_removed: *mut bool,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { listener::remove(breaker, "breaker", id, out_removed) }
}
