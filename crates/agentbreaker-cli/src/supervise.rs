//! Running an agent under the breakers: its own process group, its stdout passed through
//! unchanged and parsed line by line, a tick every second, SIGTERM then SIGKILL to the whole group
//! on a halt, signals forwarded, every child reaped and no group member left behind.

use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use agentbreaker::{
    AgentEvent, BudgetBreaker, BudgetSnapshot, EventKind, Phase, StagnationBreaker,
};
use indicatif::{ProgressBar, ProgressStyle};
use nix::sys::signal::{Signal as Sig, killpg};
use nix::unistd::Pid;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::report::{AgentExit, Stop, clock, dollars};
use crate::stream::{Feed, Format, StreamParser};

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
    /// Feed errors to the StagnationBreaker and stop when it opens (`run`; `loop` leaves that
    /// to its coordinator).
    pub watch_errors: bool,
    /// A task to open (heartbeat `starting`) before the agent starts.
    pub task: Option<String>,
}

/// What happened.
#[derive(Debug)]
pub struct Outcome {
    /// Why the supervisor stopped the agent, if it did.
    pub stop: Option<Stop>,
    /// How the agent ended (`None` if it could not be reaped).
    pub agent: Option<AgentExit>,
    /// A signal we received and forwarded (SIGINT on Ctrl-C).
    pub interrupted: Option<i32>,
    /// The agent's final answer, when its stream has one.
    pub final_text: Option<String>,
    /// The last bytes of its stdout (up to 64 KB).
    pub captured: Vec<u8>,
    /// Error texts seen (the last 32).
    pub errors: Vec<String>,
    /// Files changed according to the stream (successful edits).
    pub stream_files_changed: u64,
    /// Lines read, and how many were not recognised.
    pub lines: u64,
    /// Lines that were not recognised.
    pub malformed: u64,
    /// The BudgetBreaker's live snapshot at the end.
    pub counters: BudgetSnapshot,
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

    /// Runs `command` to its end (or until the breakers stop it).
    pub fn run(
        &mut self,
        command: &[String],
        budget: &BudgetBreaker,
        stagnation: &StagnationBreaker,
        opts: &Options,
    ) -> std::io::Result<Outcome> {
        self.generation += 1;
        let generation = self.generation;
        if let Some(task) = &opts.task {
            let _ = budget.ingest_event(&AgentEvent {
                task_id: Some(task.clone()),
                kind: EventKind::Heartbeat(Phase::Starting),
            });
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
            feed: Feed::new(opts.watch_errors),
            outcome: Outcome {
                stop: None,
                agent: None,
                interrupted: None,
                final_text: None,
                captured: Vec::new(),
                errors: Vec::new(),
                stream_files_changed: 0,
                lines: 0,
                malformed: 0,
                counters: budget.snapshot(),
            },
            status: (opts.status_line && std::io::stderr().is_terminal()).then(status_bar),
            started: Instant::now(),
        };
        run.supervise(
            &mut child, group, generation, &self.rx, budget, stagnation, opts,
        );
        if let Some(bar) = &run.status {
            bar.finish_and_clear();
        }
        run.outcome.final_text = run.feed.final_text.take();
        run.outcome.errors = std::mem::take(&mut run.feed.errors);
        run.outcome.stream_files_changed = run.feed.files_changed;
        run.outcome.lines = run.parser.lines;
        run.outcome.malformed = run.parser.malformed;
        run.outcome.counters = budget.snapshot();
        Ok(run.outcome)
    }
}

struct Run {
    parser: StreamParser,
    feed: Feed,
    outcome: Outcome,
    status: Option<ProgressBar>,
    started: Instant,
}

enum Stage {
    Running,
    Terminating { kill_at: Instant },
}

impl Run {
    #[allow(clippy::too_many_arguments)]
    fn supervise(
        &mut self,
        child: &mut Child,
        group: Pid,
        generation: u64,
        rx: &Receiver<Msg>,
        budget: &BudgetBreaker,
        stagnation: &StagnationBreaker,
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
                        let signals = self.parser.parse_line(line);
                        if self.outcome.stop.is_none() {
                            self.outcome.stop = self.feed.feed(signals, budget, stagnation);
                        }
                    }
                }
                Ok(Msg::Eof(g)) if g == generation => eof = true,
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
                if matches!(phase, Stage::Running) && self.outcome.stop.is_none() {
                    self.outcome.stop = budget.tick().into_iter().next().map(Stop::Budget);
                }
                self.draw_status(budget, stagnation);
            }
            if matches!(phase, Stage::Running) && self.outcome.stop.is_some() {
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

    fn draw_status(&self, budget: &BudgetBreaker, stagnation: &StagnationBreaker) {
        let Some(bar) = &self.status else {
            return;
        };
        let snapshot = budget.snapshot();
        let tool_calls: u64 = snapshot.tasks.iter().map(|t| t.tool_calls).sum();
        let spend: f64 = snapshot.tasks.iter().map(|t| t.spend_cents).sum();
        let idle = snapshot
            .tasks
            .iter()
            .map(|t| t.idle_secs)
            .fold(f64::INFINITY, f64::min);
        let idle = if idle.is_finite() { idle } else { 0.0 };
        bar.set_message(format!(
            "agentbreaker {} | {} tool calls | {} | idle {} | {}",
            clock(self.started.elapsed().as_secs_f64()),
            tool_calls,
            dollars(spend),
            clock(idle),
            stagnation.state()
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
