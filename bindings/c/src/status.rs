//! Status codes, states, the last-error message, strings and the library version.

use std::ffi::{CStr, c_char};

use agentbreaker_core::{Error, State};

use crate::ffi;

/// The result of every fallible function.
///
/// `AB_OK` is 0. The error values are the core's stable error numbers (they never change; retired
/// values are never reused). `AB_ERR_NULL_ARG` is the C API's own: a required pointer was NULL.
/// `ab_last_error_message()` describes the failure; `ab_status_code()` gives the stable code
/// string (`"INVALID_CONFIG"`, ...).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ab_status {
    /// Success; out-parameters have been written.
    AB_OK = 0,
    /// `INVALID_CONFIG`: a config is not valid JSON, has an unknown key, a wrong type or a value
    /// out of range.
    AB_ERR_INVALID_CONFIG = 1,
    /// `INVALID_ARGUMENT`: an argument has the wrong type or value (including a string that is not
    /// UTF-8), or the operation is not allowed now.
    AB_ERR_INVALID_ARGUMENT = 2,
    /// `INVALID_EVENT`: a BudgetBreaker event is malformed.
    AB_ERR_INVALID_EVENT = 3,
    /// `INVALID_SNAPSHOT`: a snapshot or a state file is malformed, of another kind or version.
    AB_ERR_INVALID_SNAPSHOT = 4,
    /// `IO`: reading or writing a state file failed.
    AB_ERR_IO = 5,
    /// `INTERNAL`: a bug; a panic was caught at the boundary. The handle stays usable.
    AB_ERR_INTERNAL = 6,
    /// `CIRCUIT_OPEN`: a guarded call was refused; the message is the refusal message.
    AB_ERR_CIRCUIT_OPEN = 7,
    /// `HALTED`: a Monitor halted the task (the core's code for a halt that stops the caller's
    /// code; `ab_monitor_observe` itself returns halts as verdicts, with `AB_OK`).
    AB_ERR_HALTED = 8,
    /// `NULL_ARG`: a required pointer argument was NULL.
    AB_ERR_NULL_ARG = 100,
}

/// Every status with its stable code string (the core's error codes, `OK` and `NULL_ARG`).
const CODES: [(ab_status, &CStr); 10] = [
    (ab_status::AB_OK, c"OK"),
    (ab_status::AB_ERR_INVALID_CONFIG, c"INVALID_CONFIG"),
    (ab_status::AB_ERR_INVALID_ARGUMENT, c"INVALID_ARGUMENT"),
    (ab_status::AB_ERR_INVALID_EVENT, c"INVALID_EVENT"),
    (ab_status::AB_ERR_INVALID_SNAPSHOT, c"INVALID_SNAPSHOT"),
    (ab_status::AB_ERR_IO, c"IO"),
    (ab_status::AB_ERR_INTERNAL, c"INTERNAL"),
    (ab_status::AB_ERR_CIRCUIT_OPEN, c"CIRCUIT_OPEN"),
    (ab_status::AB_ERR_HALTED, c"HALTED"),
    (ab_status::AB_ERR_NULL_ARG, c"NULL_ARG"),
];

/// The entry of `CODES` whose status is `number`.
fn code_of(number: i32) -> Option<&'static (ab_status, &'static CStr)> {
    CODES.iter().find(|(status, _)| *status as i32 == number)
}

impl ab_status {
    /// The status of a core error, by its stable number (`AB_ERR_INTERNAL` for an unknown one).
    pub(crate) fn of(error: &Error) -> ab_status {
        code_of(error.number()).map_or(ab_status::AB_ERR_INTERNAL, |(status, _)| *status)
    }
}

/// A circuit state, for the `_state` functions (JSON results spell it `"CLOSED"`, `"HALF_OPEN"`,
/// `"OPEN"`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ab_state {
    /// Normal operation.
    AB_STATE_CLOSED = 0,
    /// Testing whether to close again (FailureBreaker) or watching one more iteration
    /// (StagnationBreaker).
    AB_STATE_HALF_OPEN = 1,
    /// Refusing operations / the loop must stop.
    AB_STATE_OPEN = 2,
}

impl From<State> for ab_state {
    fn from(state: State) -> Self {
        match state {
            State::Closed => ab_state::AB_STATE_CLOSED,
            State::HalfOpen => ab_state::AB_STATE_HALF_OPEN,
            State::Open => ab_state::AB_STATE_OPEN,
        }
    }
}

/// The stable code string of a status value: `"OK"`, `"INVALID_CONFIG"`, `"INVALID_ARGUMENT"`,
/// `"INVALID_EVENT"`, `"INVALID_SNAPSHOT"`, `"IO"`, `"INTERNAL"`, `"CIRCUIT_OPEN"`, `"HALTED"`,
/// `"NULL_ARG"`,
/// or `"UNKNOWN"` for any other number. The string is static: do not free it.
#[unsafe(no_mangle)]
pub extern "C" fn ab_status_code(status: i32) -> *const c_char {
    let code = code_of(status).map_or(c"UNKNOWN", |(_, code)| code);
    code.as_ptr()
}

/// The message of the last call on this thread that returned a status other than `AB_OK`, as
/// `"CODE: text"` (`"INVALID_CONFIG: FailureBreaker config: unknown field ..."`); `""` when the
/// last status-returning call on this thread succeeded. Never NULL.
///
/// The string belongs to the library: do not free it. It stays valid until the next
/// status-returning `ab_` call on the same thread; copy it to keep it.
#[unsafe(no_mangle)]
pub extern "C" fn ab_last_error_message() -> *const c_char {
    ffi::last_error_message()
}

/// Releases a string this library returned through a `char **` out-parameter (`out_json`,
/// `out_halt_json`, `out_warnings_json`). NULL is a no-op.
///
/// # Safety
///
/// `s` is NULL or a string this library returned that has not been freed yet. Freeing it twice,
/// or freeing a string from elsewhere, is undefined behaviour.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_string_free(s: *mut c_char) {
    // SAFETY: the caller passes NULL or an unfreed string from `CString::into_raw` (this
    // function's contract).
    unsafe { ffi::free_string(s) }
}

/// The library version (`"0.1.0"`). The string is static: do not free it.
#[unsafe(no_mangle)]
pub extern "C" fn ab_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's strings are the core's: each core error gives the status of its number and
    /// its own code string.
    #[test]
    fn every_core_error_has_its_own_status_and_code() {
        use Error::*;
        let kinds = [
            InvalidConfig,
            InvalidArgument,
            InvalidEvent,
            InvalidSnapshot,
        ];
        let kinds = kinds.into_iter().chain([Io, Internal, CircuitOpen, Halted]);
        for error in kinds.map(|kind| kind(String::new())) {
            let (status, code) = code_of(error.number()).expect("a status for every core error");
            let found = (*status as i32, code.to_str());
            assert_eq!(found, (error.number(), Ok(error.code())));
            assert_eq!(ab_status::of(&error), *status);
        }
    }
}
