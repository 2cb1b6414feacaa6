//! Running an agent under a Monitor: its own process group, its stdout passed through unchanged
//! and parsed line by line into the Monitor's events, a tick every second, a one-line notice on
//! stderr for each warning, SIGTERM then SIGKILL to the whole group on a halt, signals forwarded,
//! every child reaped and no group member left behind.
//!
//! Three threads per run: a reader splits the agent's stdout into lines and hands each to the
//! writer (which passes it through to our stdout) and to the supervising loop (which parses it and
//! ticks the Monitor). The loop never writes the agent's output itself, so a stdout nobody reads
//! cannot stop the ticks, the halts or the signals; and the lines read but not yet written and
//! parsed are bounded ([`MAX_QUEUED_BYTES`]): beyond that the reader waits, and so do the agent's
//! writes (backpressure), instead of our memory growing. After the agent exits, its output is
//! written out however long our stdout takes (a signal ends the wait); a pipe that stays open with
//! nothing in it (a process outside the group holds it) is let go after a few seconds.

use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use agentbreaker::Verdict;
use indicatif::{ProgressBar, ProgressStyle};
use nix::sys::signal::{Signal as Sig, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
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
/// The most bytes of the agent's output read and not yet both written out and parsed (one line
/// longer than that is let in alone). When they are reached the reader waits: the agent's own
/// writes block until our stdout takes more.
const MAX_QUEUED_BYTES: usize = 4 * 1024 * 1024;

enum Msg {
    /// A line (or a piece of one) read from the agent of that run.
    Line(u64, Arc<Chunk>),
    /// The agent's stdout ended.
    Eof(u64),
    /// Everything read was written out (or stdout is closed).
    Written(u64),
    Signal(i32),
}

/// The bound on the output waiting to be written out and parsed, shared by one run's reader,
/// writer and loop.
#[derive(Debug, Default)]
struct Queue {
    state: Mutex<QueueState>,
    room: Condvar,
}

#[derive(Debug, Default)]
struct QueueState {
    /// Bytes read and not yet released by both the writer and the loop.
    bytes: usize,
    /// How many times the reader had to wait for room (our stdout is slower than the agent).
    waits: u64,
    /// The reader is waiting for room now.
    waiting: bool,
    /// The reader stops (the agent's stdout is let go).
    reading_stopped: bool,
    /// The writer writes nothing more (the run is over).
    abandoned: bool,
}

impl Queue {
    fn state(&self) -> MutexGuard<'_, QueueState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits until `n` more bytes fit (at once when nothing waits); false once the run is over.
    fn admit(&self, n: usize) -> bool {
        let mut st = self.state();
        let mut waited = false;
        while !st.reading_stopped && st.bytes > 0 && st.bytes.saturating_add(n) > MAX_QUEUED_BYTES {
            if !waited {
                st.waits += 1;
                st.waiting = true;
                waited = true;
            }
            st = self
                .room
                .wait(st)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        st.waiting = false;
        if st.reading_stopped {
            return false;
        }
        st.bytes += n;
        true
    }

    fn release(&self, n: usize) {
        let mut st = self.state();
        st.bytes = st.bytes.saturating_sub(n);
        drop(st);
        self.room.notify_all();
    }

    /// The reader takes nothing more; what it took is still written out.
    fn stop_reading(&self) {
        self.state().reading_stopped = true;
        self.room.notify_all();
    }

    /// Nothing more is read or written.
    fn abandon(&self) {
        let mut st = self.state();
        st.reading_stopped = true;
        st.abandoned = true;
        drop(st);
        self.room.notify_all();
    }

    /// Bytes taken and not yet written out and parsed.
    fn bytes(&self) -> usize {
        self.state().bytes
    }

    fn abandoned(&self) -> bool {
        self.state().abandoned
    }

    /// Whether the reader is waiting for room now, and how many times it waited so far.
    fn waits(&self) -> (bool, u64) {
        let st = self.state();
        (st.waiting, st.waits)
    }
}

/// A piece of the agent's output, held by the writer and the loop: its bytes leave the queue when
/// both are done with it.
struct Chunk {
    bytes: Vec<u8>,
    queue: Arc<Queue>,
}

impl Drop for Chunk {
    fn drop(&mut self) {
        self.queue.release(self.bytes.len());
    }
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
        if opts.task.is_none() {
            // The agent's start is its first sign of life: one that never prints anything is
            // idle (and running) from here, not from a first line that may never come.
            watch.observe(&[json!({"type": "alive"})]);
        }
        let status = (opts.status_line && std::io::stderr().is_terminal()).then(status_bar);
        let queue = Arc::new(Queue::default());
        let piped = child.stdout.take().map(|stdout| {
            let (out_tx, out_rx) = mpsc::channel();
            let tx = self.tx.clone();
            let q = Arc::clone(&queue);
            // The status line is cleared around each write only when both go to the terminal: a
            // write blocked on a pipe must not hold the status line (and with it the loop).
            let bar = status.clone().filter(|_| std::io::stdout().is_terminal());
            thread::spawn(move || write_out(&out_rx, generation, &tx, &q, bar.as_ref()));
            let tx = self.tx.clone();
            let q = Arc::clone(&queue);
            thread::spawn(move || read_lines(stdout, generation, &tx, &out_tx, &q));
        });
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
            status,
            started: Instant::now(),
            queue,
            piped: piped.is_some(),
        };
        // The agent is waited for by its pid (`waitpid`, which also tells when it is stopped).
        run.supervise(group, generation, &self.rx, watch, opts);
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
    /// The output of this run waiting to be written out and parsed.
    queue: Arc<Queue>,
    /// Whether the agent's stdout is read (always, unless the pipe could not be made).
    piped: bool,
}

enum Stage {
    Running,
    Terminating { kill_at: Instant },
}

impl Run {
    fn supervise(
        &mut self,
        group: Pid,
        generation: u64,
        rx: &Receiver<Msg>,
        watch: &mut Watch,
        opts: &Options,
    ) {
        let mut phase = Stage::Running;
        let mut next_tick = Instant::now() + Duration::from_secs(1);
        let mut eof = !self.piped;
        let mut written = !self.piped;
        let mut exited: Option<AgentExit> = None;
        let mut told_stopped = false;
        let mut killed_leftovers = false;
        // After the agent exited: since when its stdout has been open with nothing for our
        // stdout to catch up on, and how often the reader had waited for our stdout then.
        let mut quiet_since = Instant::now();
        let mut waits_seen = 0;
        let mut let_go = false;
        loop {
            if let_go && self.queue.bytes() == 0 {
                // What was read from a pipe we let go of is written out.
                written = true;
            }
            if eof && written && exited.is_some() {
                break;
            }
            let now = Instant::now();
            let mut wait = next_tick.saturating_duration_since(now);
            if eof || matches!(phase, Stage::Terminating { .. }) {
                wait = wait.min(Duration::from_millis(50));
            }
            match rx.recv_timeout(wait) {
                Ok(Msg::Line(g, chunk)) if g == generation => {
                    let bytes = &chunk.bytes;
                    self.capture(bytes);
                    if matches!(phase, Stage::Running) {
                        let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
                        let line = line.strip_suffix(b"\r").unwrap_or(line);
                        let mut events = self.parser.parse_line(line);
                        if events.is_empty() {
                            // Output that is no event (plain text, a line we cannot read) still
                            // shows the agent is alive.
                            events.push(json!({"type": "alive"}));
                        }
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
                Ok(Msg::Written(g)) if g == generation => written = true,
                Ok(Msg::Signal(sig)) => {
                    self.outcome.interrupted.get_or_insert(sig);
                    if exited.is_some() {
                        // The agent is gone; what is left is its output for a stdout that does
                        // not take it: stop waiting.
                        break;
                    }
                    let forward = Sig::try_from(sig).unwrap_or(Sig::SIGTERM);
                    let _ = killpg(group, forward);
                    // A stopped agent (Ctrl-Z, a read from the terminal) gets it now.
                    let _ = killpg(group, Sig::SIGCONT);
                    if matches!(phase, Stage::Running) {
                        phase = Stage::Terminating {
                            kill_at: Instant::now() + opts.grace,
                        };
                    }
                }
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => (eof, written) = (true, true),
            }
            if exited.is_none() {
                match waitpid(group, Some(WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED)) {
                    Ok(WaitStatus::Exited(_, code)) => exited = Some(AgentExit::Code(code)),
                    Ok(WaitStatus::Signaled(_, sig, _)) => {
                        exited = Some(AgentExit::Signal(sig as i32));
                    }
                    Ok(WaitStatus::Stopped(_, sig @ (Sig::SIGTTIN | Sig::SIGTTOU)))
                        if !told_stopped =>
                    {
                        told_stopped = true;
                        self.say(&stopped_by_terminal(sig));
                    }
                    // Reaped elsewhere (it cannot be): no status to wait for.
                    Err(nix::errno::Errno::ECHILD) => exited = Some(AgentExit::Code(1)),
                    _ => {}
                }
                if exited.is_some() {
                    quiet_since = Instant::now();
                }
            }
            if exited.is_some() {
                // The agent is gone: whatever is left of its group goes too.
                if !killed_leftovers {
                    let _ = killpg(group, Sig::SIGKILL);
                    killed_leftovers = true;
                }
                // Output our stdout has not taken yet is waited for, however long that takes
                // (`| less`); a pipe that stays open with nothing to write is something outside
                // the group holding it: let go of it.
                let (waiting, waits) = self.queue.waits();
                if eof || waiting || waits != waits_seen {
                    quiet_since = Instant::now();
                    waits_seen = waits;
                }
                if !eof && quiet_since.elapsed() > DRAIN_AFTER_EXIT * 2 {
                    self.queue.stop_reading();
                    let_go = true;
                    eof = true;
                    if matches!(phase, Stage::Running) {
                        let events = self.parser.finish();
                        self.observe(watch, &events);
                    }
                }
            }
            let now = Instant::now();
            if now >= next_tick {
                next_tick += Duration::from_secs(1);
                // No duration or idle limit for an agent that already ended.
                if matches!(phase, Stage::Running) && exited.is_none() {
                    let said = watch.tick();
                    self.tell(&said);
                }
                watch.metrics_tick();
                self.draw_status(watch);
            }
            if matches!(phase, Stage::Running) && watch.halt.is_some() {
                let _ = killpg(group, Sig::SIGTERM);
                let _ = killpg(group, Sig::SIGCONT);
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
        // A reader or writer still at work (for a stdout that takes nothing) stops there.
        self.queue.abandon();
        self.outcome.agent = match exited {
            Some(agent) => Some(agent),
            None => {
                let _ = killpg(group, Sig::SIGKILL);
                reap(group)
            }
        };
    }

    /// One line on stderr (around the status line).
    fn say(&self, line: &str) {
        match &self.status {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    /// Hands events to the Monitor and prints its warnings.
    fn observe(&mut self, watch: &mut Watch, events: &[Value]) {
        let said = watch.observe(events);
        self.tell(&said);
    }

    /// One notice line on stderr per warning (the halt card is printed by the caller).
    fn tell(&self, said: &[Verdict]) {
        for v in said.iter().filter(|v| v.is_warn()) {
            self.say(&notice(v));
        }
    }

    /// Keeps the last of the output for `loop`.
    fn capture(&mut self, bytes: &[u8]) {
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

/// Waits for the agent `pid` to end; `None` if it cannot be waited for.
fn reap(pid: Pid) -> Option<AgentExit> {
    loop {
        match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, code)) => return Some(AgentExit::Code(code)),
            Ok(WaitStatus::Signaled(_, sig, _)) => return Some(AgentExit::Signal(sig as i32)),
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return None,
        }
    }
}

/// What to tell when the agent was stopped for using the terminal from its background process
/// group (docs/cli.md, "The agent and the terminal").
fn stopped_by_terminal(sig: Sig) -> String {
    let what = if sig == Sig::SIGTTIN {
        "read from the terminal"
    } else {
        "changed the terminal's settings"
    };
    format!(
        "agentbreaker: the agent is stopped ({}): it {what}, which `run` keeps for itself; give it \
         its input another way (`< FILE`, `< /dev/null`, a pipe) or guard an interactive agent \
         with `agentbreaker hook` (docs/cli.md). It stays stopped until a limit ends it.",
        sig.as_str()
    )
}

fn status_bar() -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
        bar.set_style(style);
    }
    bar
}

/// Passes the agent's output through to our stdout, byte for byte, then says `Written`. A closed
/// stdout (EPIPE) only ends the writing: the output is still taken (and parsed by the loop).
fn write_out(
    rx: &Receiver<Arc<Chunk>>,
    generation: u64,
    tx: &Sender<Msg>,
    queue: &Queue,
    bar: Option<&ProgressBar>,
) {
    let mut open = true;
    for chunk in rx {
        if open && !queue.abandoned() {
            let write = || {
                let mut out = std::io::stdout().lock();
                out.write_all(&chunk.bytes).and_then(|()| out.flush())
            };
            open = match bar {
                Some(bar) => bar.suspend(write),
                None => write(),
            }
            .is_ok();
        }
    }
    let _ = tx.send(Msg::Written(generation));
}

/// Reads `source` into lines (each with its newline), each to the writer (`out`) and the loop
/// (`tx`), then `Eof` on `tx`. Waits while `queue` is full; stops once it is abandoned.
fn read_lines(
    source: impl Read,
    generation: u64,
    tx: &Sender<Msg>,
    out: &Sender<Arc<Chunk>>,
    queue: &Arc<Queue>,
) {
    let send = |bytes: Vec<u8>| -> bool {
        if !queue.admit(bytes.len()) {
            return false;
        }
        let chunk = Arc::new(Chunk {
            bytes,
            queue: Arc::clone(queue),
        });
        // A writer that is gone (it cannot be before the end) only means nothing is written.
        let _ = out.send(Arc::clone(&chunk));
        tx.send(Msg::Line(generation, chunk)).is_ok()
    };
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
        if (complete || line.len() >= MAX_LINE_BYTES) && !send(std::mem::take(&mut line)) {
            return;
        }
    }
    if !line.is_empty() && !send(line) {
        return;
    }
    let _ = tx.send(Msg::Eof(generation));
}
