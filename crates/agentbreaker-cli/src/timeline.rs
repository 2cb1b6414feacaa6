//! Time passing in a recording as it would have passed live: the one-second clock walk that
//! `replay` (and `eval`) run between two events, so that the duration and idle limits trip at the
//! second the live supervisor (`run` ticks the Monitor once a second) would have tripped them.

use agentbreaker::{ManualClock, Monitor, Verdict};

/// Beyond this many one-second ticks in one gap, the clock jumps to the end of the gap (a
/// recording with a day-long pause must not cost 86 400 ticks per pause without need; 100 000
/// ticks is more than a day).
pub const MAX_TICKS_PER_GAP: u64 = 100_000;

/// Moves `clock` forward to `to_ms`, one second at a time, ticking `monitor` after each step, and
/// returns every warning and halt the ticks gave, in order. It stops at the first halt, with the
/// clock at the second that tripped it. A `to_ms` at or before the clock's time changes nothing.
/// After [`MAX_TICKS_PER_GAP`] ticks the clock jumps straight to `to_ms` for one last tick.
pub fn walk(clock: &ManualClock, monitor: &Monitor, to_ms: u64) -> Vec<Verdict> {
    walk_timed(clock, monitor, to_ms)
        .into_iter()
        .map(|(_, v)| v)
        .collect()
}

/// [`walk`], with the clock's time (ms) of the tick that gave each verdict: a warning raised in
/// the middle of a long gap is labelled with its own second, not the gap's end.
pub fn walk_timed(clock: &ManualClock, monitor: &Monitor, to_ms: u64) -> Vec<(u64, Verdict)> {
    let mut seen = Vec::new();
    let mut ticks = 0u64;
    while clock.now() < to_ms {
        ticks += 1;
        let next = if ticks > MAX_TICKS_PER_GAP {
            to_ms
        } else {
            clock.now().saturating_add(1000).min(to_ms)
        };
        clock.set(next);
        for v in monitor.tick() {
            let halt = v.is_halt();
            seen.push((next, v));
            if halt {
                return seen;
            }
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentbreaker::MonitorConfig;
    use serde_json::json;

    fn monitor(clock: &std::sync::Arc<ManualClock>, idle: u64) -> Monitor {
        let config = MonitorConfig::from_json(
            &json!({"budget": {"maxIdleSecs": idle, "maxTaskDurationSecs": 1_000_000_000u64}}),
        )
        .unwrap();
        Monitor::with_clock(config, clock.clone()).unwrap()
    }

    #[test]
    fn an_idle_gap_halts_at_the_first_second_past_the_limit() {
        let clock = ManualClock::shared(0);
        let m = monitor(&clock, 60);
        m.observe(&json!({"type": "alive"})).unwrap();
        let seen = walk(&clock, &m, 500_000);
        let halt = seen.last().unwrap();
        assert!(halt.is_halt());
        assert_eq!(halt.reason.unwrap().slug(), "idle_timeout");
        // More than 60 s idle is first seen by the tick at 61 s; the walk stops there.
        assert_eq!(clock.now(), 61_000);
        // The idle warning (80% of the limit) came before the halt.
        assert!(seen[0].is_warn(), "{seen:?}");
    }

    #[test]
    fn each_verdict_comes_with_the_second_that_gave_it() {
        let clock = ManualClock::shared(0);
        let m = monitor(&clock, 900);
        m.observe(&json!({"type": "alive"})).unwrap();
        // 20 minutes without output: warned at 80% of the 900 s limit, stopped past it.
        let seen = walk_timed(&clock, &m, 1_200_000);
        let at: Vec<(u64, bool)> = seen.iter().map(|(t, v)| (*t, v.is_halt())).collect();
        assert_eq!(at, [(720_000, false), (901_000, true)]);
    }

    #[test]
    fn no_time_to_walk_changes_nothing() {
        let clock = ManualClock::shared(5_000);
        let m = monitor(&clock, 60);
        assert!(walk(&clock, &m, 5_000).is_empty());
        assert!(walk(&clock, &m, 1_000).is_empty());
        assert_eq!(clock.now(), 5_000);
        assert!(walk(&clock, &m, 7_500).is_empty());
        assert_eq!(clock.now(), 7_500);
    }

    #[test]
    fn a_huge_gap_is_bounded() {
        let clock = ManualClock::shared(0);
        let m = monitor(&clock, 1_000_000_000);
        m.observe(&json!({"type": "alive"})).unwrap();
        let to = (MAX_TICKS_PER_GAP + 50) * 1000 * 1000;
        walk(&clock, &m, to);
        assert_eq!(clock.now(), to);
    }
}
