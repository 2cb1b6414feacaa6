//! Crash-safe state files (contract §2 "write atomically (temp file, fsync, rename)"; decisions
//! "Files"): a process that saves FailureBreaker state in a tight loop is killed with SIGKILL at
//! random moments, and after every kill the state file loads as exactly one of the states that
//! were written — the last one completed or the one being written — never a torn or corrupt file,
//! and the states only move forward.
//!
//! The writer is this test binary itself, started again with `AGENTBREAKER_CRASH_WRITER` naming
//! the state file: the `writer_process` test then loops until it is killed. Without the variable
//! `writer_process` is an ordinary bounded test of the same loop.
//!
//! `AGENTBREAKER_KILLS` sets the number of kills (default 40; `make reliability` uses 200), and
//! `AGENTBREAKER_KILL_SEED` replays a run (the seed is printed).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use agentbreaker::{
    Event, FailureBreaker, FailureConfig, FailureRecord, FailureSnapshot, ManualClock, State,
};

/// Names the state file the child writer saves to.
const WRITER_ENV: &str = "AGENTBREAKER_CRASH_WRITER";
/// The line the writer prints once it has loaded the file and is about to write state `k`.
const READY: &str = "AGENTBREAKER-WRITER-READY";
/// History entries per state: makes each file about 14 KB, so a kill often lands mid-write.
const HISTORY: u64 = 48;
const DEFAULT_KILLS: usize = 40;

/// The `k`-th state the writer saves. Consecutive states differ in every field (even: CLOSED with
/// 2 failures; odd: OPEN with 7 and an `openedAt`), and `trips` is `k`, so a file names the state
/// it claims to be and every other byte of it can be checked against that claim.
fn state_for(k: u64) -> FailureSnapshot {
    let open = k % 2 == 1;
    FailureSnapshot {
        version: 1,
        kind: "failure".into(),
        state: if open { State::Open } else { State::Closed },
        consecutive_failures: if open { 7 } else { 2 },
        opened_at: open.then_some(1_000_000 + k),
        backoff_level: (k % 5) as u32,
        trips: k,
        failure_history: (0..HISTORY)
            .map(|j| FailureRecord {
                at_ms: k * 1000 + j,
                error: format!(
                    "state {k} entry {j}: {}",
                    "x".repeat(200 + (k % 7) as usize)
                ),
                state: if j % 3 == 0 {
                    State::HalfOpen
                } else {
                    State::Closed
                },
            })
            .collect(),
    }
}

fn config(state_path: Option<PathBuf>) -> FailureConfig {
    FailureConfig {
        history_limit: HISTORY as u32,
        state_path,
        ..FailureConfig::default()
    }
}

/// Reads the state file as the library does and checks it is exactly one of the written states;
/// returns which.
fn load_state(path: &Path) -> Result<u64, String> {
    let breaker = FailureBreaker::with_clock(config(None), ManualClock::shared(0)).unwrap();
    match breaker.load(path) {
        Ok(true) => {}
        Ok(false) => return Err("the state file is missing".into()),
        Err(e) => return Err(format!("the state file does not load: {e}")),
    }
    let snap = breaker.snapshot();
    let k = snap.trips;
    if snap != state_for(k) {
        return Err(format!(
            "the state file claims to be state {k} but differs from it: {snap:?}"
        ));
    }
    Ok(k)
}

/// Files in `dir` other than the state file itself (the writer's temporary files).
fn stray_files(dir: &Path, state_file: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p != state_file)
        .collect()
}

/// Writes states `first..` to `path`, alternating the two ways a breaker saves: `save(path)` on a
/// plain breaker, and the automatic save of a breaker configured with `statePath` (which saves
/// after every `restore`). Stops after `count` states (`None`: never, until killed).
fn write_states(path: &Path, first: u64, count: Option<u64>) {
    let plain = FailureBreaker::with_clock(config(None), ManualClock::shared(0)).unwrap();
    let auto = FailureBreaker::with_clock(config(Some(path.to_path_buf())), ManualClock::shared(0))
        .unwrap();
    // A failed automatic save is a warning event; the writer must not go on silently.
    let failed_saves = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&failed_saves);
    auto.add_listener(Arc::new(move |e: &Event| {
        if let Event::Warning { message, .. } = e
            && message.starts_with("Could not save state")
        {
            eprintln!("{message}");
            counter.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }));
    let mut k = first;
    loop {
        if count.is_some_and(|n| k >= first + n) {
            return;
        }
        let snap = state_for(k);
        if k % 2 == 0 {
            plain.restore(&snap).unwrap();
            plain.save(path).expect("save");
        } else {
            auto.restore(&snap).unwrap();
            assert_eq!(failed_saves.load(Ordering::SeqCst), 0, "a save failed");
        }
        if count.is_some() {
            // The bounded form checks every write as it goes.
            assert_eq!(load_state(path), Ok(k), "after writing state {k}");
        }
        k += 1;
    }
}

/// The writer. As a child process (`AGENTBREAKER_CRASH_WRITER` set) it loads the state the
/// previous writer left (exactly as a restarted agent would), announces the next state number and
/// writes states until it is killed. Run directly, it writes 60 states and checks each one.
#[test]
fn writer_process() {
    if let Some(path) = std::env::var_os(WRITER_ENV) {
        let path = PathBuf::from(path);
        let next = if path.exists() {
            load_state(&path).expect("the previous writer's file") + 1
        } else {
            0
        };
        println!("{READY} {next}");
        write_states(&path, next, None);
        unreachable!("the writer runs until it is killed");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    write_states(&path, 0, Some(30));
    // Starting again from the file continues the sequence, as the child writers do.
    write_states(&path, load_state(&path).unwrap() + 1, Some(30));
    assert_eq!(load_state(&path), Ok(59));
    assert_eq!(stray_files(dir.path(), &path), Vec::<PathBuf>::new());
}

/// A small deterministic generator (xorshift64*), so a failing run can be replayed by its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a whole number")),
        Err(_) => default,
    }
}

/// Starts a writer and waits for its ready line; returns the child and the state it announced.
fn start_writer(path: &Path) -> (Child, u64) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "writer_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WRITER_ENV, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the writer");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            // libtest may print "test writer_process ... " on the same line first.
            if let Some((_, n)) = line.split_once(&format!("{READY} ")) {
                let _ = tx.send(n.trim().parse::<u64>().unwrap());
            }
        }
    });
    // Generous: a loaded 2-core machine may take a while to start a process.
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(next) => (child, next),
        Err(_) => {
            let _ = child.kill();
            let status = child.wait().unwrap();
            panic!("the writer did not become ready (it ended with {status})");
        }
    }
}

/// SIGKILL at random moments: the state file is always exactly one whole written state, the
/// states never go backwards, each restarted writer continues from the file, and every kill
/// leaves at most one temporary file behind.
#[test]
fn sigkill_during_saves_never_leaves_a_torn_state_file() {
    use std::os::unix::process::ExitStatusExt;

    let kills = env_number("AGENTBREAKER_KILLS", DEFAULT_KILLS as u64) as usize;
    let seed = env_number(
        "AGENTBREAKER_KILL_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1,
    );
    eprintln!("crash safety: {kills} kills, AGENTBREAKER_KILL_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");

    // Calibrate the kill moments on this machine: most kills land within the first few saves.
    let save_us = {
        let probe = tempfile::tempdir().unwrap();
        let start = Instant::now();
        write_states(&probe.path().join("state.json"), 0, Some(10));
        (start.elapsed().as_micros() as u64 / 10).max(50)
    };
    eprintln!("crash safety: one save takes about {save_us} us here");

    let mut last: Option<u64> = None;
    let mut strays_seen = 0usize;
    let mut kills_with_a_stray = 0usize;
    let started = Instant::now();
    for kill in 0..kills {
        let (mut child, next) = start_writer(&path);
        assert_eq!(
            next,
            last.map_or(0, |k| k + 1),
            "kill {kill}: the writer did not continue from the file"
        );
        // Mostly within the first milliseconds of writing, sometimes later, sometimes at once.
        let wait_us = match rng.below(10) {
            0 => 0,
            1..=7 => rng.below(4 * save_us),
            _ => rng.below(20 * save_us),
        };
        thread::sleep(Duration::from_micros(wait_us));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "kill {kill}: the writer ended on its own ({status}) instead of being killed"
        );

        // Judged on every kill, also one before the writer's first save completed (the temporary
        // file of that save may be there).
        let strays = stray_files(dir.path(), &path);
        assert!(
            strays.len() <= 1,
            "kill {kill}: more than one temporary file beside the state file: {strays:?}"
        );
        for stray in &strays {
            let name = stray.file_name().unwrap().to_string_lossy();
            assert!(
                name.starts_with(".state.json.agentbreaker-") && name.ends_with(".tmp"),
                "kill {kill}: unexpected file {name}"
            );
            kills_with_a_stray += 1;
            // A crashed writer's temporary file must never be mistaken for the state; a later
            // save removes it once it is STALE_TEMP_AGE old (persist's own test). Remove it here
            // so that each kill is judged on its own leftovers.
            std::fs::remove_file(stray).unwrap();
        }
        strays_seen += strays.len();

        let k = match load_state(&path) {
            Ok(k) => k,
            // Killed before its first save completed: the file is still the previous writer's
            // (or, before any save at all, absent).
            Err(e) if last.is_none() && !path.exists() => {
                eprintln!("kill {kill}: no state yet ({e})");
                continue;
            }
            Err(e) => panic!("kill {kill} after {wait_us} us: {e}"),
        };
        if let Some(prev) = last {
            assert!(
                k >= prev,
                "kill {kill}: the file went back from state {prev} to state {k}"
            );
        }
        last = Some(k);
    }
    let states = last.map_or(0, |k| k + 1);
    eprintln!(
        "crash safety: {kills} kills survived in {:.1} s; {states} states written; \
         {kills_with_a_stray} kills left a temporary file ({strays_seen} in all)",
        started.elapsed().as_secs_f64()
    );
    // The kills must have hit the interesting moments: some in the middle of a save (a temporary
    // file was left), and the writers must have got on with writing in between.
    assert!(
        kills < 20 || kills_with_a_stray > 0,
        "no kill landed in the middle of a save"
    );
    assert!(
        states >= kills as u64 / 4,
        "the writers hardly wrote anything ({states} states in {kills} runs)"
    );
}
