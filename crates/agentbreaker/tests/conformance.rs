//! The Rust runner of the shared conformance suite (`tests/conformance/README.md`): one named test
//! per scenario file, each op mapped onto the crate's public Rust API.
//!
//! `AGENTBREAKER_CONFORMANCE_DIR` names the suite directory (default: the repository's
//! `tests/conformance`).
//!
//! `AGENTBREAKER_CONFORMANCE_STORE` set to a Redis URL runs every `failure` scenario with its state
//! in that store (contract §12), each scenario on a key prefix of its own; after the last step a second
//! breaker on the same key must see the same status, and the store must have stayed reachable.
//! It also runs the `monitor` scenarios with their budget counters in the store (a single
//! store-backed Monitor must answer exactly as a local one), except those that make the monitor
//! forget what the store keeps: `reset`, `restore`, and a task closed by its `done`/`error`
//! heartbeat and opened again (docs/distributed.md, "A Monitor's budgets").

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::large_enum_variant)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agentbreaker::{
    AgentStep, BudgetBreaker, BudgetConfig, CallError, Error, ExitStrategy, FailureBreaker,
    FailureConfig, IterationMetrics, Listener, Loop, LoopConfig, ManualClock, Monitor,
    StagnationBreaker, StagnationConfig, State, StrategyConfig, analyze, config_from_env,
};
use libtest_mimic::{Arguments, Failed, Trial};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// In a `restore` step, `args.snapshot` may be this string: the result of the scenario's latest
/// `snapshot` step (README, "Snapshots within a scenario").
const LAST_SNAPSHOT: &str = "$last_snapshot";

/// Steps whose wrong-typed argument cannot even be passed to the Rust API.
static TYPE_CHECKED: AtomicUsize = AtomicUsize::new(0);

/// Steps whose event nests more than `interop::MAX_DEPTH` containers, refused by serde_json's
/// parser: a `Value` has no depth limit of its own, a Rust program gets such an event from JSON
/// text only (as the C binding and the CLI do), and the parser refuses it.
static PARSER_CHECKED: AtomicUsize = AtomicUsize::new(0);

fn suite_dir() -> PathBuf {
    match std::env::var_os("AGENTBREAKER_CONFORMANCE_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance"),
    }
}

fn scenario_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            scenario_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json")
            && path.file_name().is_some_and(|n| n != "schema.json")
        {
            out.push(path);
        }
    }
}

fn main() {
    let args = Arguments::from_args();
    let dir = suite_dir();
    let mut files = Vec::new();
    scenario_files(&dir, &mut files);
    assert!(!files.is_empty(), "no scenarios under {}", dir.display());
    let trials: Vec<Trial> = files
        .into_iter()
        .map(|path| {
            let name = path
                .strip_prefix(&dir)
                .unwrap()
                .with_extension("")
                .to_string_lossy()
                .replace('\\', "/");
            Trial::test(name, move || run_file(&path).map_err(Failed::from))
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    let checked = TYPE_CHECKED.load(Ordering::Relaxed);
    if checked > 0 {
        eprintln!(
            "note: {checked} wrong-type steps were checked by the Rust type system \
             (the API cannot be called with such a value)"
        );
    }
    let checked = PARSER_CHECKED.load(Ordering::Relaxed);
    if checked > 0 {
        eprintln!(
            "note: {checked} events nested deeper than interop::MAX_DEPTH were checked by \
             serde_json's parser (a Value has no depth limit; JSON text is where Rust gets one)"
        );
    }
    conclusion.exit();
}

// ---------------------------------------------------------------------------------------------
// Scenario structure

const TOP_KEYS: [&str; 6] = [
    "description",
    "subject",
    "config",
    "configError",
    "spec",
    "steps",
];
const STEP_KEYS: [&str; 6] = ["op", "at", "args", "repeat", "expect", "expectError"];

fn run_file(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    // Without the parser's recursion limit: a step may hold an event as deep as the limit.
    let mut parser = serde_json::Deserializer::from_str(&text);
    parser.disable_recursion_limit();
    let scenario = Value::deserialize(&mut parser).and_then(|v| parser.end().map(|()| v));
    let scenario = scenario.map_err(|e| format!("bad JSON: {e}"))?;
    let obj = scenario.as_object().ok_or("a scenario must be an object")?;
    if let Some(k) = obj.keys().find(|k| !TOP_KEYS.contains(&k.as_str())) {
        return Err(format!("unknown top-level key {k:?}"));
    }
    let subject = obj
        .get("subject")
        .and_then(Value::as_str)
        .ok_or("missing subject")?;
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut config = obj.get("config").cloned().unwrap_or(Value::Null);
    substitute_tmp(&mut config, tmp.path());
    let store = store_url().filter(|_| {
        subject == "failure" || (subject == "monitor" && !forgets_what_the_store_keeps(obj))
    });
    if let Some(url) = &store {
        with_store(&mut config, url, &store_key(path));
    }
    let clock = ManualClock::shared(0);
    let events: Arc<Mutex<Vec<Value>>> = Arc::default();
    let built = Subject::build(subject, &config, &clock, &events);
    if let Some(code) = obj.get("configError") {
        let code = code.as_str().ok_or("configError must be a string")?;
        return match built {
            Err(Built::Error(e)) if e.code() == code => Ok(()),
            Err(Built::Error(e)) => Err(format!("construction failed with {e}, expected {code}")),
            Err(Built::Runner(m)) => Err(m),
            Ok(_) => Err(format!("construction succeeded, expected {code}")),
        };
    }
    let mut subject = match built {
        Ok(s) => s,
        Err(Built::Error(e)) => return Err(format!("construction failed: {e}")),
        Err(Built::Runner(m)) => return Err(m),
    };
    let steps = obj
        .get("steps")
        .and_then(Value::as_array)
        .ok_or("steps must be a list")?;
    let mut last_snapshot = None;
    for (i, step) in steps.iter().enumerate() {
        run_step(
            &mut subject,
            step,
            &clock,
            &events,
            tmp.path(),
            &mut last_snapshot,
        )
        .map_err(|m| format!("step {i} ({}): {m}", step.get("op").unwrap_or(&Value::Null)))?;
    }
    #[cfg(feature = "redis")]
    if let (Some(_), Subject::Monitor(m)) = (&store, &subject) {
        let store = m.store_status().ok_or("the monitor has no store")?;
        if store.mode != agentbreaker::StoreMode::Shared || store.outages != 0 {
            return Err(format!("the store was not reachable throughout: {store:?}"));
        }
    }
    if let (Some(_), Subject::Failure(b)) = (&store, &subject) {
        #[cfg(feature = "redis")]
        check_shared(b, &config, &clock)?;
        #[cfg(not(feature = "redis"))]
        return Err(format!(
            "AGENTBREAKER_CONFORMANCE_STORE needs the redis feature ({:?})",
            b.config().store
        ));
    }
    Ok(())
}

/// A Monitor scenario whose steps make the monitor forget tasks whose counters a store keeps:
/// `reset`, `restore`, or a `done`/`error` heartbeat followed by more events (a task reopened
/// here reads the shared totals again, by design).
fn forgets_what_the_store_keeps(scenario: &Map<String, Value>) -> bool {
    let steps = scenario.get("steps").and_then(Value::as_array);
    let mut closed = false;
    for step in steps.into_iter().flatten() {
        let op = step.get("op").and_then(Value::as_str).unwrap_or("");
        if matches!(op, "reset" | "restore") {
            return true;
        }
        let event = &step["args"]["event"];
        if op == "observe" && closed && event["type"] != "heartbeat" {
            return true;
        }
        if event["type"] == "heartbeat" && matches!(event["phase"].as_str(), Some("done" | "error"))
        {
            closed = true;
        }
    }
    false
}

/// The Redis URL of `AGENTBREAKER_CONFORMANCE_STORE`, if set.
fn store_url() -> Option<String> {
    std::env::var("AGENTBREAKER_CONFORMANCE_STORE")
        .ok()
        .filter(|s| !s.is_empty())
}

/// A key prefix of the scenario's own, new in every run.
fn store_key(path: &Path) -> String {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("conformance:{}:{started}:{stem}", std::process::id())
}

/// The scenario's config with `store` and `key` added (a generous `storeTimeoutMs`: a busy CI
/// machine must not turn a slow answer into an outage the scenario does not expect).
fn with_store(config: &mut Value, url: &str, key: &str) {
    if config.is_null() {
        *config = json!({});
    }
    if let Value::Object(map) = config {
        map.insert("store".into(), json!(url));
        map.insert("key".into(), json!(key));
        map.insert("storeTimeoutMs".into(), json!(5000));
    }
}

/// The state really is in the store: a second breaker on the key sees the same status, and the
/// store never went away during the scenario.
#[cfg(feature = "redis")]
fn check_shared(
    b: &FailureBreaker,
    config: &Value,
    clock: &Arc<ManualClock>,
) -> Result<(), String> {
    let store = b.store_status().ok_or("the breaker has no store")?;
    if store.mode != agentbreaker::StoreMode::Shared || store.outages != 0 {
        return Err(format!("the store was not reachable throughout: {store:?}"));
    }
    let twin = FailureConfig::from_json(config)
        .and_then(|c| FailureBreaker::with_clock(c, clock.clone()))
        .map_err(|e| format!("a second breaker on the key: {e}"))?;
    let (mine, theirs) = (b.status(), twin.status());
    if mine != theirs {
        return Err(format!(
            "a second breaker on the same key sees another status:\n{mine:?}\n{theirs:?}"
        ));
    }
    Ok(())
}

fn substitute_tmp(value: &mut Value, tmp: &Path) {
    match value {
        Value::String(s) => {
            if let Some(rest) = s.strip_prefix("$TMP/") {
                *s = tmp.join(rest).to_string_lossy().into_owned();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| substitute_tmp(v, tmp)),
        Value::Object(map) => map.values_mut().for_each(|v| substitute_tmp(v, tmp)),
        _ => {}
    }
}

fn run_step(
    subject: &mut Subject,
    step: &Value,
    clock: &ManualClock,
    events: &Mutex<Vec<Value>>,
    tmp: &Path,
    last_snapshot: &mut Option<Value>,
) -> Result<(), String> {
    let obj = step.as_object().ok_or("a step must be an object")?;
    if let Some(k) = obj.keys().find(|k| !STEP_KEYS.contains(&k.as_str())) {
        return Err(format!("unknown step key {k:?}"));
    }
    let op = obj.get("op").and_then(Value::as_str).ok_or("missing op")?;
    let mut args = obj.get("args").cloned().unwrap_or_else(|| json!({}));
    substitute_tmp(&mut args, tmp);
    if let Some(slot) = args.get_mut("snapshot")
        && slot.as_str() == Some(LAST_SNAPSHOT)
    {
        if op != "restore" {
            return Err(format!("{LAST_SNAPSHOT} is only for restore steps"));
        }
        let snap = last_snapshot
            .as_ref()
            .ok_or_else(|| format!("{LAST_SNAPSHOT} before any snapshot step"))?;
        // Through JSON text, as a hook that keeps the snapshot in a file would pass it.
        *slot = serde_json::from_str(&snap.to_string()).map_err(|e| e.to_string())?;
    }
    let repeat = obj
        .get("repeat")
        .map_or(Some(1), Value::as_u64)
        .ok_or("bad repeat")?;
    let expect_error = obj.get("expectError").map(|v| v.as_str().unwrap_or("?"));
    if let Some(at) = obj.get("at") {
        clock.set(at.as_u64().ok_or("at must be a whole number")?);
    }
    let mut last = Outcome::Value(Value::Null);
    for _ in 0..repeat {
        last = subject.run(op, &args, events)?;
        if let ("snapshot", Outcome::Value(v)) = (op, &last) {
            *last_snapshot = Some(v.clone());
        }
        if let Some(code) = expect_error {
            match &last {
                Outcome::Value(v) => return Err(format!("expected {code}, got result {v}")),
                Outcome::Error(e) if e.code() == code => {}
                Outcome::Error(e) => return Err(format!("expected {code}, got {e}")),
                Outcome::TypeChecked(what) if code == "INVALID_ARGUMENT" => {
                    TYPE_CHECKED.fetch_add(1, Ordering::Relaxed);
                    eprintln!("note: {op}: {what}: checked by the Rust type system");
                }
                Outcome::TypeChecked(what) => {
                    return Err(format!("{what} cannot be passed in Rust; expected {code}"));
                }
                Outcome::ParserChecked(e) if code == "INVALID_EVENT" => {
                    PARSER_CHECKED.fetch_add(1, Ordering::Relaxed);
                    eprintln!("note: {op}: the event is refused by serde_json's parser: {e}");
                }
                Outcome::ParserChecked(e) => {
                    return Err(format!(
                        "serde_json's parser refuses the event ({e}); expected {code}"
                    ));
                }
            }
        }
    }
    if expect_error.is_none() {
        match last {
            Outcome::Value(actual) => {
                if let Some(expected) = obj.get("expect") {
                    partial_match(expected, &actual, "$")?;
                }
            }
            Outcome::Error(e) => return Err(format!("unexpected error {e}")),
            Outcome::TypeChecked(what) => {
                return Err(format!("{what}, but the step expects no error"));
            }
            Outcome::ParserChecked(e) => {
                return Err(format!("serde_json's parser refuses the event: {e}"));
            }
        }
    }
    Ok(())
}

/// `expect` semantics: every key given must match, recursively; arrays elementwise with equal
/// length; numbers within 1e-9.
fn partial_match(expected: &Value, actual: &Value, path: &str) -> Result<(), String> {
    let mismatch = || format!("at {path}: expected {expected}, got {actual}");
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let av = a.get(k).unwrap_or(&Value::Null);
                partial_match(ev, av, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!(
                    "at {path}: expected {} elements, got {}: {actual}",
                    e.len(),
                    a.len()
                ));
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                partial_match(ev, av, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        (Value::Number(e), Value::Number(a)) => {
            let (e, a) = (e.as_f64().unwrap(), a.as_f64().unwrap());
            if (e - a).abs() <= 1e-9 {
                Ok(())
            } else {
                Err(mismatch())
            }
        }
        (e, a) if e == a => Ok(()),
        _ => Err(mismatch()),
    }
}

// ---------------------------------------------------------------------------------------------
// Subjects and ops

enum Subject {
    Failure(FailureBreaker),
    Stagnation(StagnationBreaker),
    Budget(BudgetBreaker),
    Analyzer,
    Strategy(ExitStrategy),
    FixPlan(ExitStrategy),
    Loop(Loop),
    Monitor(Monitor),
    Env,
}

enum Built {
    Error(Error),
    Runner(String),
}

enum Outcome {
    Value(Value),
    Error(Error),
    /// A wrong-typed argument that the Rust API cannot accept at all.
    TypeChecked(String),
    /// An event that serde_json's parser refuses (see [`PARSER_CHECKED`]), with its error.
    ParserChecked(String),
}

fn to_json<T: Serialize>(v: T) -> Outcome {
    Outcome::Value(serde_json::to_value(v).unwrap())
}

fn done() -> Outcome {
    Outcome::Value(Value::Null)
}

fn from<T: Serialize>(r: agentbreaker::Result<T>) -> Outcome {
    match r {
        Ok(v) => to_json(v),
        Err(e) => Outcome::Error(e),
    }
}

fn collector(events: &Arc<Mutex<Vec<Value>>>) -> Listener {
    let events = Arc::clone(events);
    Arc::new(move |e| {
        events.lock().unwrap().push(e.to_json());
        Ok(())
    })
}

impl Subject {
    fn build(
        subject: &str,
        config: &Value,
        clock: &Arc<ManualClock>,
        events: &Arc<Mutex<Vec<Value>>>,
    ) -> Result<Subject, Built> {
        let clock = clock.clone();
        let e = Built::Error;
        Ok(match subject {
            "failure" => {
                let b = FailureConfig::from_json(config)
                    .and_then(|c| FailureBreaker::with_clock(c, clock))
                    .map_err(e)?;
                b.add_listener(collector(events));
                Subject::Failure(b)
            }
            "stagnation" => {
                let b = StagnationConfig::from_json(config)
                    .and_then(|c| StagnationBreaker::with_clock(c, clock))
                    .map_err(e)?;
                b.add_listener(collector(events));
                Subject::Stagnation(b)
            }
            "budget" => {
                let b = BudgetConfig::from_json(config)
                    .and_then(|c| BudgetBreaker::with_clock(c, clock))
                    .map_err(e)?;
                b.add_listener(collector(events));
                Subject::Budget(b)
            }
            "strategy" | "fixPlan" => {
                let parsed = if subject == "strategy" {
                    StrategyConfig::from_json(config)
                } else {
                    StrategyConfig::fix_plan_from_json(config)
                };
                let s = ExitStrategy::with_clock(parsed.map_err(e)?, clock);
                s.add_listener(collector(events));
                if subject == "strategy" {
                    Subject::Strategy(s)
                } else {
                    Subject::FixPlan(s)
                }
            }
            "loop" => {
                let l = LoopConfig::from_json(config)
                    .and_then(|c| Loop::with_clock(c, clock))
                    .map_err(e)?;
                l.add_listener(collector(events));
                Subject::Loop(l)
            }
            "monitor" => {
                let m = Monitor::from_json(config, clock).map_err(e)?;
                m.add_listener(collector(events));
                Subject::Monitor(m)
            }
            "analyzer" | "env" => {
                if !(config.is_null() || config == &json!({})) {
                    return Err(Built::Runner(format!("{subject} takes no config")));
                }
                if subject == "analyzer" {
                    Subject::Analyzer
                } else {
                    Subject::Env
                }
            }
            other => return Err(Built::Runner(format!("unknown subject {other:?}"))),
        })
    }

    fn run(
        &mut self,
        op: &str,
        args: &Value,
        events: &Mutex<Vec<Value>>,
    ) -> Result<Outcome, String> {
        let a = Args::new(args)?;
        if op == "events" {
            a.only(&[])?;
            let drained: Vec<Value> = std::mem::take(&mut *events.lock().unwrap());
            return Ok(Outcome::Value(json!({ "events": drained })));
        }
        let unknown = || Err(format!("unknown op {op:?} for this subject"));
        let is_fix_plan = matches!(self, Subject::FixPlan(_));
        Ok(match self {
            Subject::Failure(b) => match op {
                "recordSuccess" => {
                    a.only(&[])?;
                    b.record_success();
                    done()
                }
                "recordFailure" => {
                    a.only(&["error"])?;
                    match a.string("error")? {
                        Ok(err) => {
                            b.record_failure(err);
                            done()
                        }
                        Err(t) => t,
                    }
                }
                "shouldAllowOperation" => {
                    a.only(&[])?;
                    to_json(b.should_allow_operation())
                }
                "getStatus" => {
                    a.only(&[])?;
                    to_json(b.status())
                }
                "metrics" => {
                    a.only(&[])?;
                    to_json(b.metrics())
                }
                "reset" => {
                    a.only(&[])?;
                    b.reset();
                    done()
                }
                "snapshot" => {
                    a.only(&[])?;
                    to_json(b.snapshot())
                }
                "restore" => {
                    a.only(&["snapshot"])?;
                    from(b.restore_json(a.value("snapshot")))
                }
                "call" => {
                    a.only(&["error"])?;
                    let failure = match a.optional_string("error")? {
                        Ok(f) => f.map(str::to_string),
                        Err(t) => return Ok(t),
                    };
                    let ran = std::cell::Cell::new(false);
                    let result = b.call(|| {
                        ran.set(true);
                        match &failure {
                            Some(e) => Err(e.clone()),
                            None => Ok(()),
                        }
                    });
                    match result {
                        Ok(()) => to_json(json!({"called": true, "ok": true})),
                        Err(CallError::Failed(_)) => to_json(json!({"called": true, "ok": false})),
                        Err(CallError::Rejected(e)) => {
                            if ran.get() {
                                return Err("the guarded function ran although refused".into());
                            }
                            Outcome::Error(e)
                        }
                    }
                }
                "save" => {
                    a.only(&["path"])?;
                    match a.string("path")? {
                        Ok(p) => from(b.save(p)),
                        Err(t) => t,
                    }
                }
                "load" => {
                    a.only(&["path"])?;
                    match a.string("path")? {
                        Ok(p) => from(b.load(p).map(|loaded| json!({ "loaded": loaded }))),
                        Err(t) => t,
                    }
                }
                _ => return unknown(),
            },
            Subject::Stagnation(b) => match op {
                "recordProgress" => match IterationMetrics::from_json(args) {
                    Ok(m) => {
                        b.record_progress(m);
                        done()
                    }
                    Err(e) => Outcome::Error(e),
                },
                "recordStep" => match AgentStep::from_json(args) {
                    Ok(step) => {
                        b.record_step(&step);
                        done()
                    }
                    Err(e) => Outcome::Error(e),
                },
                "recordError" => {
                    a.only(&["error", "transient"])?;
                    let error = match a.string("error")? {
                        Ok(e) => e,
                        Err(t) => return Ok(t),
                    };
                    let transient = match args.get("transient") {
                        None | Some(Value::Null) => false,
                        Some(Value::Bool(t)) => *t,
                        Some(other) => {
                            return Ok(Outcome::TypeChecked(format!("transient {other} (bool)")));
                        }
                    };
                    b.record_error(error, transient);
                    done()
                }
                "check" => {
                    a.only(&[])?;
                    to_json(b.check())
                }
                "getStatus" => {
                    a.only(&[])?;
                    to_json(b.status())
                }
                "reset" => {
                    a.only(&[])?;
                    b.reset();
                    done()
                }
                "snapshot" => {
                    a.only(&[])?;
                    to_json(b.snapshot())
                }
                "restore" => {
                    a.only(&["snapshot"])?;
                    from(b.restore_json(a.value("snapshot")))
                }
                _ => return unknown(),
            },
            Subject::Budget(b) => match op {
                "ingest" => {
                    a.only(&["event"])?;
                    from(b.ingest(a.value("event")).map(|h| json!({ "halt": h })))
                }
                "tick" => {
                    a.only(&[])?;
                    to_json(json!({ "halts": b.tick() }))
                }
                "snapshot" => {
                    a.only(&[])?;
                    to_json(b.snapshot())
                }
                "reset" => {
                    a.only(&[])?;
                    b.reset();
                    done()
                }
                _ => return unknown(),
            },
            Subject::Analyzer => match op {
                "analyze" => {
                    a.only(&["text"])?;
                    match a.string("text")? {
                        Ok(t) => to_json(analyze(t)),
                        Err(t) => t,
                    }
                }
                _ => return unknown(),
            },
            Subject::Strategy(s) | Subject::FixPlan(s) => match op {
                "shouldExit" => {
                    a.only(&["text", "circuitState"])?;
                    let text = match a.optional_string("text")? {
                        Ok(t) => t.unwrap_or(""),
                        Err(t) => return Ok(t),
                    };
                    let state = match a.optional_string("circuitState")? {
                        Ok(None) => State::Closed,
                        Ok(Some(s)) => match s.parse::<State>() {
                            Ok(state) => state,
                            Err(e) => return Ok(Outcome::Error(e)),
                        },
                        Err(t) => return Ok(t),
                    };
                    to_json(s.should_exit(&analyze(text), state))
                }
                "getStatus" if is_fix_plan => {
                    a.only(&[])?;
                    to_json(s.plan_status().ok_or("not a fix plan")?)
                }
                "reset" => {
                    a.only(&[])?;
                    s.reset();
                    done()
                }
                _ => return unknown(),
            },
            Subject::Loop(l) => match op {
                "observe" => from(l.observe_json(args)),
                "getStatus" => {
                    a.only(&[])?;
                    to_json(l.status())
                }
                "reset" => {
                    a.only(&[])?;
                    l.reset();
                    done()
                }
                _ => return unknown(),
            },
            Subject::Monitor(m) => match op {
                "observe" => {
                    a.only(&["event"])?;
                    let event = a.value("event");
                    match serde_json::from_str::<Value>(&event.to_string()) {
                        Ok(_) => from(m.observe(event)),
                        Err(e) => Outcome::ParserChecked(e.to_string()),
                    }
                }
                "tick" => {
                    a.only(&[])?;
                    to_json(json!({ "verdicts": m.tick() }))
                }
                "status" => {
                    a.only(&[])?;
                    Outcome::Value(m.status())
                }
                "snapshot" => {
                    a.only(&[])?;
                    Outcome::Value(m.snapshot())
                }
                "restore" => {
                    a.only(&["snapshot"])?;
                    from(m.restore(a.value("snapshot")))
                }
                "reset" => {
                    a.only(&[])?;
                    m.reset();
                    done()
                }
                _ => return unknown(),
            },
            Subject::Env => match op {
                "configFromEnv" => {
                    a.only(&["env"])?;
                    let env = a.value("env").as_object().ok_or("env must be an object")?;
                    let mut vars = Vec::new();
                    for (k, v) in env {
                        match v.as_str() {
                            Some(s) => vars.push((k.clone(), s.to_string())),
                            None => {
                                return Ok(Outcome::TypeChecked(format!(
                                    "env value {v} (environment values are strings)"
                                )));
                            }
                        }
                    }
                    to_json(config_from_env(vars))
                }
                _ => return unknown(),
            },
        })
    }
}

/// The `args` object of a step.
struct Args<'a>(&'a Map<String, Value>);

impl<'a> Args<'a> {
    fn new(args: &'a Value) -> Result<Self, String> {
        args.as_object()
            .map(Args)
            .ok_or_else(|| "args must be an object".into())
    }

    /// Fails the test on an arg key the op does not take.
    fn only(&self, allowed: &[&str]) -> Result<(), String> {
        match self.0.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(format!("unknown arg {k:?}")),
            None => Ok(()),
        }
    }

    fn value(&self, key: &str) -> &'a Value {
        self.0.get(key).unwrap_or(&Value::Null)
    }

    /// A required string; a present non-string is a value the Rust API cannot take.
    fn string(&self, key: &str) -> Result<Result<&'a str, Outcome>, String> {
        match self.0.get(key) {
            Some(Value::String(s)) => Ok(Ok(s)),
            Some(other) => Ok(Err(Outcome::TypeChecked(format!("{key} {other} (&str)")))),
            None => Ok(Err(Outcome::TypeChecked(format!(
                "{key} missing (required)"
            )))),
        }
    }

    fn optional_string(&self, key: &str) -> Result<Result<Option<&'a str>, Outcome>, String> {
        match self.0.get(key) {
            None => Ok(Ok(None)),
            Some(Value::String(s)) => Ok(Ok(Some(s))),
            Some(other) => Ok(Err(Outcome::TypeChecked(format!("{key} {other} (&str)")))),
        }
    }
}
