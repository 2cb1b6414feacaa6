//! `agentbreaker replay FILE`: run a recorded stream through the same breakers as `run` and say
//! where it would have been stopped. Timestamps in the stream (`timestamp` or `ts` fields) drive
//! the clock; lines without one advance it by one second.

use std::io::BufRead;
use std::path::Path;

use agentbreaker::{BudgetBreaker, ManualClock, SharedClock, StagnationBreaker};
use serde_json::{Value, json};

use crate::report::{Stop, clock, dollars};
use crate::settings::Settings;
use crate::stream::{Feed, Format, StreamParser};

/// Beyond this many one-second ticks in one gap between lines, time jumps to the next line.
const MAX_TICKS_PER_GAP: u32 = 100_000;

/// Where and why a recording would have been stopped.
#[derive(Debug)]
pub struct Verdict {
    /// The stop and the 1-based line it happened on.
    pub stop: Option<(Stop, u64, f64)>,
    /// Lines in the recording.
    pub lines: u64,
    /// Lines not recognised (up to the stop).
    pub malformed: u64,
    /// The BudgetBreaker's snapshot at the end (or at the stop).
    pub counters: agentbreaker::BudgetSnapshot,
}

impl Verdict {
    /// The `--json` document.
    pub fn to_json(&self) -> Value {
        json!({
            "halted": self.stop.is_some(),
            "line": self.stop.as_ref().map(|s| s.1),
            "atSecs": self.stop.as_ref().map(|s| s.2),
            "halt": self.stop.as_ref().map(|s| s.0.to_json()),
            "lines": self.lines,
            "malformedLines": self.malformed,
            "counters": self.counters,
        })
    }

    /// The readable report.
    pub fn to_text(&self, file: &Path) -> String {
        let mut out = String::new();
        match &self.stop {
            Some((stop, line, secs)) => {
                out.push_str(&format!(
                    "{}: would have been stopped at line {line} of {}, {} into the session.\n{}\n",
                    file.display(),
                    self.lines,
                    clock(*secs),
                    stop.card()
                ));
            }
            None => out.push_str(&format!(
                "{}: would have run to the end ({} lines) without a halt.\n",
                file.display(),
                self.lines
            )),
        }
        for t in &self.counters.tasks {
            out.push_str(&format!(
                "  task {}: {} tool calls, {} spent, {} running{}\n",
                t.task_id,
                t.tool_calls,
                dollars(t.spend_cents),
                clock(t.duration_secs),
                if t.halted { ", halted" } else { "" }
            ));
        }
        if self.malformed > 0 {
            out.push_str(&format!(
                "  {} lines were not recognised as events (passed through, ignored)\n",
                self.malformed
            ));
        }
        out
    }
}

/// Replays `reader` (the lines of a recording).
pub fn replay(
    reader: impl BufRead,
    format: Format,
    settings: &Settings,
) -> std::io::Result<Verdict> {
    let manual = ManualClock::shared(0);
    let clock_handle: SharedClock = manual.clone();
    let budget = BudgetBreaker::with_clock(settings.budget.clone(), clock_handle.clone())
        .map_err(std::io::Error::other)?;
    let stagnation = StagnationBreaker::with_clock(settings.stagnation.clone(), clock_handle)
        .map_err(std::io::Error::other)?;
    let mut parser = StreamParser::new(format);
    let mut feed = Feed::new(true);
    // Epoch time of the first timestamp minus the clock at that line.
    let mut offset: Option<u64> = None;
    let mut stop = None;
    let mut reader = reader;
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        number += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let before = parser.last_timestamp_ms;
        let signals = parser.parse_line(text);
        let target = match parser
            .last_timestamp_ms
            .filter(|_| parser.last_timestamp_ms != before)
        {
            Some(ts) => {
                let base = *offset.get_or_insert_with(|| ts.saturating_sub(manual.now()));
                ts.saturating_sub(base)
            }
            None => manual.now() + 1000,
        };
        // Time passes up to this line as it would have live: a tick every second (the live
        // supervisor's rhythm), so an idle gap is caught when it would have been.
        let mut found = None;
        let mut ticks = 0u32;
        while found.is_none() && manual.now() < target {
            ticks += 1;
            let next = if ticks > MAX_TICKS_PER_GAP {
                target
            } else {
                (manual.now() + 1000).min(target)
            };
            manual.set(next);
            found = budget.tick().into_iter().next().map(Stop::Budget);
        }
        let found = found.or_else(|| feed.feed(signals, &budget, &stagnation));
        if let Some(s) = found {
            stop = Some((s, number, manual.now() as f64 / 1000.0));
            break;
        }
    }
    let counters = budget.snapshot();
    // Count the rest of the recording, for "line 51 of 143".
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        number += 1;
    }
    Ok(Verdict {
        stop,
        lines: number,
        malformed: parser.malformed,
        counters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, settings: &Settings) -> Verdict {
        replay(text.as_bytes(), Format::Auto, settings).unwrap()
    }

    #[test]
    fn a_runaway_stream_stops_at_the_51st_tool_call() {
        let text = "{\"type\":\"tool_use\",\"name\":\"fetch\"}\n".repeat(60);
        let v = run(&text, &Settings::defaults());
        let (stop, line, _) = v.stop.unwrap();
        assert_eq!(line, 51);
        assert_eq!(stop.slug(), "tool_call_limit");
        assert_eq!(v.lines, 60);
    }

    #[test]
    fn timestamps_drive_the_clock() {
        let mut settings = Settings::defaults();
        settings.budget.max_idle_secs = 60;
        let text = "{\"type\":\"tool_use\",\"name\":\"a\",\"ts\":1000000}\n\
                    {\"type\":\"tool_use\",\"name\":\"a\",\"ts\":1030000}\n\
                    {\"type\":\"tool_use\",\"name\":\"a\",\"ts\":1100000}\n";
        let v = run(text, &settings);
        let (stop, line, secs) = v.stop.unwrap();
        assert_eq!(stop.slug(), "idle_timeout");
        assert_eq!(line, 3);
        // Idle since 30 s; the tick at 91 s is the first past the 60 s limit.
        assert!((secs - 91.0).abs() < 1e-9, "{secs}");
    }

    #[test]
    fn a_healthy_stream_runs_to_the_end() {
        let text = "{\"type\":\"assistant\",\"text\":\"a b c\"}\nnot json\n\
                    {\"type\":\"assistant\",\"text\":\"d e f\"}\n";
        let v = run(text, &Settings::defaults());
        assert!(v.stop.is_none());
        assert_eq!((v.lines, v.malformed), (3, 1));
        assert!(
            v.to_text(Path::new("x"))
                .contains("would have run to the end")
        );
    }
}
