//! `agentbreaker eval`: how many stuck agent runs the breakers halt, how early, and how many
//! healthy runs they halt by mistake, on trajectories in the normalized schema of
//! `the evaluation set (docs/detection.md)` (one JSON object per line, gzipped or not) with a labels CSV.
//!
//! The adapter from a trajectory to the breakers (documented in `docs/detection.md`):
//! - one **step** (one model call and what it triggered) is one iteration;
//! - its **output** is the assistant text, or, when the text is empty, its tool calls and a
//!   fingerprint of their results — an empty text alone never looks like a loop;
//! - **tool calls** are BudgetBreaker `tool_use` events; per-step **usage** is spend (run totals,
//!   `cumulative: true`, cannot be placed in time and are skipped);
//! - **errors** are failed `tool_result`s (`ok: false`) and `error` events: each goes to the
//!   StagnationBreaker's error counts; a step whose results all failed is a failed step for the
//!   FailureBreaker and the step detectors;
//! - **progress** is `files_changed` (files) and `tests` (tests passing);
//! - **time** is the step's first timestamp when the run has them, else one second per step.
//!
//! A run counts as **halted** when a breaker stops it (a budget halt, the StagnationBreaker or the
//! FailureBreaker OPEN) before its last step.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use agentbreaker::{
    ManualClock, Monitor, MonitorConfig, Usage, Verdict, VerdictAction, fingerprint,
};
use serde_json::{Map, Value, json};

use crate::settings::Settings;

mod peers;
pub use peers::{GeminiCli, OpenHands, OpenHandsVersion, ReadmeRules};

/// One tool call of a step.
#[derive(Debug, Clone)]
struct Call {
    name: String,
    args: String,
    id: Option<String>,
}

/// One step of a trajectory.
#[derive(Debug, Clone, Default)]
struct Step {
    number: u64,
    ts_ms: Option<u64>,
    text: String,
    calls: Vec<Call>,
    /// (ok, text) of each tool result.
    results: Vec<(Option<bool>, String)>,
    /// The call id each result names, if any.
    result_ids: Vec<Option<String>>,
    /// The SHA-1 of each result's full text (the text itself is cut at 8000 characters).
    result_sha1: Vec<Option<String>>,
    /// The exit code of each result, when the source recorded one.
    result_exit: Vec<Option<i64>>,
    errors: Vec<String>,
    files_changed: u64,
    /// The paths changed.
    paths: Vec<String>,
    tests_passed: Option<u64>,
    usage: Vec<Usage>,
    /// A wrapper restarted the agent before this step (a new prompt).
    restart: bool,
}

impl Step {
    fn error_texts(&self) -> impl Iterator<Item = &str> {
        self.results
            .iter()
            .filter(|(ok, _)| *ok == Some(false))
            .map(|(_, t)| t.as_str())
            .chain(self.errors.iter().map(String::as_str))
    }

    fn action(&self) -> String {
        if self.calls.is_empty() {
            return format!("say: {}", self.text);
        }
        self.calls
            .iter()
            .map(|c| format!("{}: {}", c.name, c.args))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The step's output for the OutputLoop rule: its text, or its calls and result
    /// fingerprints when it has no text.
    fn output(&self) -> String {
        if !self.text.trim().is_empty() {
            return self.text.clone();
        }
        let results: Vec<String> = self
            .results
            .iter()
            .map(|(_, t)| fingerprint(t, agentbreaker::ErrorMatch::Normalized))
            .collect();
        format!("{}\n{}", self.action(), results.join("\n"))
    }
}

/// One trajectory.
#[derive(Debug, Clone)]
pub struct Run {
    id: String,
    source: String,
    steps: Vec<Step>,
}

/// A label from `labels.csv`.
#[derive(Debug, Clone)]
pub struct Label {
    label: String,
    onset_step: Option<u64>,
}

/// Where a run was halted.
#[derive(Debug, Clone)]
struct Halted {
    step: u64,
    by: String,
}

fn read_text(path: &Path) -> std::io::Result<Box<dyn BufRead>> {
    let file = std::fs::File::open(path)?;
    if path.extension().is_some_and(|e| e == "gz") {
        Ok(Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(
            file,
        ))))
    } else {
        Ok(Box::new(BufReader::new(file)))
    }
}

fn parse_ts(v: Option<&Value>) -> Option<u64> {
    let s = v?.as_str()?;
    // Timestamps without an offset are UTC.
    let t = s
        .parse::<jiff::Timestamp>()
        .ok()
        .or_else(|| format!("{s}Z").parse::<jiff::Timestamp>().ok())?;
    u64::try_from(t.as_millisecond()).ok()
}

fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Reads one trajectory file.
pub fn read_run(path: &Path) -> Result<Run, String> {
    let reader = read_text(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut id = path
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .trim_end_matches(".gz")
                .trim_end_matches(".jsonl")
                .to_string()
        })
        .unwrap_or_default();
    let mut source = id.split("__").next().unwrap_or("").to_string();
    let mut steps: BTreeMap<u64, Step> = BTreeMap::new();
    for line in reader.lines() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        let Ok(Value::Object(o)) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind == "meta" {
            if let Some(i) = o.get("id").and_then(Value::as_str) {
                id = i.to_string();
                source = id.split("__").next().unwrap_or("").to_string();
            }
            continue;
        }
        let number = o.get("step").and_then(Value::as_u64).unwrap_or(0);
        if number == 0 {
            continue;
        }
        let step = steps.entry(number).or_insert_with(|| Step {
            number,
            ..Step::default()
        });
        if step.ts_ms.is_none() {
            step.ts_ms = parse_ts(o.get("ts"));
        }
        add_event(step, kind, &o);
    }
    Ok(Run {
        id,
        source,
        steps: steps.into_values().collect(),
    })
}

fn add_event(step: &mut Step, kind: &str, o: &Map<String, Value>) {
    let count = |k: &str| o.get(k).and_then(Value::as_u64).unwrap_or(0);
    match kind {
        "assistant" => {
            let t = text_of(o.get("text"));
            if !t.is_empty() {
                if !step.text.is_empty() {
                    step.text.push('\n');
                }
                step.text.push_str(&t);
            }
        }
        "tool_call" => step.calls.push(Call {
            name: text_of(o.get("name")),
            args: match o.get("args") {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => String::new(),
            },
            id: o.get("call_id").and_then(Value::as_str).map(str::to_string),
        }),
        "tool_result" => {
            step.results
                .push((o.get("ok").and_then(Value::as_bool), text_of(o.get("text"))));
            step.result_ids
                .push(o.get("call_id").and_then(Value::as_str).map(str::to_string));
            step.result_sha1.push(
                o.get("text_sha1")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            );
            step.result_exit
                .push(o.get("exit_code").and_then(Value::as_i64));
        }
        "iteration_start" => step.restart = true,
        "error" => step.errors.push(text_of(o.get("text"))),
        "files_changed" => {
            let paths: Vec<String> = o
                .get("paths")
                .and_then(Value::as_array)
                .map(|p| {
                    p.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            step.files_changed += paths.len().max(1) as u64;
            step.paths.extend(paths);
        }
        "tests" => step.tests_passed = o.get("passed").and_then(Value::as_u64),
        "usage" if o.get("cumulative").and_then(Value::as_bool) != Some(true) => {
            step.usage.push(Usage {
                input_tokens: count("input_tokens"),
                output_tokens: count("output_tokens"),
                cache_creation_input_tokens: count("cache_creation_tokens"),
                cache_read_input_tokens: count("cache_read_tokens"),
            });
        }
        _ => {}
    }
}

/// Why the trajectories could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunsError {
    /// A file or the directory could not be read (exit 74).
    Io(String),
    /// Two files hold the same run (`X.jsonl` and `X.jsonl.gz`, or the same `meta` id): counting
    /// it twice would skew every figure (exit 65).
    Duplicate(String),
}

impl std::fmt::Display for RunsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunsError::Io(e) | RunsError::Duplicate(e) => f.write_str(e),
        }
    }
}

/// Reads every `*.jsonl` / `*.jsonl.gz` in `dir`, sorted by name. Two files of one run id are
/// refused, naming the id and both files.
pub fn read_runs(dir: &Path) -> Result<Vec<Run>, RunsError> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| RunsError::Io(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.to_string_lossy();
            n.ends_with(".jsonl") || n.ends_with(".jsonl.gz")
        })
        .collect();
    paths.sort();
    let mut runs = Vec::with_capacity(paths.len());
    let mut seen: BTreeMap<String, &PathBuf> = BTreeMap::new();
    for p in &paths {
        let run = read_run(p).map_err(RunsError::Io)?;
        if let Some(first) = seen.insert(run.id.clone(), p) {
            return Err(RunsError::Duplicate(format!(
                "run {:?} is in two files, {} and {}: keep one of them",
                run.id,
                first.display(),
                p.display()
            )));
        }
        runs.push(run);
    }
    Ok(runs)
}

/// Reads `labels.csv` (`id`, `label`, `onset_step` columns).
pub fn read_labels(path: &Path) -> Result<BTreeMap<String, Label>, String> {
    let mut reader =
        csv::Reader::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let headers = reader
        .headers()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("{}: no {name:?} column", path.display()))
    };
    let (id_col, label_col, onset_col) = (col("id")?, col("label")?, col("onset_step")?);
    let mut labels = BTreeMap::new();
    for record in reader.records() {
        let record = record.map_err(|e| format!("{}: {e}", path.display()))?;
        labels.insert(
            record.get(id_col).unwrap_or("").to_string(),
            Label {
                label: record.get(label_col).unwrap_or("").to_string(),
                onset_step: record.get(onset_col).and_then(|s| s.parse().ok()),
            },
        );
    }
    Ok(labels)
}

/// What one detector did on one run: where it halted it (if it did), and its warnings.
#[derive(Debug, Clone, Default)]
pub struct RunOutcome {
    halt: Option<Halted>,
    /// The step of the first warning (a nudge the agent would have seen).
    first_warning: Option<u64>,
    /// Warnings given before the halt (or the end).
    warnings: u64,
    /// The rules that warned, once each.
    warned_by: Vec<String>,
}

/// A way to watch a run: our Monitor under a configuration, or a peer's detector.
pub trait Detector: Sync {
    /// Replays one run.
    fn replay(&self, run: &Run) -> Result<RunOutcome, String>;
}

/// The Monitor under a configuration: what every user of agentbreaker gets.
#[derive(Debug, Clone)]
pub struct MonitorDetector {
    config: MonitorConfig,
}

impl MonitorDetector {
    /// The Monitor configured by `settings`.
    pub fn new(settings: &Settings) -> Self {
        MonitorDetector {
            config: settings.monitor_config(),
        }
    }

    /// The Monitor under `config`.
    pub fn with_config(config: MonitorConfig) -> Self {
        MonitorDetector { config }
    }
}

impl Detector for MonitorDetector {
    fn replay(&self, run: &Run) -> Result<RunOutcome, String> {
        replay_run(run, &self.config)
    }
}

/// The step's content digest for a file change: its paths and its calls' arguments, so that the
/// same edit applied again (the same resulting content) gives the same digest.
fn edit_digest(step: &Step, paths: &[String]) -> String {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    for p in paths {
        h.write(p.as_bytes());
        h.write_u8(0);
    }
    for c in &step.calls {
        h.write(c.name.as_bytes());
        h.write_u8(0);
        h.write(c.args.as_bytes());
        h.write_u8(0);
    }
    format!("{:016x}", h.finish())
}

/// A trajectory step as Monitor events: the model call's text, its usage, its tool calls, its
/// errors, its progress, then the results (the last result completes the step).
fn step_events(step: &Step) -> Vec<Value> {
    let mut events = vec![json!({"type": "assistant", "text": step.text})];
    for u in &step.usage {
        events.push(json!({"type": "usage", "usage": {
            "input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
            "cache_creation_input_tokens": u.cache_creation_input_tokens,
            "cache_read_input_tokens": u.cache_read_input_tokens}}));
    }
    for (i, c) in step.calls.iter().enumerate() {
        let input = serde_json::from_str::<Value>(&c.args)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({"args": c.args}));
        events.push(json!({"type": "tool_use", "name": if c.name.is_empty() { "tool" } else { &c.name },
                           "input": input, "id": c.id.clone().unwrap_or_else(|| format!("call-{i}"))}));
    }
    for e in &step.errors {
        events.push(json!({"type": "error", "text": e}));
    }
    if step.files_changed > 0 || step.tests_passed.is_some() {
        let mut p = json!({"type": "progress", "files": step.files_changed});
        if step.files_changed > 0 {
            p["digest"] = json!(edit_digest(step, &step.paths));
        }
        if let Some(t) = step.tests_passed {
            p["testsPassing"] = json!(t);
        }
        events.push(p);
    }
    for (i, (ok, text)) in step.results.iter().enumerate() {
        let mut r = json!({"type": "tool_result", "ok": ok.unwrap_or(true), "text": text});
        match step.result_ids.get(i).cloned().flatten() {
            Some(id) => r["id"] = json!(id),
            None if i < step.calls.len() && step.calls[i].id.is_none() => {
                r["id"] = json!(format!("call-{i}"))
            }
            None => {}
        }
        events.push(r);
    }
    events
}

/// Runs one trajectory through a fresh Monitor; where it was halted, and its warnings.
fn replay_run(run: &Run, config: &MonitorConfig) -> Result<RunOutcome, String> {
    let clock = ManualClock::shared(0);
    let monitor = Monitor::with_clock(config.clone(), clock.clone()).map_err(|e| e.to_string())?;
    let first_ts = run.steps.iter().find_map(|s| s.ts_ms);
    let mut outcome = RunOutcome::default();
    let note = |v: &Verdict, step: u64, outcome: &mut RunOutcome| -> bool {
        match v.action {
            VerdictAction::Halt => {
                outcome.halt = Some(Halted {
                    step,
                    by: v.reason.map_or("halt", |r| r.slug()).to_string(),
                });
                true
            }
            VerdictAction::Warn => {
                outcome.warnings += 1;
                outcome.first_warning.get_or_insert(step);
                let rule = v.reason.map_or("warn", |r| r.slug()).to_string();
                if !outcome.warned_by.contains(&rule) {
                    outcome.warned_by.push(rule);
                }
                false
            }
            VerdictAction::Continue => false,
        }
    };
    for (i, step) in run.steps.iter().enumerate() {
        let now = match (step.ts_ms, first_ts) {
            (Some(ts), Some(first)) => ts.saturating_sub(first).max(clock.now()),
            _ => (i as u64 + 1) * 1000,
        };
        // Time passes up to the step with a tick every second, as a live supervisor would.
        for v in crate::timeline::walk(&clock, &monitor, now) {
            if note(&v, step.number, &mut outcome) {
                return Ok(outcome);
            }
        }
        for event in step_events(step) {
            // An event the Monitor refuses would be refused live too: it changes nothing.
            let Ok(v) = monitor.observe(&event) else {
                continue;
            };
            if note(&v, step.number, &mut outcome) {
                return Ok(outcome);
            }
        }
    }
    Ok(outcome)
}

/// The figures for one configuration.
#[derive(Debug, Clone)]
pub struct Figures {
    /// label → (total, halted).
    counts: BTreeMap<String, (u64, u64)>,
    /// source → label → (total, halted).
    by_source: BTreeMap<String, BTreeMap<String, (u64, u64)>>,
    /// Steps between onset and halt for each halted stuck run.
    after_onset: Vec<i64>,
    /// Steps the halted stuck runs went on to spend.
    steps_saved: u64,
    /// Steps the halted healthy runs would have lost.
    healthy_steps_cut: u64,
    /// What halted the runs, by label.
    halted_by: BTreeMap<String, BTreeMap<String, u64>>,
    /// Runs without a label.
    unlabelled: u64,
    /// label → (runs warned before any halt, warnings given).
    warned: BTreeMap<String, (u64, u64)>,
    /// label → rule → runs it warned.
    warned_by: BTreeMap<String, BTreeMap<String, u64>>,
    /// Steps between the first warning and the onset, for stuck runs warned (negative: before).
    warn_after_onset: Vec<i64>,
    /// Every halted run: (label, id, step halted, last step, why).
    pub halts: Vec<(String, String, u64, u64, String)>,
}

impl Figures {
    fn get(&self, label: &str) -> (u64, u64) {
        self.counts.get(label).copied().unwrap_or((0, 0))
    }

    /// Halted share of a label, in percent.
    pub fn percent(&self, label: &str) -> f64 {
        let (total, halted) = self.get(label);
        if total == 0 {
            0.0
        } else {
            halted as f64 * 100.0 / total as f64
        }
    }

    /// The median of steps between onset and halt.
    pub fn median_after_onset(&self) -> Option<f64> {
        median(&self.after_onset)
    }

    /// Runs of `label` that got at least one warning, and the warnings given.
    pub fn warned(&self, label: &str) -> (u64, u64) {
        self.warned.get(label).copied().unwrap_or((0, 0))
    }

    /// The median of steps between onset and the first warning on stuck runs.
    pub fn median_warning_after_onset(&self) -> Option<f64> {
        median(&self.warn_after_onset)
    }

    /// The `--json` document.
    pub fn to_json(&self) -> Value {
        let pair = |label: &str| {
            let (total, halted) = self.get(label);
            json!({"total": total, "halted": halted})
        };
        let mut stuck = pair("stuck");
        stuck["medianStepsAfterOnset"] = json!(self.median_after_onset());
        let by_source: BTreeMap<&String, Value> = self
            .by_source
            .iter()
            .map(|(source, labels)| {
                let m: BTreeMap<String, Value> = labels
                    .iter()
                    .map(|(l, (t, h))| (camel(l), json!({"total": t, "halted": h})))
                    .collect();
                (source, json!(m))
            })
            .collect();
        let halted_by: BTreeMap<String, &BTreeMap<String, u64>> =
            self.halted_by.iter().map(|(l, m)| (camel(l), m)).collect();
        let warned: BTreeMap<String, Value> = self
            .warned
            .iter()
            .map(|(l, (runs, warnings))| (camel(l), json!({"runs": runs, "warnings": warnings})))
            .collect();
        json!({
            "stuck": stuck,
            "warned": warned,
            "warnedBy": self.warned_by.iter().map(|(l, m)| (camel(l), m)).collect::<BTreeMap<_, _>>(),
            "medianFirstWarningAfterOnset": median(&self.warn_after_onset),
            "healthy": pair("healthy"),
            "loopRecovered": pair("loop_recovered"),
            "ambiguous": pair("ambiguous"),
            "stepsSaved": self.steps_saved,
            "healthyStepsCut": self.healthy_steps_cut,
            "bySource": by_source,
            "haltedBy": halted_by,
            "unlabelled": self.unlabelled,
        })
    }
}

fn median(v: &[i64]) -> Option<f64> {
    let mut v = v.to_vec();
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0
    })
}

fn camel(label: &str) -> String {
    match label {
        "loop_recovered" => "loopRecovered".to_string(),
        other => other.to_string(),
    }
}

/// Evaluates one configuration of the Monitor over every run.
pub fn evaluate(
    runs: &[Run],
    labels: &BTreeMap<String, Label>,
    settings: &Settings,
) -> Result<Figures, String> {
    evaluate_with(runs, labels, &MonitorDetector::new(settings))
}

/// Evaluates one detector over every run.
pub fn evaluate_with(
    runs: &[Run],
    labels: &BTreeMap<String, Label>,
    detector: &dyn Detector,
) -> Result<Figures, String> {
    let mut f = Figures {
        counts: BTreeMap::new(),
        by_source: BTreeMap::new(),
        after_onset: Vec::new(),
        steps_saved: 0,
        healthy_steps_cut: 0,
        halted_by: BTreeMap::new(),
        unlabelled: 0,
        warned: BTreeMap::new(),
        warned_by: BTreeMap::new(),
        warn_after_onset: Vec::new(),
        halts: Vec::new(),
    };
    for run in runs {
        let Some(label) = labels.get(&run.id) else {
            f.unlabelled += 1;
            continue;
        };
        let last = run.steps.last().map_or(0, |s| s.number);
        let outcome = detector.replay(run)?;
        if outcome.warnings > 0 {
            let w = f.warned.entry(label.label.clone()).or_default();
            w.0 += 1;
            w.1 += outcome.warnings;
            for rule in &outcome.warned_by {
                *f.warned_by
                    .entry(label.label.clone())
                    .or_default()
                    .entry(rule.clone())
                    .or_default() += 1;
            }
            if let (Some(first), Some(onset), "stuck") = (
                outcome.first_warning,
                label.onset_step,
                label.label.as_str(),
            ) {
                f.warn_after_onset.push(first as i64 - onset as i64);
            }
        }
        let halt = outcome.halt.filter(|h| h.step < last);
        let halted = u64::from(halt.is_some());
        let entry = f.counts.entry(label.label.clone()).or_default();
        entry.0 += 1;
        entry.1 += halted;
        let src = f
            .by_source
            .entry(run.source.clone())
            .or_default()
            .entry(label.label.clone())
            .or_default();
        src.0 += 1;
        src.1 += halted;
        if let Some(h) = halt {
            f.halts.push((
                label.label.clone(),
                run.id.clone(),
                h.step,
                last,
                h.by.clone(),
            ));
            let rule = h.by.clone();
            *f.halted_by
                .entry(label.label.clone())
                .or_default()
                .entry(rule)
                .or_default() += 1;
            match label.label.as_str() {
                "stuck" => {
                    f.steps_saved += last - h.step;
                    if let Some(onset) = label.onset_step {
                        f.after_onset.push(h.step as i64 - onset as i64);
                    }
                }
                "healthy" => f.healthy_steps_cut += last - h.step,
                _ => {}
            }
        }
    }
    Ok(f)
}

/// One row of a comparison or sweep table.
pub fn row(name: &str, f: &Figures) -> String {
    let (st, sh) = f.get("stuck");
    let (ht, hh) = f.get("healthy");
    let (lt, lh) = f.get("loop_recovered");
    let (hw, _) = f.warned("healthy");
    format!(
        "{name:<34} {:>5.1}% ({sh:>3}/{st:<3}) {:>6} {:>5.1}% ({hh:>3}/{ht:<3}) {:>5.1}% ({lh:>2}/{lt:<2}) {:>6} {:>5.1}% ({hw:>3}) {:>6}",
        f.percent("stuck"),
        f.median_after_onset()
            .map_or("-".to_string(), |m| format!("{m:.1}")),
        f.percent("healthy"),
        f.percent("loop_recovered"),
        f.steps_saved,
        if ht == 0 {
            0.0
        } else {
            hw as f64 * 100.0 / ht as f64
        },
        f.median_warning_after_onset()
            .map_or("-".to_string(), |m| format!("{m:.1}")),
    )
}

/// The header of [`row`] tables.
pub fn header() -> String {
    format!(
        "{:<34} {:>15} {:>6} {:>15} {:>13} {:>6} {:>12} {:>6}",
        "configuration",
        "stuck halted",
        "median",
        "healthy halted",
        "recovered",
        "saved",
        "healthy nudged",
        "1st nudge"
    )
}

/// The detectors `--compare` measures beside the evaluated configuration: the seed defaults
/// (through the Monitor), the eval README's two simple rule sets, OpenHands' two stuck detectors
/// and Gemini CLI's loop detection.
pub fn comparisons() -> Vec<(String, Box<dyn Detector>)> {
    vec![
        (
            "seed defaults".to_string(),
            Box::new(MonitorDetector::new(&Settings::defaults())),
        ),
        (
            "README: same error x5, 3 outputs, 20 steps".to_string(),
            Box::new(ReadmeRules { all_three: true }),
        ),
        (
            "README: same error x5 alone".to_string(),
            Box::new(ReadmeRules { all_three: false }),
        ),
        (
            "OpenHands 0.x stuck detector".to_string(),
            Box::new(OpenHands {
                version: OpenHandsVersion::V0,
            }),
        ),
        (
            "OpenHands agent-sdk stuck detector".to_string(),
            Box::new(OpenHands {
                version: OpenHandsVersion::Sdk,
            }),
        ),
        ("Gemini CLI loop detection".to_string(), Box::new(GeminiCli)),
    ]
}

/// One point of the sweep: a setting and its figures.
#[derive(Debug, Clone)]
pub struct SweepPoint {
    /// What was set.
    pub label: String,
    /// Stuck halted, percent.
    pub stuck: f64,
    /// Healthy halted, percent.
    pub healthy: f64,
    /// The median steps after onset.
    pub median: Option<f64>,
    /// Whether this is the configuration being evaluated.
    pub current: bool,
}

/// Varies the main thresholds of `base` one family at a time.
pub fn sweep(
    runs: &[Run],
    labels: &BTreeMap<String, Label>,
    base: &Settings,
) -> Result<Vec<SweepPoint>, String> {
    type Knob = (&'static str, fn(&mut Settings, u32), &'static [u32]);
    const COUNTS: &[u32] = &[3, 4, 5, 6, 8, 10];
    let knobs: [Knob; 6] = [
        (
            "repeatThreshold",
            |s, v| s.stagnation.repeat_threshold = v,
            COUNTS,
        ),
        (
            "failStreakThreshold",
            |s, v| s.stagnation.fail_streak_threshold = v,
            COUNTS,
        ),
        ("failWindow", |s, v| s.stagnation.fail_window = v, COUNTS),
        (
            "sameErrorThreshold",
            |s, v| s.stagnation.same_error_threshold = v,
            COUNTS,
        ),
        (
            "noProgressThreshold",
            |s, v| s.stagnation.no_progress_threshold = v,
            &[10, 12, 15, 20, 30],
        ),
        (
            "noProgressDistinctActions",
            |s, v| s.stagnation.no_progress_distinct_actions = v,
            &[1, 2, 3, 4, 5],
        ),
    ];
    let mut points = Vec::new();
    let f = evaluate(runs, labels, base)?;
    points.push(point("current", &f, true));
    for (name, set, values) in knobs {
        for &v in values {
            let mut s = base.clone();
            set(&mut s, v);
            if s.stagnation.validate().is_err() {
                continue;
            }
            let f = evaluate(runs, labels, &s)?;
            points.push(point(&format!("{name}={v}"), &f, false));
        }
    }
    Ok(points)
}

fn point(label: &str, f: &Figures, current: bool) -> SweepPoint {
    SweepPoint {
        label: label.to_string(),
        stuck: f.percent("stuck"),
        healthy: f.percent("healthy"),
        median: f.median_after_onset(),
        current,
    }
}

/// A round step for about five axis ticks over `0..max`.
fn tick_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(1e-9);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude)
}

/// The trade-off curve as an SVG: healthy runs halted (x) against stuck runs halted (y). Points
/// that coincide share one label.
pub fn plot_svg(points: &[SweepPoint]) -> String {
    let (w, h, m) = (760.0, 500.0, 64.0);
    let x_step = tick_step(points.iter().map(|p| p.healthy).fold(1.0_f64, f64::max));
    let max_x = (points.iter().map(|p| p.healthy).fold(1.0_f64, f64::max) / x_step).ceil() * x_step;
    let min_y = (points.iter().map(|p| p.stuck).fold(100.0_f64, f64::min) / 10.0).floor() * 10.0;
    let min_y = min_y.min(90.0);
    let x = |v: f64| m + (w - 2.0 * m) * v / max_x;
    let y = |v: f64| h - m - (h - 2.0 * m) * (v - min_y) / (100.0 - min_y);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"26\" text-anchor=\"middle\" font-size=\"14\">stuck runs halted vs \
         healthy runs halted (red: the evaluated configuration)</text>\n\
         <line x1=\"{m}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
         <line x1=\"{m}\" y1=\"{m}\" x2=\"{m}\" y2=\"{}\" stroke=\"black\"/>\n\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">healthy runs halted (%)</text>\n\
         <text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">stuck \
         runs halted (%)</text>\n",
        w / 2.0,
        h - m,
        w - m,
        h - m,
        h - m,
        w / 2.0,
        h - 18.0,
        h / 2.0,
        h / 2.0
    );
    let mut v = 0.0;
    while v <= max_x + 1e-9 {
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{v}</text>\n",
            x(v),
            h - m + 16.0
        ));
        v += x_step;
    }
    let mut v = min_y;
    while v <= 100.0 + 1e-9 {
        svg.push_str(&format!(
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v}</text>\n",
            m - 6.0,
            y(v) + 4.0
        ));
        v += 2.0;
    }
    // Group coinciding points under one label.
    let mut groups: Vec<(f64, f64, bool, Vec<&str>)> = Vec::new();
    for p in points {
        match groups
            .iter_mut()
            .find(|g| (g.0 - p.healthy).abs() < 1e-6 && (g.1 - p.stuck).abs() < 1e-6)
        {
            Some(g) => {
                g.2 |= p.current;
                g.3.push(&p.label);
            }
            None => groups.push((p.healthy, p.stuck, p.current, vec![&p.label])),
        }
    }
    for (hx, sy, current, names) in &groups {
        let (color, r) = if *current {
            ("#d62728", 6)
        } else {
            ("#1f77b4", 4)
        };
        let label = if names.len() > 3 {
            format!("{} (+{} more)", names[..3].join(", "), names.len() - 3)
        } else {
            names.join(", ")
        };
        svg.push_str(&format!(
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{r}\" fill=\"{color}\"><title>{} — stuck \
             {sy:.1}%, healthy {hx:.1}%</title></circle>\n\
             <text x=\"{lx:.1}\" y=\"{ly:.1}\" font-size=\"9\" \
             transform=\"rotate(-35 {lx:.1} {ly:.1})\">{label}</text>\n",
            x(*hx),
            y(*sy),
            names.join(", "),
            lx = x(*hx) + 5.0,
            ly = y(*sy) - 6.0,
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_of(lines: &[Value]) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("src__x.jsonl");
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, text).unwrap();
        read_run(&path).unwrap()
    }

    fn failing_step(n: u64, action: &str) -> Vec<Value> {
        vec![
            json!({"step": n, "kind": "tool_call", "name": "bash", "args": action}),
            json!({"step": n, "kind": "tool_result", "name": "bash", "ok": false,
                   "text": "bash: DISCUSSION: command not found"}),
        ]
    }

    #[test]
    fn a_repeating_failure_is_halted_by_the_coding_agent_profile() {
        let mut lines = vec![json!({"step": 0, "kind": "meta", "id": "src__x"})];
        for n in 1..=8 {
            lines.extend(failing_step(n, "DISCUSSION"));
        }
        let run = run_of(&lines);
        assert_eq!(run.steps.len(), 8);
        let s = Settings::from_profile("coding-agent").unwrap();
        let out = MonitorDetector::new(&s).replay(&run).unwrap();
        let h = out.halt.unwrap();
        assert_eq!(h.step, 5);
        assert_eq!(h.by, "repeated_step");
        assert_eq!(
            out.first_warning,
            Some(3),
            "warned two steps before the halt"
        );
    }

    #[test]
    fn empty_text_alone_is_not_a_loop() {
        let mut lines = vec![json!({"step": 0, "kind": "meta", "id": "src__x"})];
        for n in 1..=10u64 {
            lines.push(json!({"step": n, "kind": "assistant", "text": ""}));
            lines.push(json!({"step": n, "kind": "tool_call", "name": "open", "args": format!("file{n}.py")}));
            lines.push(json!({"step": n, "kind": "tool_result", "name": "open", "ok": true, "text": format!("contents {n} {}", "x ".repeat(n as usize))}));
        }
        let run = run_of(&lines);
        let s = Settings::from_profile("coding-agent").unwrap();
        let out = MonitorDetector::new(&s).replay(&run).unwrap();
        assert!(out.halt.is_none());
        assert_eq!(out.warnings, 0);
    }

    #[test]
    fn figures_count_only_halts_before_the_last_step() {
        let mut lines = vec![json!({"step": 0, "kind": "meta", "id": "src__x"})];
        for n in 1..=5 {
            lines.extend(failing_step(n, "DISCUSSION"));
        }
        let runs = vec![run_of(&lines)];
        let labels = BTreeMap::from([(
            "src__x".to_string(),
            Label {
                label: "stuck".into(),
                onset_step: Some(1),
            },
        )]);
        let s = Settings::from_profile("coding-agent").unwrap();
        // Halted at step 5, which is the last step: not counted.
        let f = evaluate(&runs, &labels, &s).unwrap();
        assert_eq!(f.get("stuck"), (1, 0));
    }
}
