//! Time sources. All times are integer milliseconds.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A source of the current time in milliseconds. Breakers read it; they never sleep.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time in milliseconds.
    fn now_ms(&self) -> u64;
}

/// A shared clock handle, as breakers hold it.
pub type SharedClock = Arc<dyn Clock>;

/// The default clock: monotonic within the process, expressed as Unix-epoch milliseconds.
///
/// The wall time is read once per process (the first time any `SystemClock` is read) and the
/// monotonic time elapsed since then is added to it, so cooldowns are immune to wall-clock jumps
/// while persisted timestamps stay meaningful across restarts.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

struct Anchor {
    epoch_ms: u64,
    start: Instant,
}

fn anchor() -> &'static Anchor {
    static ANCHOR: OnceLock<Anchor> = OnceLock::new();
    ANCHOR.get_or_init(|| Anchor {
        epoch_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0),
        start: Instant::now(),
    })
}

impl SystemClock {
    /// A new handle to the process clock.
    pub fn new() -> Self {
        SystemClock
    }

    /// The process clock as a [`SharedClock`].
    pub fn shared() -> SharedClock {
        Arc::new(SystemClock)
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        let a = anchor();
        let elapsed = u64::try_from(a.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        a.epoch_ms.saturating_add(elapsed)
    }
}

/// A clock that only moves when told to, for deterministic tests of breakers and of loops built on
/// them. Share it between breakers with `Arc`.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// A clock reading `start_ms`.
    pub fn new(start_ms: u64) -> Self {
        ManualClock {
            now: AtomicU64::new(start_ms),
        }
    }

    /// A new clock reading `start_ms`, already in an `Arc`.
    pub fn shared(start_ms: u64) -> Arc<ManualClock> {
        Arc::new(ManualClock::new(start_ms))
    }

    /// Sets the time. Setting it backwards is allowed: breakers treat it as no time passing.
    pub fn set(&self, ms: u64) {
        self.now.store(ms, Ordering::SeqCst);
    }

    /// Moves the time forward by `ms` (saturating).
    pub fn advance(&self, ms: u64) {
        let mut current = self.now.load(Ordering::SeqCst);
        loop {
            let next = current.saturating_add(ms);
            match self
                .now
                .compare_exchange(current, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return,
                Err(seen) => current = seen,
            }
        }
    }

    /// The current time.
    pub fn now(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now()
    }
}

/// Milliseconds from `earlier` to `later`, 0 when the clock went backwards.
pub(crate) fn elapsed(earlier: u64, later: u64) -> u64 {
    later.saturating_sub(earlier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(5);
        assert_eq!(c.now_ms(), 5);
        c.advance(10);
        assert_eq!(c.now(), 15);
        c.set(3);
        assert_eq!(c.now(), 3);
        c.set(u64::MAX);
        c.advance(1);
        assert_eq!(c.now(), u64::MAX);
    }

    #[test]
    fn system_clock_is_epoch_anchored_and_monotonic() {
        let c = SystemClock::new();
        let a = c.now_ms();
        let b = c.now_ms();
        assert!(b >= a);
        // Later than 2020-01-01 in epoch ms.
        assert!(a > 1_577_836_800_000);
    }

    #[test]
    fn elapsed_saturates() {
        assert_eq!(elapsed(10, 5), 0);
        assert_eq!(elapsed(5, 10), 5);
    }
}
