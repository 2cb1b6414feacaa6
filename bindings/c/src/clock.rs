//! `ab_manual_clock`: a clock that moves only when told to (contract section 1), shareable
//! between breakers.

use std::sync::Arc;

use agentbreaker_core::ManualClock;

use crate::ffi::{self, Handle, Out, boundary};
use crate::status::ab_status;

/// A manual clock: time in milliseconds that moves only with `ab_manual_clock_set` /
/// `ab_manual_clock_advance`. Pass it to any number of constructors; each breaker keeps its own
/// reference, so the clock may be freed before or after them. Safe to use from several threads.
/// Constructors given NULL instead use the system clock (monotonic, Unix-epoch milliseconds).
#[derive(Debug)]
pub struct ab_manual_clock {
    pub(crate) core: Arc<ManualClock>,
}

impl Handle for ab_manual_clock {
    const NAME: &'static str = "clock";
    type Core = Arc<ManualClock>;
    fn wrap(core: Self::Core) -> Self {
        ab_manual_clock { core }
    }
}

/// Creates a manual clock reading `start_ms`; writes it to `*out_clock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_manual_clock_new(
    start_ms: u64,
    out_clock: *mut *mut ab_manual_clock,
) -> ab_status {
    // SAFETY: NULL or writable (this function's contract).
    boundary(|| unsafe {
        Out::new(out_clock, "out_clock")?.wrap(ManualClock::shared(start_ms));
        Ok(())
    })
}

/// Releases a clock (breakers built on it keep working). NULL is a no-op; freeing twice is
/// undefined behaviour.
///
/// # Safety
/// `clock` is NULL or a clock not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_manual_clock_free(clock: *mut ab_manual_clock) {
    // SAFETY: NULL or an unfreed handle (this function's contract).
    unsafe { ffi::free_handle(clock) }
}

/// Sets the time to `ms`. Setting it backwards is allowed: breakers treat it as no time passing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_manual_clock_set(clock: *const ab_manual_clock, ms: u64) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(clock, |clock| clock.core.set(ms)) }
}

/// Moves the time forward by `ms` (saturating).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_manual_clock_advance(
    clock: *const ab_manual_clock,
    ms: u64,
) -> ab_status {
    // SAFETY: NULL or a live handle (this function's contract).
    unsafe { ffi::with_handle(clock, |clock| clock.core.advance(ms)) }
}

/// Writes the current time (ms) to `*out_ms`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_manual_clock_now(
    clock: *const ab_manual_clock,
    out_ms: *mut u64,
) -> ab_status {
    // SAFETY: NULL or valid pointers (this function's contract).
    unsafe { ffi::write_out(clock, out_ms, "out_ms", |clock| Ok(clock.core.now())) }
}
