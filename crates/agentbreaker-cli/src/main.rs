//! `agentbreaker`: put a circuit breaker in front of an agent CLI without writing code.

use agentbreaker_cli::{
    eval, hook, html_report, metrics_file, ralph, replay, report, settings, stream, supervise,
    watch,
};

use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agentbreaker::SystemClock;
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};

use crate::report::{EXIT_CONFIG, EXIT_IO, EXIT_NOT_FOUND, EXIT_USAGE};
use crate::settings::Settings;
use crate::stream::Format;
use crate::supervise::{Options, Supervisor};
use crate::watch::Watch;

/// A circuit breaker for autonomous AI-agent loops.
///
/// Exit codes: the agent's own code when it ended on its own; 2 when a budget stopped it (tool
/// calls, spend, duration, idle time, a tool's limit; `loop`: max iterations, budget); 3 when a
/// loop was detected (repeated steps, cycles, failures, near-identical outputs, no progress);
/// 130 on Ctrl-C; 64 for a bad command line; 65 when `eval`'s trajectories hold a run twice; 74
/// when a file could not be read or written (`run --report`: unless the agent was halted or
/// interrupted; `loop`: its final state); 75 when another `loop` holds the state folder; 78 for a
/// bad configuration; 127 when the agent could not be started.
#[derive(Debug, Parser)]
#[command(name = "agentbreaker", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run an agent under a Monitor: warn when a rule nears its threshold, stop it when one trips.
    Run(RunArgs),
    /// Replay a recorded stream and say where it would have been stopped.
    Replay(ReplayArgs),
    /// Run a command once per iteration until an exit strategy or the breaker stops the loop.
    Loop(LoopArgs),
    /// Print the effective configuration and any warnings about it.
    Config(ConfigArgs),
    /// Measure detection on labelled agent trajectories: stuck runs halted, healthy runs halted.
    Eval(EvalArgs),
    // `hook` and `status` live in agentbreaker_cli::hook (docs/hooks.md).
    /// Guard Claude Code, Codex CLI or Gemini CLI from inside: their hooks run this on every event
    /// (`agentbreaker hook install claude` sets it up).
    Hook(hook::cli::HookCli),
    /// List the sessions `agentbreaker hook` watches, with their counters.
    Status(hook::cli::StatusArgs),
    /// Draw a session as a one-page HTML timeline: steps, tool calls, warnings, the halt.
    Report(ReportArgs),
}

/// `--metrics-file` and `--metrics-task` (docs/observability.md).
#[derive(Debug, Args, Clone)]
struct MetricsArgs {
    /// Write the metrics to FILE in the Prometheus text format (for node_exporter's textfile
    /// collector): replaced atomically, at most once a second and at exit.
    #[arg(long, value_name = "FILE")]
    metrics_file: Option<PathBuf>,
    /// Add the task attribute to the metrics (one series per task: only for few tasks).
    #[arg(long, requires = "metrics_file")]
    metrics_task: bool,
}

impl MetricsArgs {
    fn export(&self) -> Option<std::sync::Arc<metrics_file::MetricsExport>> {
        self.metrics_file
            .clone()
            .map(|p| metrics_file::MetricsExport::new(p, self.metrics_task))
    }
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// A `run --report` JSON file, a recording (replayed as `replay` does), a hook session's
    /// state file, or a hook session id (`agentbreaker status` lists them).
    session: String,
    /// Write the page to FILE (default: stdout).
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Where hook sessions are kept (default: $AGENTBREAKER_STATE_DIR, else
    /// ~/.agentbreaker/sessions).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    #[command(flatten)]
    limits: Limits,
}

#[derive(Debug, Args)]
struct EvalArgs {
    /// A directory of trajectories (`*.jsonl` or `*.jsonl.gz`, normalized schema).
    #[arg(long, value_name = "DIR")]
    trajectories: PathBuf,
    /// The labels CSV (`id`, `label`, `onset_step` columns).
    #[arg(long, value_name = "FILE")]
    labels: PathBuf,
    /// Start from a named profile: seed (the defaults) or coding-agent.
    #[arg(long, value_name = "NAME", default_value = "coding-agent")]
    profile: String,
    /// A TOML configuration on top of the profile ([budget], [stagnation], [failure]);
    /// ./agentbreaker.toml is not read.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
    /// Also evaluate the seed defaults and the eval README's two simple rule sets, in one run.
    #[arg(long)]
    compare: bool,
    /// Vary the main thresholds and print the trade-off.
    #[arg(long)]
    sweep: bool,
    /// Draw the sweep's trade-off curve to this SVG file (implies --sweep).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// List every halted run (label, id, step, rule; with --json, as `halts`).
    #[arg(long)]
    list: bool,
}

/// Limits that override the configuration file and the environment.
#[derive(Debug, Args, Clone)]
struct Limits {
    /// Start from a named profile: coding-agent (the default: step detectors on, budgets for a
    /// whole session; see docs/detection.md) or seed (the seeds' defaults).
    #[arg(long, value_name = "NAME", default_value = "coding-agent")]
    profile: String,
    /// A TOML configuration file (default: ./agentbreaker.toml when it exists).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Tool calls per task; one more stops the agent.
    #[arg(long, value_name = "N")]
    max_tool_calls: Option<u64>,
    /// Spend per task in cents; more stops the agent.
    #[arg(long, value_name = "CENTS")]
    max_spend_cents: Option<u64>,
    /// Seconds a task may run.
    #[arg(long, value_name = "SECS")]
    duration_secs: Option<u64>,
    /// Seconds without output before the agent counts as hung.
    #[arg(long, value_name = "SECS")]
    idle_secs: Option<u64>,
    /// Jaccard similarity at which consecutive answers count as a loop, in (0, 1].
    #[arg(long, value_name = "X")]
    jaccard: Option<f64>,
    /// Warn this many counts before a rule's threshold (0 = no warnings; default 2).
    #[arg(long, value_name = "N")]
    warn_before: Option<u32>,
    /// Warn at this percent of each budget (0 = never; default 80).
    #[arg(long, value_name = "PCT")]
    budget_warn_percent: Option<u32>,
    /// The most calls one task may make of a tool, as NAME=N (repeatable).
    #[arg(long, value_name = "NAME=N")]
    tool_limit: Vec<String>,
    /// How the agent's stdout is read.
    #[arg(long, value_enum, default_value_t = Format::Auto)]
    format: Format,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    limits: Limits,
    /// Seconds between SIGTERM and SIGKILL when the agent is stopped.
    #[arg(long, value_name = "SECS")]
    grace_secs: Option<u64>,
    /// Write what happened as JSON to this file.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// No live status line.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    metrics: MetricsArgs,
    /// The agent command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// The recording: one JSON event per line (Claude stream-json, Codex exec --json, or Monitor
    /// events).
    file: PathBuf,
    #[command(flatten)]
    limits: Limits,
    /// Print the verdict as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct LoopArgs {
    #[command(flatten)]
    limits: Limits,
    /// Exit strategy: auto, done_signals, circuit_breaker, fix_plan=PLAN.md, or
    /// composite=[any:|all:]A,B,... of those.
    #[arg(long, value_name = "STRATEGY")]
    strategy: Option<String>,
    /// Iterations before the loop gives up.
    #[arg(long, value_name = "N")]
    max_iterations: Option<u32>,
    /// Run after each iteration; its `N passed` / `N failed` summary measures progress.
    #[arg(long, value_name = "CMD")]
    test_cmd: Option<String>,
    /// Forget the saved breaker state (after an OPEN circuit) and start over.
    #[arg(long)]
    reset: bool,
    /// Where the breaker state is kept (one loop at a time: a second one exits 75).
    #[arg(long, value_name = "DIR", default_value = ".agentbreaker")]
    state_dir: PathBuf,
    /// Seconds between SIGTERM and SIGKILL when an iteration is stopped.
    #[arg(long, value_name = "SECS")]
    grace_secs: Option<u64>,
    /// No live status line.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    metrics: MetricsArgs,
    /// The command that runs one iteration (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Debug, Args)]
struct ConfigArgs {
    /// Start from a named profile: coding-agent (the default) or seed.
    #[arg(long, value_name = "NAME", default_value = "coding-agent")]
    profile: String,
    /// A TOML configuration file (default: ./agentbreaker.toml when it exists).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print JSON instead of TOML.
    #[arg(long)]
    json: bool,
}

/// Prints to stdout; a closed stdout (`| head`) is not an error worth a panic.
fn out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

fn fail(code: i32, message: &str) -> i32 {
    eprintln!("agentbreaker: {message}");
    code
}

/// Settings from the file and the environment, then the flags.
fn settings(limits: &Limits) -> Result<Settings, String> {
    let base = Settings::from_profile(&limits.profile)?;
    let mut s = Settings::load_over(base, limits.config.as_deref(), std::env::vars())?;
    let b = &mut s.budget;
    if let Some(v) = limits.max_tool_calls {
        b.max_tool_calls_per_task = v;
    }
    if let Some(v) = limits.max_spend_cents {
        b.max_token_spend_cents_per_task = v;
    }
    if let Some(v) = limits.duration_secs {
        b.max_task_duration_secs = v;
    }
    if let Some(v) = limits.idle_secs {
        b.max_idle_secs = v;
    }
    if let Some(v) = limits.jaccard {
        b.similarity_jaccard_threshold = v;
    }
    b.validate().map_err(|e| e.to_string())?;
    if let Some(v) = limits.warn_before {
        s.set_monitor_key("warnBefore", &json!(v))
            .map_err(|e| format!("--warn-before: {e}"))?;
    }
    if let Some(v) = limits.budget_warn_percent {
        s.set_monitor_key("budgetWarnPercent", &json!(v))
            .map_err(|e| format!("--budget-warn-percent: {e}"))?;
    }
    if !limits.tool_limit.is_empty() {
        let mut tools = serde_json::Map::new();
        for (name, limit) in &s.tool_limits {
            tools.insert(name.clone(), json!(limit));
        }
        for spec in &limits.tool_limit {
            let (name, n) = spec
                .rsplit_once('=')
                .and_then(|(name, n)| Some((name, n.trim().parse::<u64>().ok()?)))
                .ok_or_else(|| format!("--tool-limit {spec:?}: expected NAME=N"))?;
            tools.insert(name.to_string(), json!(n));
        }
        s.set_monitor_key("toolLimits", &Value::Object(tools))
            .map_err(|e| format!("--tool-limit: {e}"))?;
    }
    for w in &s.warnings {
        eprintln!("agentbreaker: warning: {w}");
    }
    Ok(s)
}

/// `auto`, `fix_plan=PLAN.md`, `composite=all:auto,circuit_breaker` → a strategy config.
fn strategy_json(spec: &str) -> Result<Value, String> {
    if let Some(rest) = spec.strip_prefix("composite=") {
        let (mode, members) = match rest.split_once(':') {
            Some((m @ ("any" | "all"), members)) => (m, members),
            _ => ("any", rest),
        };
        let members = members
            .split(',')
            .filter(|m| !m.is_empty())
            .map(strategy_json)
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(json!({"type": "composite", "mode": mode, "members": members}));
    }
    if let Some(path) = spec.strip_prefix("fix_plan=") {
        let markdown = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the fix plan {path}: {e}"))?;
        return Ok(json!({"type": "fix_plan", "markdown": markdown}));
    }
    match spec {
        "auto" | "done_signals" | "circuit_breaker" => Ok(json!({"type": spec})),
        other => Err(format!(
            "unknown strategy {other:?} (auto, done_signals, circuit_breaker, fix_plan=PATH, \
             composite=[any:|all:]A,B)"
        )),
    }
}

fn cmd_run(args: &RunArgs) -> i32 {
    let s = match settings(&args.limits) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    let mut watch = match Watch::new(s.monitor_config(), SystemClock::shared()) {
        Ok(w) => w.with_metrics(args.metrics.export()),
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    watch.metrics_tick();
    let mut supervisor = match Supervisor::new() {
        Ok(s) => s,
        Err(e) => return fail(EXIT_IO, &format!("cannot install signal handlers: {e}")),
    };
    let opts = Options {
        format: args.limits.format,
        grace: Duration::from_secs(args.grace_secs.unwrap_or(s.grace_secs)),
        status_line: !args.quiet,
        task: None,
    };
    let outcome = match supervisor.run(&args.command, &mut watch, &opts) {
        Ok(o) => o,
        Err(e) => {
            return fail(
                EXIT_NOT_FOUND,
                &format!("cannot start {:?}: {e}", args.command[0]),
            );
        }
    };
    watch.finish_metrics();
    let code = match (&watch.halt, outcome.interrupted, outcome.agent) {
        (_, Some(sig), _) => 128 + sig,
        (Some(halt), None, _) => report::exit_code(halt),
        (None, None, Some(agent)) => agent.shell_code(),
        (None, None, None) => 1,
    };
    // A halt or an interruption is what a caller most needs to know; the agent's own code gives
    // way to 74 when the report could not be written (docs/cli.md, "Exit codes").
    let decided_by_us = watch.halt.is_some() || outcome.interrupted.is_some();
    if let Some(halt) = &watch.halt {
        eprintln!("{}", report::card(halt));
    }
    if watch.invalid > 0 {
        eprintln!(
            "agentbreaker: {} events were refused by the Monitor (INVALID_EVENT), e.g. {}",
            watch.invalid,
            watch.invalid_samples.first().map_or("", String::as_str)
        );
    }
    if let Some(path) = &args.report {
        let doc = report::report_json(
            &watch,
            code,
            outcome.agent,
            outcome.interrupted.is_some(),
            outcome.lines,
            outcome.malformed,
        );
        let bytes = serde_json::to_vec_pretty(&doc).unwrap_or_default();
        if let Err(e) = agentbreaker::persist::write_atomic(path, &bytes) {
            eprintln!(
                "agentbreaker: could not write the report {}: {e}",
                path.display()
            );
            if !decided_by_us {
                return EXIT_IO;
            }
        }
    }
    code
}

fn cmd_replay(args: &ReplayArgs) -> i32 {
    let s = match settings(&args.limits) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    let file = match std::fs::File::open(&args.file) {
        Ok(f) => f,
        Err(e) => {
            return fail(
                EXIT_IO,
                &format!("cannot open {}: {e}", args.file.display()),
            );
        }
    };
    match replay::replay(BufReader::new(file), args.limits.format, &s) {
        Ok(replayed) => {
            if args.json {
                out(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&replayed.to_json()).unwrap_or_default()
                ));
            } else {
                out(&replayed.to_text(&args.file));
            }
            0
        }
        Err(e) => fail(
            EXIT_IO,
            &format!("cannot read {}: {e}", args.file.display()),
        ),
    }
}

fn cmd_loop(args: &LoopArgs) -> i32 {
    let mut s = match settings(&args.limits) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    if let Some(spec) = &args.strategy {
        if let Err(e) = strategy_json(spec).and_then(|v| s.set_strategy(v)) {
            return fail(EXIT_CONFIG, &e);
        }
    }
    if let Some(n) = args.max_iterations {
        if n == 0 {
            return fail(EXIT_CONFIG, "--max-iterations must be at least 1");
        }
        s.max_iterations = n;
    }
    if let Some(g) = args.grace_secs {
        s.grace_secs = g;
    }
    ralph::run_loop(
        &ralph::LoopRun {
            command: args.command.clone(),
            test_cmd: args.test_cmd.clone(),
            reset: args.reset,
            state_dir: args.state_dir.clone(),
            format: args.limits.format,
            quiet: args.quiet,
            metrics: args.metrics.export(),
        },
        &s,
    )
}

fn cmd_report(args: &ReportArgs) -> i32 {
    let s = match settings(&args.limits) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    let source = match html_report::load(
        &args.session,
        args.state_dir.as_deref(),
        &s,
        args.limits.format,
    ) {
        Ok(src) => src,
        Err(e) => return fail(EXIT_NOT_FOUND_FILE, &e),
    };
    let page = html_report::render(&source);
    match &args.output {
        Some(path) => {
            if let Err(e) = metrics_file::write_text_atomic(path, &page) {
                return fail(EXIT_IO, &format!("cannot write {}: {e}", path.display()));
            }
            eprintln!("agentbreaker: wrote {}", path.display());
        }
        None => out(&page),
    }
    0
}

/// `report` of a session that is neither a file nor a known session: EX_NOINPUT.
const EXIT_NOT_FOUND_FILE: i32 = 66;
/// `eval` of trajectories that hold a run twice: EX_DATAERR.
const EXIT_DATA: i32 = 65;

fn cmd_config(args: &ConfigArgs) -> i32 {
    let base = match Settings::from_profile(&args.profile) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    let s = match Settings::load_over(base, args.config.as_deref(), std::env::vars()) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    if args.json {
        let doc = json!({
            "config": s.to_json(),
            "source": s.source.as_ref().map(|p| p.display().to_string()),
            "warnings": s.warnings,
        });
        out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ));
    } else {
        match &s.source {
            Some(p) => out(&format!(
                "# effective configuration: profile {}, {}, environment\n",
                s.profile,
                p.display()
            )),
            None => out(&format!(
                "# effective configuration: profile {}, environment (no agentbreaker.toml)\n",
                s.profile
            )),
        }
        out(&s.to_toml());
        for w in &s.warnings {
            eprintln!("agentbreaker: warning: {w}");
        }
    }
    0
}

fn cmd_eval(args: &EvalArgs) -> i32 {
    let start = std::time::Instant::now();
    let base = match settings::Settings::from_profile(&args.profile) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    // Neither the process environment nor ./agentbreaker.toml is read: an evaluation depends
    // only on its arguments (--profile, --config).
    let s = match Settings::load_over_file(
        base,
        args.config.as_deref(),
        std::iter::empty::<(String, String)>(),
    ) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    let runs = match eval::read_runs(&args.trajectories) {
        Ok(r) => r,
        Err(e @ eval::RunsError::Duplicate(_)) => return fail(EXIT_DATA, &e.to_string()),
        Err(e) => return fail(EXIT_IO, &e.to_string()),
    };
    let labels = match eval::read_labels(&args.labels) {
        Ok(l) => l,
        Err(e) => return fail(EXIT_IO, &e),
    };
    let figures = match eval::evaluate(&runs, &labels, &s) {
        Ok(f) => f,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    let name = format!(
        "profile {}{}",
        args.profile,
        if args.config.is_some() {
            " + config"
        } else {
            ""
        }
    );
    let mut rows = vec![(name, figures.clone())];
    if args.compare {
        for (n, detector) in eval::comparisons() {
            match eval::evaluate_with(&runs, &labels, detector.as_ref()) {
                Ok(f) => rows.push((n, f)),
                Err(e) => return fail(EXIT_CONFIG, &e),
            }
        }
    }
    let points = if args.sweep || args.plot.is_some() {
        match eval::sweep(&runs, &labels, &s) {
            Ok(p) => Some(p),
            Err(e) => return fail(EXIT_CONFIG, &e),
        }
    } else {
        None
    };
    if let (Some(path), Some(points)) = (&args.plot, &points) {
        if let Err(e) = std::fs::write(path, eval::plot_svg(points)) {
            return fail(EXIT_IO, &format!("cannot write {}: {e}", path.display()));
        }
    }
    if args.json {
        let mut doc = figures.to_json();
        doc["runs"] = json!(runs.len());
        doc["profile"] = json!(args.profile);
        if args.compare {
            doc["compare"] = json!(
                rows.iter()
                    .skip(1)
                    .map(|(n, f)| json!({"name": n, "figures": f.to_json()}))
                    .collect::<Vec<_>>()
            );
        }
        if args.list {
            doc["halts"] = json!(
                figures
                    .halts
                    .iter()
                    .map(|(label, id, step, last, why)| json!({
                        "label": label, "id": id, "step": step, "lastStep": last, "rule": why,
                    }))
                    .collect::<Vec<_>>()
            );
        }
        if let Some(points) = &points {
            doc["sweep"] = json!(points.iter().map(|p| json!({"set": p.label, "stuckHaltedPct": p.stuck, "healthyHaltedPct": p.healthy, "medianStepsAfterOnset": p.median})).collect::<Vec<_>>());
        }
        out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ));
    } else {
        out(&format!(
            "{} trajectories, {} labelled; halted = stopped before the run's last step\n",
            runs.len(),
            runs.len() as u64 - figures.to_json()["unlabelled"].as_u64().unwrap_or(0)
        ));
        out(&format!("{}\n", eval::header()));
        for (n, f) in &rows {
            out(&format!("{}\n", eval::row(n, f)));
        }
        if let Some(points) = &points {
            out(&format!(
                "\nsweep over {} (one threshold at a time):\n",
                args.profile
            ));
            out(&format!(
                "{:<34} {:>13} {:>15} {:>6}\n",
                "setting", "stuck halted", "healthy halted", "median"
            ));
            for p in points {
                out(&format!(
                    "{:<34} {:>12.1}% {:>14.1}% {:>6}\n",
                    p.label,
                    p.stuck,
                    p.healthy,
                    p.median.map_or("-".to_string(), |m| format!("{m:.1}"))
                ));
            }
        }
        if args.list {
            out(&format!("\nhalted runs ({}):\n", args.profile));
            for (label, id, step, last, why) in &figures.halts {
                out(&format!(
                    "{label:<15} {id:<70} step {step:>3} of {last:<3} {why}\n"
                ));
            }
        }
        eprintln!(
            "agentbreaker: evaluated in {:.2} s",
            start.elapsed().as_secs_f64()
        );
    }
    0
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // A hook call never fails on its command line (that would block Gemini CLI).
            // `args_os`: `args` panics on an argument that is not UTF-8.
            let args: Vec<String> = std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            if e.use_stderr()
                && let Some(code) = hook::command_line_error(&args, &e.to_string())
            {
                return ExitCode::from(u8::try_from(code).unwrap_or(0));
            }
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(u8::try_from(code).unwrap_or(1));
        }
    };
    let code = match &cli.command {
        Cmd::Run(a) => cmd_run(a),
        Cmd::Replay(a) => cmd_replay(a),
        Cmd::Loop(a) => cmd_loop(a),
        Cmd::Config(a) => cmd_config(a),
        Cmd::Eval(a) => cmd_eval(a),
        Cmd::Hook(a) => hook::cli::run_hook(a),
        Cmd::Status(a) => hook::cli::run_status(a),
        Cmd::Report(a) => cmd_report(a),
    };
    ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(1))
}
