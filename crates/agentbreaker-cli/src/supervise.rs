//! Running an agent under a Monitor: its own process group, its stdout passed through unchanged
//! and parsed line by line into the Monitor's events, a tick every second, a one-line notice on
//! stderr for each warning, SIGTERM then SIGKILL to the whole group on a halt, signals forwarded,
//! every child reaped and no group member left behind.

use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use agentbreaker::Verdict;
use indicatif::{ProgressBar, ProgressStyle};
use nix::sys::signal::{Signal as Sig, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::report::{AgentExit, clock, dollars, notice};
use crate::stream::{Format, StreamParser};
use crate::watch::Watch;

/// Longest piece of output handled as one line; longer lines are passed through in pieces (and
/// count as malformed), so an agent printing binary without newlines cannot grow our memory.
const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
/// How much of the agent's stdout `loop` keeps as the iteration's output when the stream has no
/// final answer of its own.
const MAX_CAPTURE_BYTES: usize = 64 * 1024;
/// After the agent exits, how long its group may keep stdout open before it is killed.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

enum Msg {
    Line(u64, Vec<u8>),
    Eof(u64),
    Signal(i32),
}

/// How to run one agent process.
#[derive(Debug, Clone)]
pub struct Options {
    /// How to read its stdout.
    pub format: Format,
    /// SIGTERM → SIGKILL grace period.
    pub grace: Duration,
    /// Draw a live status line on stderr (only when stderr is a terminal).
    pub status_line: bool,
    /// A task to open (heartbeat `starting`) before the agent starts and to close (`done`) after:
    /// the events that name no task count for it.
    pub task: Option<String>,
}

/// What happened (the Monitor's verdicts are in the [`Watch`]).
#[derive(Debug)]
pub struct Outcome {
    /// How the agent ended (`None` if it could not be reaped).
    pub agent: Option<AgentExit>,
    /// A signal we received and forwarded (SIGINT on Ctrl-C).
    pub interrupted: Option<i32>,
    /// The agent's final answer, when its stream has one.
    pub final_text: Option<String>,
    /// The last bytes of its stdout (up to 64 KB).
    pub captured: Vec<u8>,
    /// Lines read.
    pub lines: u64,
    /// Lines that were not recognised.
    pub malformed: u64,
}

/// Owns the signal handlers (registered once per process) and runs agents.
pub struct Supervisor {
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    generation: u64,
    signals: signal_hook::iterator::Handle,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.signals.close();
    }
}

impl Supervisor {
    /// Registers handlers for SIGINT, SIGTERM and SIGHUP: from now on they are forwarded to the
    /// agent instead of ending this process.
    pub fn new() -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel();
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let handle = signals.handle();
        let sig_tx = tx.clone();
        thread::spawn(move || {
            for sig in signals.forever() {
                if sig_tx.send(Msg::Signal(sig)).is_err() {
                    break;
                }
            }
        });
        Ok(Supervisor {
            tx,
            rx,
            generation: 0,
            signals: handle,
        })
    }

    /// A signal received while no agent was running, if any.
    pub fn pending_signal(&self) -> Option<i32> {
        self.rx.try_iter().find_map(|m| match m {
            Msg::Signal(s) => Some(s),
            _ => None,
        })
    }

    /// Runs `command` to its end (or until the Monitor halts it).
    pub fn run(
        &mut self,
        command: &[String],
        watch: &mut Watch,
        opts: &Options,
    ) -> std::io::Result<Outcome> {
        self.generation += 1;
        let generation = self.generation;
        if let Some(task) = &opts.task {
            watch.observe(&[json!({"type": "heartbeat", "taskId": task, "phase": "starting"})]);
        }
        let (program, args) = command
            .split_first()
            .ok_or_else(|| std::io::Error::other("no command given"))?;
        let mut child = Command::new(program)
            .args(args)
            .process_group(0)
            .stdin(Stdio::inherit())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let group = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        if let Some(stdout) = child.stdout.take() {
            let tx = self.tx.clone();
            thread::spawn(move || read_lines(stdout, generation, &tx));
        }
        let mut run = Run {
            parser: StreamParser::new(opts.format),
            outcome: Outcome {
                agent: None,
                interrupted: None,
                final_text: None,
                captured: Vec::new(),
                lines: 0,
                malformed: 0,
            },
            status: (opts.status_line && std::io::stderr().is_terminal()).then(status_bar),
            started: Instant::now(),
        };
        run.supervise(&mut child, group, generation, &self.rx, watch, opts);
        if let Some(bar) = &run.status {
            bar.finish_and_clear();
        }
        if let Some(task) = &opts.task
            && watch.halt.is_none()
        {
            watch.observe(&[json!({"type": "heartbeat", "taskId": task, "phase": "done"})]);
        }
        run.outcome.final_text = run.parser.final_text.take();
        run.outcome.lines = run.parser.lines;
        run.outcome.malformed = run.parser.malformed;
        Ok(run.outcome)
    }
}

struct Run {
    parser: StreamParser,
    outcome: Outcome,
    status: Option<ProgressBar>,
    started: Instant,
}

enum Stage {
    Running,
    Terminating { kill_at: Instant },
}

impl Run {
    fn supervise(
        &mut self,
        child: &mut Child,
        group: Pid,
        generation: u64,
        rx: &Receiver<Msg>,
        watch: &mut Watch,
        opts: &Options,
    ) {
        let mut phase = Stage::Running;
        let mut next_tick = Instant::now() + Duration::from_secs(1);
        let mut eof = false;
        let mut exited: Option<(ExitStatus, Instant)> = None;
        let mut killed_leftovers = false;
        loop {
            if eof && exited.is_some() {
                break;
            }
            let now = Instant::now();
            let mut wait = next_tick.saturating_duration_since(now);
            if eof || matches!(phase, Stage::Terminating { .. }) {
                wait = wait.min(Duration::from_millis(50));
            }
            match rx.recv_timeout(wait) {
                Ok(Msg::Line(g, bytes)) if g == generation => {
                    self.pass_through(&bytes);
                    if matches!(phase, Stage::Running) {
                        let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
                        let line = line.strip_suffix(b"\r").unwrap_or(line);
                        let events = self.parser.parse_line(line);
                        self.observe(watch, &events);
                    }
                }
                Ok(Msg::Eof(g)) if g == generation => {
                    eof = true;
                    if matches!(phase, Stage::Running) {
                        let events = self.parser.finish();
                        self.observe(watch, &events);
                    }
                }
                Ok(Msg::Signal(sig)) => {
                    self.outcome.interrupted.get_or_insert(sig);
                    let forward = Sig::try_from(sig).unwrap_or(Sig::SIGTERM);
                    let _ = killpg(group, forward);
                    if matches!(phase, Stage::Running) {
                        phase = Stage::Terminating {
                            kill_at: Instant::now() + opts.grace,
                        };
                    }
                }
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => eof = true,
            }
            if exited.is_none()
                && let Ok(Some(status)) = child.try_wait()
            {
                exited = Some((status, Instant::now()));
            }
            if let Some((_, at)) = exited {
                // The agent is gone: whatever is left of its group goes too.
                if !killed_leftovers {
                    let _ = killpg(group, Sig::SIGKILL);
                    killed_leftovers = true;
                }
                if !eof && at.elapsed() > DRAIN_AFTER_EXIT * 2 {
                    break; // something outside the group holds the pipe; stop waiting for it
                }
            }
            let now = Instant::now();
            if now >= next_tick {
                next_tick += Duration::from_secs(1);
                if matches!(phase, Stage::Running) {
                    let said = watch.tick();
                    self.tell(&said);
                }
                watch.metrics_tick();
                self.draw_status(watch);
            }
            if matches!(phase, Stage::Running) && watch.halt.is_some() {
                let _ = killpg(group, Sig::SIGTERM);
                phase = Stage::Terminating {
                    kill_at: now + opts.grace,
                };
            }
            if let Stage::Terminating { kill_at } = phase
                && now >= kill_at
                && exited.is_none()
            {
                let _ = killpg(group, Sig::SIGKILL);
            }
        }
        let status = match exited {
            Some((status, _)) => Some(status),
            None => {
                let _ = killpg(group, Sig::SIGKILL);
                child.wait().ok()
            }
        };
        self.outcome.agent = status.map(|s| match (s.code(), s.signal()) {
            (Some(c), _) => AgentExit::Code(c),
            (None, Some(sig)) => AgentExit::Signal(sig),
            (None, None) => AgentExit::Code(1),
        });
    }

    /// Hands events to the Monitor and prints its warnings.
    fn observe(&mut self, watch: &mut Watch, events: &[Value]) {
        let said = watch.observe(events);
        self.tell(&said);
    }

    /// One notice line on stderr per warning (the halt card is printed by the caller).
    fn tell(&self, said: &[Verdict]) {
        for v in said.iter().filter(|v| v.is_warn()) {
            let line = notice(v);
            match &self.status {
                Some(bar) => bar.suspend(|| eprintln!("{line}")),
                None => eprintln!("{line}"),
            }
        }
    }

    fn pass_through(&mut self, bytes: &[u8]) {
        let write = || {
            let mut out = std::io::stdout().lock();
            // A closed stdout (EPIPE) must not stop the supervision.
            let _ = out.write_all(bytes);
            let _ = out.flush();
        };
        match &self.status {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
        self.outcome.captured.extend_from_slice(bytes);
        if self.outcome.captured.len() > 2 * MAX_CAPTURE_BYTES {
            let cut = self.outcome.captured.len() - MAX_CAPTURE_BYTES;
            self.outcome.captured.drain(..cut);
        }
    }

    fn draw_status(&self, watch: &Watch) {
        let Some(bar) = &self.status else {
            return;
        };
        let status = watch.status();
        let tasks = status["tasks"].as_array().cloned().unwrap_or_default();
        let sum = |key: &str| -> f64 { tasks.iter().filter_map(|t| t[key].as_f64()).sum() };
        let idle = tasks
            .iter()
            .filter_map(|t| t["idleSecs"].as_f64())
            .fold(f64::INFINITY, f64::min);
        let idle = if idle.is_finite() { idle } else { 0.0 };
        bar.set_message(format!(
            "agentbreaker {} | {} steps | {} tool calls | {} | idle {} | {} warnings",
            clock(self.started.elapsed().as_secs_f64()),
            sum("steps"),
            sum("toolCalls"),
            dollars(sum("spendCents")),
            clock(idle),
            watch.warnings_total
        ));
        bar.tick();
    }
}

fn status_bar() -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
        bar.set_style(style);
    }
    bar
}

/// Reads `source` into lines (each with its newline) on `tx`, then `Eof`.
fn read_lines(source: impl Read, generation: u64, tx: &Sender<Msg>) {
    let mut reader = BufReader::with_capacity(64 * 1024, source);
    let mut line: Vec<u8> = Vec::new();
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if buf.is_empty() {
            break;
        }
        let (take, complete) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if (complete || line.len() >= MAX_LINE_BYTES)
            && tx
                .send(Msg::Line(generation, std::mem::take(&mut line)))
                .is_err()
        {
            return;
        }
    }
    if !line.is_empty() {
        let _ = tx.send(Msg::Line(generation, line));
    }
    let _ = tx.send(Msg::Eof(generation));
}
