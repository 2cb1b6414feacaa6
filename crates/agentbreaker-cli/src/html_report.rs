//! `agentbreaker report SESSION`: one self-contained HTML page (inline CSS and SVG, nothing
//! fetched) that draws a session as a timeline: per task, one column per step with its tool calls
//! (green: succeeded, red: failed, grey: no result), model-only steps, progress, the warnings
//! (amber triangles) and the halt (a magenta bar, labelled with the rule that fired).
//!
//! SESSION is a `run --report` JSON file, a recording (replayed as `replay` would, with the same
//! flags), a hook session's state file, or a hook session id (looked up in the state folder).

// The page is written as blocks of markup, each ending its own line.
#![allow(clippy::write_with_newline)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::BufReader;
use std::path::Path;

use agentbreaker::Verdict;
use serde_json::Value;

use crate::hook::state::{SessionState, StateDir};
use crate::replay;
use crate::report::clock;
use crate::settings::Settings;
use crate::stream::Format;
use crate::trace::{Entry, Kind, Trace};

/// The halt marker's color: used by nothing else on the page (the tests look for it).
pub const HALT_COLOR: &str = "#c8007a";
const OK_COLOR: &str = "#1e8e3e";
const FAIL_COLOR: &str = "#d93025";
const OPEN_COLOR: &str = "#9aa0a6";
const MODEL_COLOR: &str = "#4a78c2";
const WARN_COLOR: &str = "#f4b400";
const PROGRESS_COLOR: &str = "#34a853";

/// The chart's width in pixels (the page is 1200 wide with 24 px margins).
pub const CHART_WIDTH: f64 = 1152.0;
/// Where the step columns begin (the task names are left of it).
pub const PLOT_LEFT: f64 = 120.0;
const PLOT_RIGHT_PAD: f64 = 12.0;
const LANE_HEIGHT: f64 = 170.0;
const LANE_TOP_PAD: f64 = 34.0;
const AXIS_HEIGHT: f64 = 26.0;
/// At most this many tasks get a lane (the halted one always does).
const MAX_LANES: usize = 6;
/// At most this many steps are drawn per task (the last ones).
const MAX_COLUMNS: u64 = 300;
/// At most this many calls are stacked in one column.
const MAX_STACK: usize = 10;

/// What a page is drawn from.
#[derive(Debug, Clone)]
pub struct Source {
    /// Where it came from, for the title.
    pub name: String,
    /// What kind of source: `run report`, `recording`, `hook session`.
    pub kind: &'static str,
    /// The session's record.
    pub trace: Trace,
    /// The halt, with its nudge (the trace keeps the message only).
    pub halt: Option<Verdict>,
    /// How many warnings there were in all.
    pub warnings_total: u64,
    /// Extra facts for the summary line (`agent claude`, `exit code 3`).
    pub facts: Vec<String>,
}

fn read_json(path: &Path) -> Option<Value> {
    let bytes = std::fs::read(path).ok()?;
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace())?;
    if *first != b'{' {
        return None;
    }
    // A whole-file JSON object (a report or a state file), not a stream of one-line events.
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    let is_doc = v.get("trace").is_some()
        || v.get("kind") == Some(&Value::String(crate::hook::state::STATE_KIND.into()))
        || (v.get("stopped").is_some() && v.get("status").is_some());
    is_doc.then_some(v)
}

fn verdicts(v: &Value) -> Vec<Verdict> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| serde_json::from_value(w.clone()).ok())
        .collect()
}

/// A trace from verdicts alone (a report written before reports had a trace).
fn trace_of(warnings: &[Verdict], halt: Option<&Verdict>) -> Trace {
    let mut t = Trace::default();
    for v in warnings.iter().chain(halt) {
        t.verdict(0, v);
    }
    t
}

fn from_report(name: &str, doc: &Value) -> Source {
    let halt: Option<Verdict> = doc
        .get("halt")
        .and_then(|h| serde_json::from_value(h.clone()).ok());
    let trace = doc
        .get("trace")
        .and_then(|t| serde_json::from_value::<Trace>(t.clone()).ok())
        .unwrap_or_else(|| trace_of(&verdicts(&doc["warnings"]), halt.as_ref()));
    let mut facts = Vec::new();
    if let Some(code) = doc.get("exitCode").and_then(Value::as_i64) {
        facts.push(format!("exit code {code}"));
    }
    if let Some(n) = doc.get("events").and_then(Value::as_u64) {
        facts.push(format!("{n} events"));
    }
    Source {
        name: name.to_string(),
        kind: "run report",
        trace,
        halt,
        warnings_total: doc
            .get("warningsTotal")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        facts,
    }
}

fn from_session(name: &str, s: &SessionState, record: &Path) -> Source {
    let mut facts = vec![
        format!("agent {}", s.agent),
        format!("{} hook calls", s.calls),
    ];
    if let Some(cwd) = &s.cwd {
        facts.push(cwd.clone());
    }
    let mut trace = crate::hook::trace_file::read(record);
    if let Some(h) = &s.session_halt
        && trace.halt().is_none()
    {
        let end = trace.entries.back().map_or(0, |e| e.t);
        trace.verdict(trace.start_ms.unwrap_or(0) + end, h);
    }
    let warnings_total = trace
        .entries
        .iter()
        .filter(|e| e.kind == Kind::Warn)
        .count() as u64;
    Source {
        name: format!("{name} (session {})", s.session_id),
        kind: "hook session",
        trace,
        halt: s.session_halt.clone(),
        warnings_total,
        facts,
    }
}

/// Loads SESSION: a report or state file, a recording (replayed with `settings` and `format`), or
/// a hook session id in `state_dir`.
pub fn load(
    session: &str,
    state_dir: Option<&Path>,
    settings: &Settings,
    format: Format,
) -> Result<Source, String> {
    let path = Path::new(session);
    if path.is_file() {
        if let Some(doc) = read_json(path) {
            if doc.get("kind") == Some(&Value::String(crate::hook::state::STATE_KIND.into())) {
                let s: SessionState = serde_json::from_value(doc)
                    .map_err(|e| format!("{session} is not a hook session file: {e}"))?;
                let stem = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let stem = stem.strip_suffix(".json").unwrap_or(&stem);
                let record =
                    path.with_file_name(format!("{stem}{}", crate::hook::trace_file::SUFFIX));
                return Ok(from_session(session, &s, &record));
            }
            return Ok(from_report(session, &doc));
        }
        let file = std::fs::File::open(path).map_err(|e| format!("cannot open {session}: {e}"))?;
        let replayed = replay::replay(BufReader::new(file), format, settings)
            .map_err(|e| format!("cannot read {session}: {e}"))?;
        let w = &replayed.watch;
        return Ok(Source {
            name: session.to_string(),
            kind: "recording",
            trace: w.trace.clone(),
            halt: w.halt.clone(),
            warnings_total: w.warnings_total,
            facts: vec![
                format!("{} lines", replayed.lines),
                format!("{} events", w.events),
            ],
        });
    }
    let dir_path = state_dir
        .map(Path::to_path_buf)
        .or_else(StateDir::default_path)
        .ok_or("no such file, and no state folder to look for a session in")?;
    let dir = StateDir {
        path: dir_path.clone(),
    };
    let key = StateDir::key(session);
    for (k, st) in dir.list() {
        let Ok(st) = st else { continue };
        if k == key || k == session || st.session_id == session {
            let record = crate::hook::trace_file::path(&dir, &k);
            return Ok(from_session(session, &st, &record));
        }
    }
    Err(format!(
        "{session:?} is neither a file nor a session in {}",
        dir_path.display()
    ))
}

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// One step of one task, as drawn.
#[derive(Debug, Default)]
struct Column {
    /// Each call: its name and outcome (None: no result).
    calls: Vec<(String, Option<bool>)>,
    model: bool,
    errors: u32,
    progress: bool,
    warnings: Vec<(String, String)>,
    halt: Option<(String, String)>,
    first_t: Option<u64>,
}

/// A task's columns by step, in the order tasks first appear.
fn columns(trace: &Trace) -> Vec<(String, BTreeMap<u64, Column>)> {
    let mut tasks: Vec<(String, BTreeMap<u64, Column>)> = Vec::new();
    for e in &trace.entries {
        let i = match tasks.iter().position(|(t, _)| *t == e.task) {
            Some(i) => i,
            None => {
                tasks.push((e.task.clone(), BTreeMap::new()));
                tasks.len() - 1
            }
        };
        let col = tasks[i].1.entry(e.step).or_default();
        col.first_t.get_or_insert(e.t);
        add(col, e);
    }
    tasks
}

fn add(col: &mut Column, e: &Entry) {
    let name = e.name.clone().unwrap_or_default();
    let message = e.message.clone().unwrap_or_default();
    match e.kind {
        Kind::Model => col.model = true,
        Kind::Tool => col.calls.push((name, None)),
        Kind::Result => {
            // The call of the same name still open, else the oldest open one.
            let open = |c: &&mut (String, Option<bool>)| c.1.is_none();
            let ok = e.ok.unwrap_or(false);
            if let Some(c) = col
                .calls
                .iter_mut()
                .filter(open)
                .find(|c| e.name.as_deref().is_none_or(|n| n == c.0))
            {
                c.1 = Some(ok);
            } else if let Some(c) = col.calls.iter_mut().find(|c| c.1.is_none()) {
                c.1 = Some(ok);
            } else if !ok {
                col.errors += 1;
            }
        }
        Kind::Error => col.errors += 1,
        Kind::Progress => col.progress = true,
        Kind::Warn => col.warnings.push((name, message)),
        Kind::Halt => col.halt = Some((name, message)),
    }
}

/// The page.
pub fn render(src: &Source) -> String {
    let tasks = columns(&src.trace);
    let halt_entry = src.trace.halt().cloned();
    // Lanes: the tasks in order of appearance, the halted one always among them.
    let mut lanes: Vec<usize> = (0..tasks.len()).take(MAX_LANES).collect();
    if let Some(h) = &halt_entry
        && let Some(i) = tasks.iter().position(|(t, _)| *t == h.task)
        && !lanes.contains(&i)
    {
        lanes.pop();
        lanes.push(i);
    }
    let calls: usize = tasks
        .iter()
        .flat_map(|(_, c)| c.values())
        .map(|c| c.calls.len())
        .sum();
    let failed: usize = tasks
        .iter()
        .flat_map(|(_, c)| c.values())
        .map(|c| c.calls.iter().filter(|x| x.1 == Some(false)).count() + c.errors as usize)
        .sum();
    let steps: usize = tasks
        .iter()
        .map(|(_, c)| c.keys().filter(|s| **s > 0).count())
        .sum();

    let mut html = String::with_capacity(64 * 1024);
    let title = format!("agentbreaker report: {}", src.name);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=1200\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <title>{}</title><style>{}</style></head><body>\n",
        esc(&title),
        CSS
    );
    let _ = write!(
        html,
        "<header><h1>agentbreaker <span>session report</span></h1>\
         <p class=\"src\">{} · {}{}</p></header>\n",
        esc(src.kind),
        esc(&src.name),
        src.facts
            .iter()
            .map(|f| format!(" · {}", esc(f)))
            .collect::<String>()
    );
    match (&src.halt, &halt_entry) {
        (Some(h), _) => {
            let _ = write!(
                html,
                "<div class=\"banner halted\" id=\"outcome\" data-outcome=\"halted\">\
                 <b>Halted</b> by rule <code>{}</code> at step {} of task <code>{}</code>: {}",
                esc(h.reason.map_or("-", |r| r.slug())),
                h.step,
                esc(h.task_id.as_deref().unwrap_or("-")),
                esc(h.message.as_deref().unwrap_or(""))
            );
            if let Some(n) = &h.nudge {
                let _ = write!(
                    html,
                    "<div class=\"nudge\">nudge for the model: {}</div>",
                    esc(n)
                );
            }
            html.push_str("</div>\n");
        }
        (None, Some(e)) => {
            let _ = write!(
                html,
                "<div class=\"banner halted\" id=\"outcome\" data-outcome=\"halted\">\
                 <b>Halted</b> by rule <code>{}</code> at step {} of task <code>{}</code>: {}</div>\n",
                esc(e.name.as_deref().unwrap_or("-")),
                e.step,
                esc(&e.task),
                esc(e.message.as_deref().unwrap_or(""))
            );
        }
        (None, None) => html.push_str(
            "<div class=\"banner ok\" id=\"outcome\" data-outcome=\"ran\"><b>No halt</b>: the \
             session ran without tripping a rule.</div>\n",
        ),
    }
    let warnings = src.warnings_total.max(
        src.trace
            .entries
            .iter()
            .filter(|e| e.kind == Kind::Warn)
            .count() as u64,
    );
    let halts = u64::from(src.halt.is_some() || halt_entry.is_some());
    html.push_str("<ul class=\"stats\">");
    for (n, what) in [
        (steps as u64, "step"),
        (calls as u64, "tool call"),
        (failed as u64, "failed"),
        (warnings, "warning"),
        (halts, "halt"),
        (tasks.len() as u64, "task"),
    ] {
        let plural = if n == 1 || what == "failed" { "" } else { "s" };
        let _ = write!(html, "<li><b>{n}</b> {what}{plural}</li>");
    }
    html.push_str("</ul>\n");
    html.push_str(&chart(&tasks, &lanes));
    if src.trace.dropped > 0 {
        let _ = write!(
            html,
            "<p class=\"note\">The first {} entries of the session are not shown (the record keeps \
             the last {}).</p>\n",
            src.trace.dropped,
            src.trace.entries.len()
        );
    }
    if tasks.len() > lanes.len() {
        let _ = write!(
            html,
            "<p class=\"note\">{} more tasks are not drawn.</p>\n",
            tasks.len() - lanes.len()
        );
    }
    html.push_str(LEGEND);
    // The warnings and the halt, in order.
    let said: Vec<&Entry> = src
        .trace
        .entries
        .iter()
        .filter(|e| matches!(e.kind, Kind::Warn | Kind::Halt))
        .collect();
    if !said.is_empty() {
        html.push_str(
            "<table><thead><tr><th>time</th><th>task</th><th>step</th><th></th><th>rule</th>\
             <th>message</th></tr></thead><tbody>\n",
        );
        for e in said {
            let _ = writeln!(
                html,
                "<tr class=\"{}\"><td>+{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                if e.kind == Kind::Halt { "h" } else { "w" },
                clock(e.t as f64 / 1000.0),
                esc(&e.task),
                e.step,
                if e.kind == Kind::Halt {
                    "halt"
                } else {
                    "warning"
                },
                esc(e.name.as_deref().unwrap_or("-")),
                esc(e.message.as_deref().unwrap_or(""))
            );
        }
        html.push_str("</tbody></table>\n");
    }
    html.push_str("<footer>agentbreaker · rules and slugs: docs/monitor.md · metrics: docs/observability.md</footer>\n</body></html>\n");
    html
}

fn chart(tasks: &[(String, BTreeMap<u64, Column>)], lanes: &[usize]) -> String {
    let height = (lanes.len().max(1) as f64) * LANE_HEIGHT + AXIS_HEIGHT;
    let mut svg = String::with_capacity(32 * 1024);
    let _ = write!(
        svg,
        "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{CHART_WIDTH}\" \
         height=\"{height}\" viewBox=\"0 0 {CHART_WIDTH} {height}\" role=\"img\" \
         aria-label=\"timeline of the session\">\n"
    );
    if lanes.is_empty() {
        let _ = write!(
            svg,
            "<text x=\"{PLOT_LEFT}\" y=\"60\" class=\"empty\">nothing was recorded</text>\n"
        );
    }
    let plot_w = CHART_WIDTH - PLOT_LEFT - PLOT_RIGHT_PAD;
    for (lane, &ti) in lanes.iter().enumerate() {
        let (task, cols) = &tasks[ti];
        let top = lane as f64 * LANE_HEIGHT;
        let base = top + LANE_HEIGHT - 12.0;
        let last = cols.keys().copied().max().unwrap_or(0).max(1);
        let first = cols
            .keys()
            .copied()
            .filter(|s| *s > 0)
            .min()
            .unwrap_or(1)
            .max(last.saturating_sub(MAX_COLUMNS - 1));
        let n = (last - first + 1) as f64;
        let cw = (plot_w / n).min(36.0);
        let sq = (cw - 2.0).clamp(1.0, 11.0);
        let x_of = |step: u64| PLOT_LEFT + (step.saturating_sub(first)) as f64 * cw;
        let _ = write!(
            svg,
            "<g class=\"lane\" data-task=\"{}\">\
             <rect x=\"0\" y=\"{top}\" width=\"{CHART_WIDTH}\" height=\"{LANE_HEIGHT}\" \
             class=\"lanebg{}\"/>\
             <text x=\"8\" y=\"{}\" class=\"task\">{}</text>\
             <text x=\"8\" y=\"{}\" class=\"sub\">{} steps</text>\
             <line x1=\"{PLOT_LEFT}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" class=\"axis\"/>\n",
            esc(task),
            if lane % 2 == 1 { " alt" } else { "" },
            top + 22.0,
            esc(agentbreaker::text::truncate(task, 16)),
            top + 40.0,
            cols.keys().filter(|s| **s > 0).count(),
            PLOT_LEFT + plot_w
        );
        // Step numbers along the axis.
        let every = [1u64, 2, 5, 10, 20, 50, 100]
            .into_iter()
            .find(|k| cw * (*k as f64) >= 24.0)
            .unwrap_or(100);
        let mut s = first.div_ceil(every) * every;
        if first == 1 && every > 1 {
            let _ = write!(
                svg,
                "<text x=\"{}\" y=\"{}\" class=\"tick\">1</text>",
                x_of(1) + cw / 2.0,
                base + 11.0
            );
        }
        while s <= last {
            if s >= 1 {
                let _ = write!(
                    svg,
                    "<text x=\"{}\" y=\"{}\" class=\"tick\">{s}</text>",
                    x_of(s) + cw / 2.0,
                    base + 11.0
                );
            }
            s += every;
        }
        svg.push('\n');
        for (&step, col) in cols.range(first..) {
            let x = x_of(step);
            let cx = x + cw / 2.0;
            // Calls, stacked up from the axis.
            let mut y = base - 2.0 - sq;
            let shown = col.calls.len().min(MAX_STACK);
            for (name, ok) in col.calls.iter().take(shown) {
                let (color, what) = match ok {
                    Some(true) => (OK_COLOR, "ok"),
                    Some(false) => (FAIL_COLOR, "failed"),
                    None => (OPEN_COLOR, "no result"),
                };
                let _ = write!(
                    svg,
                    "<rect x=\"{}\" y=\"{y}\" width=\"{sq}\" height=\"{sq}\" fill=\"{color}\" \
                     class=\"call\"><title>step {step}: {} ({what})</title></rect>",
                    cx - sq / 2.0,
                    esc(name)
                );
                y -= sq + 2.0;
            }
            for _ in 0..col.errors.min(3) {
                let _ = write!(
                    svg,
                    "<rect x=\"{}\" y=\"{y}\" width=\"{sq}\" height=\"{sq}\" fill=\"{FAIL_COLOR}\" \
                     class=\"err\"><title>step {step}: an error</title></rect>",
                    cx - sq / 2.0
                );
                y -= sq + 2.0;
            }
            if col.calls.len() > shown {
                let _ = write!(
                    svg,
                    "<text x=\"{cx}\" y=\"{}\" class=\"more\">+{}</text>",
                    y + sq,
                    col.calls.len() - shown
                );
            }
            if col.calls.is_empty() && col.errors == 0 && col.model {
                let _ = write!(
                    svg,
                    "<circle cx=\"{cx}\" cy=\"{}\" r=\"{}\" fill=\"{MODEL_COLOR}\">\
                     <title>step {step}: a model call without tools</title></circle>",
                    base - 2.0 - sq / 2.0,
                    (sq / 2.0).max(1.0)
                );
            }
            if col.progress {
                let _ = write!(
                    svg,
                    "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"3\" fill=\"{PROGRESS_COLOR}\">\
                     <title>step {step}: progress</title></rect>",
                    x + 1.0,
                    base + 1.0,
                    (cw - 2.0).max(1.0)
                );
            }
            for (i, (rule, message)) in col.warnings.iter().enumerate() {
                let ty = top + LANE_TOP_PAD - 10.0 + i as f64 * 3.0;
                let _ = write!(
                    svg,
                    "<path d=\"M{} {} L{} {} L{} {} Z\" fill=\"{WARN_COLOR}\" class=\"warn\" \
                     data-step=\"{step}\" data-reason=\"{}\"><title>warning at step {step}: [{}] \
                     {}</title></path>",
                    cx,
                    ty,
                    cx + 6.0,
                    ty + 10.0,
                    cx - 6.0,
                    ty + 10.0,
                    esc(rule),
                    esc(rule),
                    esc(message)
                );
            }
            if let Some((rule, message)) = &col.halt {
                let w = cw.clamp(4.0, 8.0);
                let y0 = top + LANE_TOP_PAD + 4.0;
                // The bar stands on the step's calls (`y` is above the last one drawn).
                let y1 = (y + sq - 3.0).max(y0 + 20.0);
                let label = format!("HALT · {rule}");
                let lw = 14.0 + 7.2 * label.chars().count() as f64;
                // The label goes left of the bar when it would leave the chart.
                let lx = if cx + w / 2.0 + lw > CHART_WIDTH - 2.0 {
                    cx - w / 2.0 - lw
                } else {
                    cx + w / 2.0
                };
                let _ = write!(
                    svg,
                    "\n<g id=\"halt-marker\" data-step=\"{step}\" data-reason=\"{}\" \
                     data-x=\"{cx}\" data-y0=\"{y0}\" data-y1=\"{y1}\">\
                     <rect x=\"{}\" y=\"{y0}\" width=\"{w}\" height=\"{}\" fill=\"{HALT_COLOR}\"/>\
                     <rect x=\"{lx}\" y=\"{}\" width=\"{lw}\" height=\"20\" rx=\"3\" \
                     fill=\"{HALT_COLOR}\"/>\
                     <text x=\"{}\" y=\"{}\" class=\"haltlabel\">{}</text>\
                     <title>halt at step {step}: [{}] {}</title></g>\n",
                    esc(rule),
                    cx - w / 2.0,
                    y1 - y0,
                    y0 - 22.0,
                    lx + 7.0,
                    y0 - 8.0,
                    esc(&label),
                    esc(rule),
                    esc(message)
                );
            }
        }
        svg.push_str("</g>\n");
    }
    let _ = write!(
        svg,
        "<text x=\"{}\" y=\"{}\" class=\"xlabel\">step →</text>\n</svg>\n",
        CHART_WIDTH - 60.0,
        height - 6.0
    );
    svg
}

const CSS: &str = "\
*{box-sizing:border-box}\
body{margin:0;padding:24px;width:1200px;font:14px/1.45 -apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:#202124;background:#fff}\
header h1{margin:0;font-size:22px}header h1 span{font-weight:400;color:#5f6368}\
.src{margin:2px 0 12px;color:#5f6368;word-break:break-all}\
.banner{padding:10px 14px;border-radius:4px;margin:0 0 12px;border-left:6px solid}\
.banner.halted{background:#fbe9f3;border-color:#8a0054}\
.banner.ok{background:#e6f4ea;border-color:#1e8e3e}\
.nudge{color:#5f6368;margin-top:4px}\
code{font:13px ui-monospace,'DejaVu Sans Mono',monospace;background:#f1f3f4;padding:0 3px;border-radius:3px}\
.stats{list-style:none;display:flex;gap:22px;padding:0;margin:0 0 12px}\
#timeline{display:block;border:0;margin:0}\
.lanebg{fill:#fafafa}.lanebg.alt{fill:#f3f4f6}\
.task{font:600 13px sans-serif;fill:#202124}.sub{font:12px sans-serif;fill:#5f6368}\
.axis{stroke:#9aa0a6;stroke-width:1}\
.tick{font:10px sans-serif;fill:#5f6368;text-anchor:middle}\
.more{font:10px sans-serif;fill:#5f6368;text-anchor:middle}\
.haltlabel{font:600 12px sans-serif;fill:#fff}\
.xlabel{font:11px sans-serif;fill:#5f6368}.empty{font:14px sans-serif;fill:#5f6368}\
.legend{display:flex;gap:18px;margin:10px 0;color:#5f6368;font-size:12px}\
.legend i{display:inline-block;width:11px;height:11px;margin-right:5px;vertical-align:-1px}\
table{border-collapse:collapse;width:100%;margin-top:8px;font-size:13px}\
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e8eaed;vertical-align:top}\
tr.h td{background:#fbe9f3}\
.note{color:#5f6368;font-size:12px}\
footer{margin-top:16px;color:#9aa0a6;font-size:11px}";

const LEGEND: &str = "<div class=\"legend\">\
<span><i style=\"background:#1e8e3e\"></i>tool call, succeeded</span>\
<span><i style=\"background:#d93025\"></i>failed / error</span>\
<span><i style=\"background:#9aa0a6\"></i>no result</span>\
<span><i style=\"background:#4a78c2;border-radius:6px\"></i>model call without tools</span>\
<span><i style=\"background:#34a853;height:3px\"></i>progress</span>\
<span><i style=\"background:#f4b400\"></i>warning</span>\
<span><i style=\"background:#8a0054\"></i>halt</span></div>\n";

#[cfg(test)]
mod tests {
    use super::*;
    use agentbreaker::{ManualClock, Monitor, MonitorConfig};
    use serde_json::json;

    fn stuck() -> Source {
        let m = Monitor::with_clock(
            MonitorConfig::from_json(&json!({"stagnation": {"repeatThreshold": 4},
                                             "warnBefore": 1}))
            .unwrap(),
            ManualClock::shared(0),
        )
        .unwrap();
        let mut trace = Trace::default();
        let mut halt = None;
        for i in 0..5u64 {
            for e in [
                json!({"type": "assistant", "text": "again <b>"}),
                json!({"type": "tool_use", "name": "Bash<script>", "id": format!("t{i}"),
                       "input": {"command": "ls"}}),
                json!({"type": "tool_result", "id": format!("t{i}"), "ok": false, "text": "x"}),
            ] {
                let v = m.observe(&e).unwrap();
                trace.event(i * 1000, &e, &v);
                if v.is_halt() && halt.is_none() {
                    halt = Some(v);
                }
            }
        }
        Source {
            name: "stuck & <co>".into(),
            kind: "recording",
            trace,
            halt,
            warnings_total: 1,
            facts: vec![],
        }
    }

    #[test]
    fn the_page_is_self_contained_escaped_and_marks_the_halt() {
        let html = render(&stuck());
        assert!(html.contains("id=\"halt-marker\" data-step=\"4\" data-reason=\"repeated_step\""));
        assert!(html.contains("data-outcome=\"halted\""));
        assert!(html.contains(HALT_COLOR));
        assert!(!html.contains("<script"), "escaped");
        assert!(!html.contains("http://") || !html.contains("src=\"http"));
        assert!(!html.contains("<link") && !html.contains("@import") && !html.contains("url("));
        assert!(html.contains("Bash&lt;script&gt;"));
        assert!(html.contains("stuck &amp; &lt;co&gt;"));
        // The halt color is the marker's only.
        assert_eq!(html.matches(HALT_COLOR).count(), 2, "bar and label");
    }

    #[test]
    fn a_healthy_page_has_no_marker_and_an_empty_one_renders() {
        let mut src = stuck();
        src.trace.entries.retain(|e| e.kind != Kind::Halt);
        src.halt = None;
        let html = render(&src);
        assert!(!html.contains("halt-marker"));
        assert!(html.contains("data-outcome=\"ran\""));
        src.trace = Trace::default();
        assert!(render(&src).contains("nothing was recorded"));
    }
}
