//! `ab_manual_clock`: a clock that moves only when told to (SPEC 1), shareable between breakers.

use std::sync::Arc;

use agentbreaker_core::{ManualClock, SharedClock};

use crate::ffi::{self, Out, boundary};
use crate::status::ab_status;

/// A manual clock (SPEC 1): time in milliseconds that moves only with `ab_manual_clock_set` /
/// `ab_manual_clock_advance`. Pass it to any number of constructors; each breaker keeps its own
/// reference, so the clock may be freed before or after them. Safe to use from several threads.
/// Constructors given NULL instead use the system clock (monotonic, Unix-epoch milliseconds).
#[derive(Debug)]
pub struct ab_manual_clock {
    clock: Arc<ManualClock>,
}

impl ab_manual_clock {
    /// The clock as breakers hold it (another reference to the same clock).
    pub(crate) fn shared(&self) -> SharedClock {
        Arc::clone(&self.clock) as SharedClock
    }
}

/// Creates a manual clock reading `start_ms`; writes it to `*out_clock`.
///
/// # Safety
///
/// `out_clock` is NULL or valid for writing a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_manual_clock_new(
    start_ms: u64,
    out_clock: *mut *mut ab_manual_clock,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or writable (this function's contract).
        let out = unsafe { Out::new(out_clock, "out_clock") }?;
        out.write(ffi::into_handle(ab_manual_clock {
            clock: ManualClock::shared(start_ms),
        }));
        Ok(())
    })
}

/// Releases a clock (breakers built on it keep working). NULL is a no-op; freeing twice is
/// undefined behaviour.
///
/// # Safety
///
/// `clock` is NULL or a clock from `ab_manual_clock_new` that has not been freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_manual_clock_free(clock: *mut ab_manual_clock) {
    // SAFETY: NULL or an unfreed handle (this function's contract).
    unsafe { ffi::free_handle(clock) }
}

/// Sets the time to `ms`. Setting it backwards is allowed: breakers treat it as no time passing.
///
/// # Safety
///
/// `clock` is NULL or a live clock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_manual_clock_set(clock: *const ab_manual_clock, ms: u64) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(clock, "clock", |clock| clock.clock.set(ms)) }
}

/// Moves the time forward by `ms` (saturating).
///
/// # Safety
///
/// `clock` is NULL or a live clock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_manual_clock_advance(
    clock: *const ab_manual_clock,
    ms: u64,
) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(clock, "clock", |clock| clock.clock.advance(ms)) }
}

/// Writes the current time (ms) to `*out_ms`.
///
/// # Safety
///
/// `clock` is NULL or a live clock; `out_ms` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_manual_clock_now(
    clock: *const ab_manual_clock,
    out_ms: *mut u64,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or live/writable pointers (this function's contract).
        let (clock, out) = unsafe { (ffi::handle(clock, "clock")?, Out::new(out_ms, "out_ms")?) };
        out.write(clock.clock.now());
        Ok(())
    })
}
