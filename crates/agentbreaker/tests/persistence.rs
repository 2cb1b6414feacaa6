//! State files under damage (contract §2 persistence; decisions "Files"): every truncation and a wide
//! range of corruptions of a state file are `INVALID_SNAPSHOT` and leave the breaker exactly as
//! it was (a load is all or nothing); paths that cannot be written are `IO` and the in-memory
//! state is kept; a breaker with `statePath` keeps working (and warning) while its file cannot be
//! written; and save/load round-trips every valid state.
//!
//! Tests may run as root, where permission bits are ignored, so unwritable paths are made from
//! things no permission allows: a directory path whose parent is a regular file, `/proc`, an
//! over-long file name, a target that is a non-empty directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentbreaker::{
    Event, FailureBreaker, FailureConfig, FailureRecord, FailureSnapshot, ManualClock, State,
};
use proptest::prelude::*;
use serde_json::Value;

fn breaker(config: FailureConfig) -> (FailureBreaker, Arc<ManualClock>) {
    let clock = ManualClock::shared(10_000);
    let b = FailureBreaker::with_clock(config, clock.clone()).unwrap();
    (b, clock)
}

/// A breaker with a distinctive state: OPEN, backoff level 2, history with quotes, newlines and
/// non-ASCII text.
fn distinctive() -> FailureBreaker {
    let (b, clock) = breaker(FailureConfig {
        backoff_multiplier: 2.0,
        ..FailureConfig::default()
    });
    for i in 0..5 {
        b.record_failure(&format!("fehler \"{i}\" — überall\nline two"));
    }
    for _ in 0..2 {
        clock.advance(3_600_000);
        assert!(b.should_allow_operation().allowed);
        b.record_failure("probe failed");
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().backoff_level, 2);
    b
}

/// A plain CLOSED breaker with one failure: what the damaged files are loaded into.
fn target() -> FailureBreaker {
    let (b, _) = breaker(FailureConfig::default());
    b.record_failure("the state before the load");
    b
}

/// Events a breaker emits.
fn recorder(b: &FailureBreaker) -> Arc<Mutex<Vec<Event>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    b.add_listener(Arc::new(move |e: &Event| {
        sink.lock().unwrap().push(e.clone());
        Ok(())
    }));
    seen
}

/// Writes `bytes` to a new file in `dir`. (Rewriting one file in place would be slow: ext4 flushes
/// a file that is truncated and written again when it is closed.)
fn fresh_file(dir: &Path, bytes: &[u8]) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("damaged-{n}.json"));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

// -------------------------------------------------------------------------------------------------
// Damaged files

/// Every prefix of a state file, from empty to one byte short, is INVALID_SNAPSHOT for `load` and
/// for a breaker constructed on it with `statePath`; the loading breaker is unchanged and the file
/// is left as it was (for a person to look at).
#[test]
fn every_truncation_of_a_state_file_is_invalid_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    distinctive().save(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    assert!(bytes.len() > 500, "a state file of {} bytes", bytes.len());
    let loader = target();
    let before = (loader.status(), loader.snapshot());
    for len in 0..bytes.len() {
        let path = fresh_file(dir.path(), &bytes[..len]);
        let e = loader.load(&path).unwrap_err();
        assert_eq!(e.code(), "INVALID_SNAPSHOT", "prefix of {len} bytes: {e}");
        assert_eq!((loader.status(), loader.snapshot()), before, "prefix {len}");
        // Construction on the same file: every 16th length (each one builds a breaker).
        if len % 16 == 0 {
            let config = FailureConfig {
                state_path: Some(path.clone()),
                ..FailureConfig::default()
            };
            let e = FailureBreaker::with_clock(config, ManualClock::shared(0)).unwrap_err();
            assert_eq!(e.code(), "INVALID_SNAPSHOT", "statePath, prefix {len}");
            assert_eq!(std::fs::read(&path).unwrap(), &bytes[..len], "file kept");
        }
        std::fs::remove_file(&path).unwrap();
    }
    // The whole file loads.
    assert!(loader.load(&good).unwrap());
    assert_eq!(loader.snapshot(), distinctive().snapshot());
}

/// Single-byte damage anywhere in a state file (overwritten bytes, flipped bits, deleted and
/// inserted bytes): the load is all or nothing. Either it is INVALID_SNAPSHOT and the breaker is
/// unchanged, or the damaged file still parses as a valid snapshot and the breaker then holds
/// exactly what `restore` of that JSON gives. Never IO, never a panic, never a half-applied state.
#[test]
fn damaged_state_files_load_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    distinctive().save(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let loader = target();
    let before = (loader.status(), loader.snapshot());
    let (mut rejected, mut accepted) = (0usize, 0usize);
    let replacements: [u8; 8] = [b'"', b'}', b'0', b'9', b' ', 0, 0xff, b'x'];
    for at in 0..bytes.len() {
        let mut variants: Vec<Vec<u8>> = Vec::new();
        let r = replacements[at % replacements.len()];
        let mut v = bytes.clone();
        v[at] = r;
        variants.push(v);
        let mut v = bytes.clone();
        v[at] ^= 1 << (at % 8);
        variants.push(v);
        if at % 4 == 0 {
            let mut v = bytes.clone();
            v.remove(at);
            variants.push(v);
            let mut v = bytes.clone();
            v.insert(at, b',');
            variants.push(v);
        }
        for damaged in variants {
            let path = fresh_file(dir.path(), &damaged);
            match loader.load(&path) {
                Err(e) => {
                    assert_eq!(e.code(), "INVALID_SNAPSHOT", "byte {at}: {e}");
                    assert_eq!((loader.status(), loader.snapshot()), before, "byte {at}");
                    rejected += 1;
                }
                Ok(loaded) => {
                    assert!(loaded);
                    let value: Value = serde_json::from_slice(&damaged).unwrap();
                    let reference = target();
                    reference.restore_json(&value).unwrap();
                    assert_eq!(loader.snapshot(), reference.snapshot(), "byte {at}");
                    assert_eq!(loader.status(), reference.status(), "byte {at}");
                    accepted += 1;
                    // Back to the state before, for the next variant.
                    loader.restore(&before.1).unwrap();
                }
            }
            std::fs::remove_file(&path).unwrap();
        }
    }
    eprintln!("damaged files: {rejected} rejected, {accepted} still valid snapshots");
    // Most damage must be caught; some (a digit for a digit, a letter inside an error text) is
    // a different valid state, which is what all-or-nothing allows.
    assert!(
        rejected > accepted,
        "{rejected} rejected, {accepted} accepted"
    );
    assert!(accepted > 0);
}

/// Whole-file damage: a state file replaced by another kind of content, a second snapshot
/// appended (a writer that appended instead of replacing), a byte-order mark, a file over the
/// 64 MiB limit (sparse, so cheap to make).
#[test]
fn corrupt_state_files_are_invalid_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    distinctive().save(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("two snapshots", [bytes.clone(), bytes.clone()].concat()),
        (
            "byte-order mark",
            [b"\xef\xbb\xbf".to_vec(), bytes.clone()].concat(),
        ),
        (
            "UTF-16",
            text.encode_utf16().flat_map(u16::to_le_bytes).collect(),
        ),
        ("object as array", {
            let mut v = bytes.clone();
            v[0] = b'[';
            v
        }),
        ("comment", [b"// state\n".to_vec(), bytes.clone()].concat()),
        (
            "state lower case",
            text.replacen("\"OPEN\"", "\"open\"", 1).into_bytes(),
        ),
        (
            "negative count",
            text.replacen("\"consecutiveFailures\": ", "\"consecutiveFailures\": -", 1)
                .into_bytes(),
        ),
        (
            "count past u64",
            text.replacen(
                "\"consecutiveFailures\": ",
                "\"consecutiveFailures\": 99999999999999999999",
                1,
            )
            .into_bytes(),
        ),
        (
            "backoff level past u32",
            text.replacen("\"backoffLevel\": 2", "\"backoffLevel\": 4294967296", 1)
                .into_bytes(),
        ),
        (
            "float count",
            text.replacen("\"trips\": 1", "\"trips\": 1.5", 1)
                .into_bytes(),
        ),
        (
            "unknown key",
            text.replacen("\"openedAt\": ", "\"openedAtX\": ", 1)
                .into_bytes(),
        ),
    ];
    let value: Value = serde_json::from_slice(&bytes).unwrap();
    for (label, key, replacement) in [
        ("OPEN without openedAt", "openedAt", Value::Null),
        ("version 2", "version", Value::from(2)),
        ("kind stagnation", "kind", Value::from("stagnation")),
        ("history not a list", "failureHistory", Value::from("none")),
    ] {
        let mut v = value.clone();
        v[key] = replacement;
        cases.push((label, serde_json::to_vec_pretty(&v).unwrap()));
    }
    let mut v = value.clone();
    v.as_object_mut().unwrap().remove("trips");
    cases.push(("missing key", serde_json::to_vec(&v).unwrap()));
    // Every case must really differ from the good file.
    for (label, case) in &cases {
        assert_ne!(case, &bytes, "{label} did not change the file");
    }
    let loader = target();
    let before = (loader.status(), loader.snapshot());
    let path = dir.path().join("state.json");
    for (label, case) in cases.drain(..) {
        std::fs::write(&path, &case).unwrap();
        let e = loader.load(&path).unwrap_err();
        assert_eq!(e.code(), "INVALID_SNAPSHOT", "{label}: {e}");
        assert_eq!((loader.status(), loader.snapshot()), before, "{label}");
    }
    // Over the size limit: a sparse file of 64 MiB + 1 byte.
    let big = std::fs::File::create(&path).unwrap();
    big.set_len(64 * 1024 * 1024 + 1).unwrap();
    drop(big);
    let e = loader.load(&path).unwrap_err();
    assert_eq!(e.code(), "INVALID_SNAPSHOT", "oversized: {e}");
    assert_eq!((loader.status(), loader.snapshot()), before, "oversized");
}

// -------------------------------------------------------------------------------------------------
// Paths that cannot be written

/// Paths no permission makes writable, so the test holds when run as root.
fn unwritable_paths(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let file = dir.join("a-regular-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let non_empty_dir = dir.join("a-directory");
    std::fs::create_dir_all(non_empty_dir.join("inside")).unwrap();
    vec![
        ("parent is a regular file", file.join("state.json")),
        (
            "grandparent is a regular file",
            file.join("sub").join("state.json"),
        ),
        ("in /proc", PathBuf::from("/proc/agentbreaker-state.json")),
        (
            "in /proc/self",
            PathBuf::from("/proc/self/agentbreaker.json"),
        ),
        ("name too long", dir.join("n".repeat(300))),
        ("target is a non-empty directory", non_empty_dir),
    ]
}

/// `save` to a path that cannot be written is IO, changes nothing in memory, creates nothing,
/// leaves no temporary file, and the breaker goes on working (and saving elsewhere).
#[test]
fn saving_to_an_unwritable_path_is_io_and_keeps_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let b = distinctive();
    let seen = recorder(&b);
    let before = (b.status(), b.snapshot(), b.metrics());
    let listing = files_in(dir.path());
    let paths = unwritable_paths(dir.path());
    let listing_with_fixtures = files_in(dir.path());
    assert!(listing_with_fixtures.len() > listing.len());
    for (label, path) in paths {
        let e = b.save(&path).unwrap_err();
        assert_eq!(e.code(), "IO", "{label}: {e}");
        assert_eq!((b.status(), b.snapshot(), b.metrics()), before, "{label}");
        assert_eq!(files_in(dir.path()), listing_with_fixtures, "{label}");
    }
    // The file under the non-empty directory was not touched either.
    assert_eq!(
        files_in(&dir.path().join("a-directory")),
        vec![dir.path().join("a-directory").join("inside")]
    );
    assert!(seen.lock().unwrap().is_empty(), "save emits no events");
    // Still a working breaker that saves to a good path.
    let good = dir.path().join("good.json");
    b.save(&good).unwrap();
    let copy = target();
    assert!(copy.load(&good).unwrap());
    assert_eq!(copy.snapshot(), b.snapshot());
}

/// A breaker whose `statePath` becomes unwritable after it started (its directory replaced by a
/// regular file): every transition still happens in memory, each failed save is one warning
/// after its transition, and once the directory is back the next transition is saved.
#[test]
fn state_path_that_becomes_unwritable_warns_and_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("state");
    std::fs::create_dir(&state_dir).unwrap();
    let path = state_dir.join("breaker.json");
    let clock = ManualClock::shared(0);
    let config = FailureConfig {
        failure_threshold: 2,
        cooldown_ms: 1_000,
        state_path: Some(path.clone()),
        ..FailureConfig::default()
    };
    let b = FailureBreaker::with_clock(config.clone(), clock.clone()).unwrap();
    let seen = recorder(&b);
    b.record_failure("a");
    b.record_failure("b");
    assert_eq!(b.state(), State::Open);
    let saved_open = std::fs::read(&path).unwrap();

    // The directory becomes a regular file.
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_dir(&state_dir).unwrap();
    std::fs::write(&state_dir, b"in the way").unwrap();
    seen.lock().unwrap().clear();

    clock.set(1_000);
    assert!(b.should_allow_operation().allowed); // OPEN -> HALF_OPEN, save fails
    b.record_failure("probe failed"); // HALF_OPEN -> OPEN, save fails
    clock.set(5_000);
    assert!(b.should_allow_operation().allowed); // OPEN -> HALF_OPEN, save fails
    b.record_success(); // HALF_OPEN -> CLOSED, save fails
    b.record_failure("c"); // no transition, no save
    let status = b.status();
    assert_eq!(status.state, State::Closed);
    assert_eq!(status.consecutive_failures, 1);
    assert_eq!(b.metrics().recoveries, 1);
    assert_eq!(b.metrics().reopenings, 1);
    let events = seen.lock().unwrap().clone();
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e {
            Event::StateChange { from, to, .. } => format!("{from}->{to}"),
            Event::Warning { message, .. } => {
                let prefix = format!("Could not save state to {}: ", path.display());
                assert!(message.starts_with(&prefix), "{message}");
                "save failed".to_string()
            }
            Event::Halt { .. } | Event::Verdict { .. } => unreachable!(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "OPEN->HALF_OPEN",
            "save failed",
            "HALF_OPEN->OPEN",
            "save failed",
            "OPEN->HALF_OPEN",
            "save failed",
            "HALF_OPEN->CLOSED",
            "save failed",
        ]
    );
    // The regular file in the way was not touched.
    assert_eq!(std::fs::read(&state_dir).unwrap(), b"in the way");

    // A restart while the path is unwritable cannot read the state: IO (not a fresh breaker that
    // would forget an open circuit).
    let e = FailureBreaker::with_clock(config.clone(), ManualClock::shared(0)).unwrap_err();
    assert_eq!(e.code(), "IO", "{e}");

    // The directory comes back (with the old file): the next transition is saved.
    std::fs::remove_file(&state_dir).unwrap();
    std::fs::create_dir(&state_dir).unwrap();
    std::fs::write(&path, &saved_open).unwrap();
    b.record_failure("d"); // 2 consecutive: CLOSED -> OPEN
    assert_eq!(b.state(), State::Open);
    let restarted = FailureBreaker::with_clock(config, ManualClock::shared(5_000)).unwrap();
    assert_eq!(restarted.snapshot(), b.snapshot());
    assert_eq!(files_in(&state_dir), vec![path]);
}

// -------------------------------------------------------------------------------------------------
// Round trips

fn text_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z ]{0,20}",
        "\\PC{0,40}",
        // Quotes, backslashes, control characters, line and paragraph separators.
        prop::collection::vec(
            prop_oneof![
                Just('"'),
                Just('\\'),
                Just('\n'),
                Just('\u{0}'),
                Just('\u{7f}'),
                Just('\u{2028}'),
                Just('é'),
                Just('🦀'),
                any::<char>(),
            ],
            0..30
        )
        .prop_map(|v| v.into_iter().collect()),
    ]
}

fn state_strategy() -> impl Strategy<Value = State> {
    prop_oneof![
        Just(State::Closed),
        Just(State::HalfOpen),
        Just(State::Open)
    ]
}

fn edge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..10,
        any::<u64>(),
        (0u64..10).prop_map(|k| u64::MAX - k)
    ]
}

fn snapshot_strategy() -> impl Strategy<Value = FailureSnapshot> {
    (
        state_strategy(),
        edge_u64(),
        prop::option::of(edge_u64()),
        prop_oneof![0u32..5, any::<u32>()],
        edge_u64(),
        prop::collection::vec((edge_u64(), text_strategy(), state_strategy()), 0..12),
    )
        .prop_map(|(state, count, opened_at, level, trips, history)| {
            FailureSnapshot {
                version: 1,
                kind: "failure".into(),
                state,
                consecutive_failures: count,
                // OPEN needs openedAt.
                opened_at: if state == State::Open {
                    Some(opened_at.unwrap_or(0))
                } else {
                    opened_at
                },
                backoff_level: level,
                trips,
                failure_history: history
                    .into_iter()
                    .map(|(at_ms, error, state)| FailureRecord {
                        at_ms,
                        error,
                        state,
                    })
                    .collect(),
            }
        })
}

/// What a breaker restored from `s` must hold (contract §2 restore rules): OPEN keeps everything;
/// CLOSED keeps its count and backoff level but not an `openedAt` (it means "when the circuit
/// opened", null once it closes); HALF_OPEN comes back CLOSED with 0 failures and level 0; the
/// history keeps its newest `historyLimit` entries.
fn restored(s: &FailureSnapshot, history_limit: usize) -> FailureSnapshot {
    let mut want = s.clone();
    match s.state {
        State::Open => {}
        State::Closed => want.opened_at = None,
        State::HalfOpen => {
            want.state = State::Closed;
            want.consecutive_failures = 0;
            want.backoff_level = 0;
            want.opened_at = None;
        }
    }
    let skip = want.failure_history.len().saturating_sub(history_limit);
    want.failure_history.drain(..skip);
    want
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(128),
        ..ProptestConfig::default()
    })]

    /// save(path) then load(path) into a fresh breaker gives the state `restore` gives, for any
    /// valid snapshot, including counters at the edges of their types and hostile error texts;
    /// saving the loaded breaker again writes the same bytes (the file format is stable).
    #[test]
    fn save_and_load_round_trip_every_valid_state(
        s in snapshot_strategy(),
        history_limit in prop_oneof![Just(100usize), 0usize..12],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let config = FailureConfig {
            history_limit: history_limit as u32,
            ..FailureConfig::default()
        };
        let (a, _) = breaker(config.clone());
        a.restore(&s).unwrap();
        let want = restored(&s, history_limit);
        prop_assert_eq!(a.snapshot(), want.clone());
        let path = dir.path().join("state.json");
        a.save(&path).unwrap();
        let (b, _) = breaker(config.clone());
        prop_assert!(b.load(&path).unwrap());
        prop_assert_eq!(b.snapshot(), want);
        prop_assert_eq!(b.status(), a.status());
        let again = dir.path().join("again.json");
        b.save(&again).unwrap();
        prop_assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&path).unwrap());
        // A breaker constructed on the file with statePath starts in the same state.
        let c = FailureBreaker::with_clock(
            FailureConfig { state_path: Some(path.clone()), ..config },
            ManualClock::shared(10_000),
        ).unwrap();
        prop_assert_eq!(c.snapshot(), a.snapshot());
        prop_assert_eq!(files_in(dir.path()), vec![again, path]);
    }
}
