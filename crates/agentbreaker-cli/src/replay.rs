//! `agentbreaker replay FILE`: run a recorded stream through the same parsers and Monitor as `run`
//! and say where it would have been stopped, and what it would have been warned about.
//! Timestamps in the stream (`timestamp` or `ts` fields) drive the clock (a line stamped as the
//! one before it comes at the same time); lines without one advance it by one second. Between lines the clock walks one second at a time with a tick each
//! second ([`crate::timeline::walk`]), as `run` ticks live.

use std::io::BufRead;
use std::path::Path;

use agentbreaker::{ManualClock, SharedClock, Verdict};
use serde_json::{Value, json};

use crate::report::{card, clock, dollars, notice, slug};
use crate::settings::Settings;
use crate::stream::{Format, StreamParser};
use crate::timeline::walk_timed;
use crate::watch::Watch;

/// Where a verdict came: its 1-based line and the seconds into the recording.
#[derive(Debug, Clone, PartialEq)]
pub struct At {
    /// The line (the line after the last one for what the end of the stream released).
    pub line: u64,
    /// Seconds since the first line.
    pub secs: f64,
}

/// Where and why a recording would have been stopped, and what it would have been warned about.
#[derive(Debug)]
pub struct Replayed {
    /// The halt and where it came.
    pub halt: Option<(Verdict, At)>,
    /// The warnings and where they came (the first 1000).
    pub warnings: Vec<(Verdict, At)>,
    /// Lines in the recording.
    pub lines: u64,
    /// Lines not recognised (up to the halt).
    pub malformed: u64,
    /// The watch at the end (or at the halt): counts, refused events, the Monitor's status.
    pub watch: Watch,
}

impl Replayed {
    /// The `--json` document.
    pub fn to_json(&self) -> Value {
        let at = |a: &At| json!({"line": a.line, "atSecs": a.secs});
        json!({
            "halted": self.halt.is_some(),
            "line": self.halt.as_ref().map(|h| h.1.line),
            "atSecs": self.halt.as_ref().map(|h| h.1.secs),
            "halt": self.halt.as_ref().map(|h| h.0.to_json()),
            "warnings": self.warnings.iter().map(|(v, a)| {
                let mut w = v.to_json();
                w["at"] = at(a);
                w
            }).collect::<Vec<_>>(),
            "warningsTotal": self.watch.warnings_total,
            "lines": self.lines,
            "malformedLines": self.malformed,
            "events": self.watch.events,
            "invalidEvents": self.watch.invalid_json(),
            "status": self.watch.status(),
        })
    }

    /// The readable report.
    pub fn to_text(&self, file: &Path) -> String {
        let mut out = String::new();
        match &self.halt {
            Some((v, at)) => out.push_str(&format!(
                "{}: would have been stopped at line {} of {}, {} into the session.\n{}\n",
                file.display(),
                at.line,
                self.lines,
                clock(at.secs),
                card(v)
            )),
            None => out.push_str(&format!(
                "{}: would have run to the end ({} lines) without a halt.\n",
                file.display(),
                self.lines
            )),
        }
        if self.watch.warnings_total > 0 {
            out.push_str(&format!(
                "  {} warning{}:\n",
                self.watch.warnings_total,
                if self.watch.warnings_total == 1 {
                    ""
                } else {
                    "s"
                }
            ));
            for (v, at) in &self.warnings {
                out.push_str(&format!(
                    "  line {} ({}): {}\n",
                    at.line,
                    clock(at.secs),
                    notice(v).trim_start_matches("agentbreaker: ")
                ));
            }
        }
        let status = self.watch.status();
        for t in status["tasks"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  task {}: {} steps, {} tool calls, {} spent, {} running{}\n",
                t["taskId"].as_str().unwrap_or("?"),
                t["steps"],
                t["toolCalls"],
                dollars(t["spendCents"].as_f64().unwrap_or(0.0)),
                clock(t["durationSecs"].as_f64().unwrap_or(0.0)),
                if t["halted"] == json!(true) {
                    ", halted"
                } else {
                    ""
                }
            ));
        }
        if self.malformed > 0 {
            out.push_str(&format!(
                "  {} lines were not recognised as events (passed through, ignored)\n",
                self.malformed
            ));
        }
        if self.watch.invalid > 0 {
            out.push_str(&format!(
                "  {} events were refused by the Monitor (INVALID_EVENT), e.g. {}\n",
                self.watch.invalid,
                self.watch
                    .invalid_samples
                    .first()
                    .map_or("", String::as_str)
            ));
        }
        out
    }

    /// The halt's rule slug, if any.
    pub fn halt_slug(&self) -> Option<&'static str> {
        self.halt.as_ref().map(|(v, _)| slug(v))
    }
}

/// Replays `reader` (the lines of a recording) through a Monitor of `settings`.
pub fn replay(
    reader: impl BufRead,
    format: Format,
    settings: &Settings,
) -> std::io::Result<Replayed> {
    let manual = ManualClock::shared(0);
    let shared: SharedClock = manual.clone();
    let mut watch = Watch::new(settings.monitor_config(), shared).map_err(std::io::Error::other)?;
    let mut parser = StreamParser::new(format);
    // Epoch time of the first timestamp minus the clock at that line.
    let mut offset: Option<u64> = None;
    let mut halt = None;
    let mut warnings = Vec::new();
    let mut reader = reader;
    let mut line = Vec::new();
    let mut number = 0u64;
    let mut keep = |said: Vec<Verdict>, at: At, halt: &mut Option<(Verdict, At)>| {
        for v in said {
            if v.is_halt() {
                *halt = Some((v, at.clone()));
            } else if warnings.len() < 1000 {
                warnings.push((v, at.clone()));
            }
        }
    };
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        number += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let events = parser.parse_line(text);
        // A line's own timestamp places it (the same as the previous line's: no time passed);
        // a line without one comes a second after the previous line.
        let target = match parser.line_timestamp_ms {
            Some(ts) => {
                let base = *offset.get_or_insert_with(|| ts.saturating_sub(manual.now()));
                ts.saturating_sub(base)
            }
            None => manual.now() + 1000,
        };
        // Time passes up to this line as it would have live; what a tick said is labelled with
        // that tick's time (and this line: it came before it).
        for (ms, v) in watch.record_timed(walk_timed(&manual, &watch.monitor, target)) {
            let at = At {
                line: number,
                secs: ms as f64 / 1000.0,
            };
            keep(vec![v], at, &mut halt);
        }
        let at = || At {
            line: number,
            secs: manual.now() as f64 / 1000.0,
        };
        if halt.is_none() {
            let said = watch.observe(&events);
            keep(said, at(), &mut halt);
        }
        if halt.is_some() {
            break;
        }
    }
    if halt.is_none() {
        // What the parser held back until the end (a last message's text).
        let events = parser.finish();
        let said = watch.observe(&events);
        let at = At {
            line: number + 1,
            secs: manual.now() as f64 / 1000.0,
        };
        keep(said, at, &mut halt);
    }
    // Count the rest of the recording, for "line 51 of 143".
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        number += 1;
    }
    Ok(Replayed {
        halt,
        warnings,
        lines: number,
        malformed: parser.malformed,
        watch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, settings: &Settings) -> Replayed {
        replay(text.as_bytes(), Format::Auto, settings).unwrap()
    }

    #[test]
    fn a_runaway_stream_stops_past_the_tool_call_limit() {
        let text: String = (0..60)
            .map(|i| {
                format!("{{\"type\":\"tool_use\",\"name\":\"fetch\",\"input\":{{\"page\":{i}}}}}\n")
            })
            .collect();
        // The seed profile: 50 tool calls per task.
        let v = run(&text, &Settings::from_profile("seed").unwrap());
        let (halt, at) = v.halt.clone().unwrap();
        assert_eq!(at.line, 51);
        assert_eq!(slug(&halt), "tool_call_limit");
        assert_eq!(v.lines, 60);
        // Warned at 80% of the limit, on line 40.
        assert_eq!(v.warnings[0].1.line, 40);
        assert_eq!(slug(&v.warnings[0].0), "tool_call_limit");
        // The default profile allows 200 per task.
        assert!(
            run(&text, &Settings::from_profile("coding-agent").unwrap())
                .halt
                .is_none()
        );
    }

    #[test]
    fn timestamps_drive_the_clock() {
        let mut settings = Settings::from_profile("coding-agent").unwrap();
        settings.budget.max_idle_secs = 60;
        let text = "{\"type\":\"tool_use\",\"name\":\"a\",\"ts\":1000000}\n\
                    {\"type\":\"tool_use\",\"name\":\"a\",\"ts\":1030000}\n\
                    {\"type\":\"tool_use\",\"name\":\"a\",\"ts\":1100000}\n";
        let v = run(text, &settings);
        let (halt, at) = v.halt.unwrap();
        assert_eq!(slug(&halt), "idle_timeout");
        assert_eq!(at.line, 3);
        // Idle since 30 s; the tick at 91 s is the first past the 60 s limit.
        assert!((at.secs - 91.0).abs() < 1e-9, "{}", at.secs);
    }

    #[test]
    fn lines_stamped_with_the_same_time_take_no_time() {
        let mut settings = Settings::from_profile("coding-agent").unwrap();
        settings.budget.max_task_duration_secs = 10;
        let text = "{\"type\": \"alive\", \"timestamp\": \"2025-01-01T00:00:00Z\"}\n".repeat(30);
        let v = run(&text, &settings);
        assert!(v.halt.is_none(), "{:?}", v.halt);
        assert_eq!(v.watch.status()["tasks"][0]["durationSecs"], 0.0);
        // Time still passes between lines stamped a second apart, and for lines without a stamp.
        let text = "{\"type\": \"alive\", \"ts\": 1000}\n{\"type\": \"alive\", \"ts\": 1000}\n\
                    {\"type\": \"alive\", \"ts\": 2000}\n{\"type\": \"alive\"}\n";
        let v = run(text, &settings);
        assert_eq!(v.watch.status()["tasks"][0]["durationSecs"], 2.0);
    }

    #[test]
    fn a_warning_in_a_gap_is_labelled_with_the_time_it_was_raised() {
        // 20 minutes without a line after 2 s; 15 minutes idle is the limit, warned at 80%.
        let text = "{\"type\": \"assistant\", \"text\": \"start\", \"ts\": 1700000000000}\n\
                    {\"type\": \"tool_use\", \"name\": \"Bash\", \"ts\": 1700000001000}\n\
                    {\"type\": \"tool_result\", \"ok\": true, \"ts\": 1700000002000}\n\
                    {\"type\": \"assistant\", \"text\": \"later\", \"ts\": 1700001202000}\n";
        let v = run(text, &Settings::from_profile("coding-agent").unwrap());
        let (warning, at) = &v.warnings[0];
        assert_eq!(slug(warning), "idle_timeout");
        assert_eq!(at.line, 4);
        // Idle since 2 s: 720 s idle at 722 s.
        assert!((at.secs - 722.0).abs() < 1e-9, "{}", at.secs);
        let (halt, at) = v.halt.clone().unwrap();
        assert_eq!(slug(&halt), "idle_timeout");
        assert!((at.secs - 903.0).abs() < 1e-9, "{}", at.secs);
        assert!(
            v.to_text(Path::new("x")).contains("line 4 (12m02s)"),
            "{}",
            v.to_text(Path::new("x"))
        );
        // The trace places it there too.
        let trace = serde_json::to_value(&v.watch.trace).unwrap();
        let warn = trace["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "warn")
            .unwrap();
        assert_eq!(warn["t"], 722_000, "{trace}");
    }

    #[test]
    fn a_healthy_stream_runs_to_the_end_and_refusals_are_reported() {
        let text = "{\"type\":\"assistant\",\"text\":\"a b c\"}\nnot json\n\
                    {\"type\":\"assistant\",\"text\":\"d e f\"}\n{\"type\":\"tool_use\"}\n";
        let v = run(text, &Settings::from_profile("coding-agent").unwrap());
        assert!(v.halt.is_none());
        assert_eq!((v.lines, v.malformed), (4, 1));
        assert_eq!(v.watch.invalid, 1);
        let out = v.to_text(Path::new("x"));
        assert!(out.contains("would have run to the end"), "{out}");
        assert!(
            out.contains("1 events were refused by the Monitor"),
            "{out}"
        );
        let doc = v.to_json();
        assert_eq!(doc["invalidEvents"]["count"], 1);
        assert_eq!(doc["halted"], false);
    }

    #[test]
    fn the_last_message_text_is_observed_at_the_end() {
        let text = r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Done."}]},"session_id":"s"}"#;
        let v = run(text, &Settings::from_profile("coding-agent").unwrap());
        assert_eq!(v.watch.events, 2, "alive, then the message at the end");
    }
}
