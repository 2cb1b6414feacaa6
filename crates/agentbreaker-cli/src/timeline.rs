//! Time in a recording or a live stream: the Monitor's clock walks to each event's time one second
//! at a time, with a `tick` at every second, as a live supervisor ticking once a second would
//! (`run`, `replay` and `eval` share it).

use agentbreaker::{ManualClock, Monitor, Verdict};

/// Moves `clock` forward to `to_ms` (never back) in steps of at most one second, ticking the
/// monitor after each; returns the warnings and halts the ticks gave, in order.
pub fn walk(clock: &ManualClock, monitor: &Monitor, to_ms: u64) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    while clock.now() < to_ms {
        clock.set((clock.now() + 1000).min(to_ms));
        verdicts.extend(monitor.tick());
    }
    verdicts
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentbreaker::MonitorConfig;
    use serde_json::json;

    #[test]
    fn the_walk_ticks_every_second_and_never_goes_back() {
        let clock = ManualClock::shared(0);
        let config = MonitorConfig::from_json(&json!({"profile": "seed",
            "budget": {"maxIdleSecs": 3}, "budgetWarnPercent": 0}))
        .unwrap();
        let monitor = Monitor::with_clock(config, clock.clone()).unwrap();
        monitor.observe(&json!({"type": "alive"})).unwrap();
        assert!(walk(&clock, &monitor, 2_500).is_empty());
        assert_eq!(clock.now(), 2_500);
        let verdicts = walk(&clock, &monitor, 10_000);
        assert_eq!(
            verdicts.len(),
            1,
            "one halt, at the first tick past the limit"
        );
        assert!(verdicts[0].is_halt());
        assert_eq!(verdicts[0].message.as_deref(), Some("idle: 3.5s of 3s"));
        walk(&clock, &monitor, 5_000);
        assert_eq!(clock.now(), 10_000);
    }
}
