//! A hook session's record for `agentbreaker report`: its events, warnings and halt, one JSON
//! line each (`crate::trace::Entry`, with `t` in ms since the epoch), appended to `<key>.log`
//! beside the session's state under the session's lock. Appending costs a
//! call a few hundred bytes of writing, where keeping the record in the state would cost reading
//! and rewriting all of it on every call. Bounded: past [`MAX_BYTES`] the file is cut to its last
//! half (at a line boundary).

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::trace::{Entry, Kind, Trace};

use super::state::StateDir;

/// The file name suffix.
pub const SUFFIX: &str = ".log";
/// The most bytes the record keeps (about 3000 entries).
pub const MAX_BYTES: u64 = 256 * 1024;

/// The path of a session's record.
pub fn path(dir: &StateDir, key: &str) -> PathBuf {
    dir.path.join(format!("{key}{SUFFIX}"))
}

/// A trace for one call: entries with absolute times (ms since the epoch).
pub fn call_trace() -> Trace {
    let mut t = Trace::with_max(4096);
    t.start_ms = Some(0);
    t
}

fn no_follow() -> i32 {
    libc::O_NOFOLLOW | libc::O_CLOEXEC
}

/// Appends a call's entries (hold the session's lock).
pub fn append(dir: &StateDir, key: &str, trace: &Trace) -> std::io::Result<()> {
    if trace.entries.is_empty() {
        return Ok(());
    }
    let mut text = String::new();
    for e in &trace.entries {
        text.push_str(&serde_json::to_string(e).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    let p = path(dir, key);
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(no_follow())
        .open(&p)?;
    f.write_all(text.as_bytes())?;
    let len = f.metadata()?.len();
    drop(f);
    if len > MAX_BYTES {
        cut(&p)?;
    }
    Ok(())
}

/// Keeps the last half of the file, from a line boundary (a new file renamed over it).
fn cut(p: &Path) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    OpenOptions::new()
        .read(true)
        .custom_flags(no_follow())
        .open(p)?
        .take(MAX_BYTES * 2)
        .read_to_end(&mut bytes)?;
    let from = bytes.len().saturating_sub((MAX_BYTES / 2) as usize);
    let start = bytes[from..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(bytes.len(), |i| from + i + 1);
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A hidden `.tmp` name: the state folder's cleanup removes one a killed writer left.
    let tmp = p.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(no_follow())
        .open(&tmp)?;
    f.write_all(&bytes[start..])?;
    drop(f);
    std::fs::rename(&tmp, p)
}

/// Removes a session's record.
pub fn remove(dir: &StateDir, key: &str) {
    let _ = std::fs::remove_file(path(dir, key));
}

/// Reads a record (a file of entries with absolute times) into a trace with times since its
/// first entry. Lines that cannot be read are skipped; a halted task's later halts are dropped.
pub fn read(p: &Path) -> Trace {
    let mut bytes = Vec::new();
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(no_follow() | libc::O_NONBLOCK)
        .open(p);
    if let Ok(f) = opened
        && f.metadata().is_ok_and(|m| m.is_file())
    {
        let _ = f.take(MAX_BYTES * 2).read_to_end(&mut bytes);
    }
    let mut trace = Trace::with_max(usize::MAX);
    let mut halted: Vec<String> = Vec::new();
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(mut e) = serde_json::from_slice::<Entry>(line) else {
            continue;
        };
        if e.kind == Kind::Halt {
            if halted.contains(&e.task) {
                continue;
            }
            halted.push(e.task.clone());
        }
        let start = *trace.start_ms.get_or_insert(e.t);
        e.t = e.t.saturating_sub(start);
        trace.entries.push_back(e);
    }
    trace
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(t: u64, kind: Kind) -> Entry {
        Entry {
            t,
            task: "session".into(),
            step: t,
            kind,
            name: Some("Bash".into()),
            ok: None,
            message: None,
        }
    }

    #[test]
    fn appended_read_back_relative_and_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(&tmp.path().join("s"), true).unwrap();
        let mut t = call_trace();
        t.entries.push_back(entry(1_700_000_000_000, Kind::Tool));
        t.entries.push_back(entry(1_700_000_000_500, Kind::Halt));
        append(&dir, "k", &t).unwrap();
        append(&dir, "k", &t).unwrap();
        let back = read(&path(&dir, "k"));
        assert_eq!(back.entries.len(), 3, "the repeated halt is dropped");
        assert_eq!(back.entries[1].t, 500);
        assert_eq!(back.start_ms, Some(1_700_000_000_000));
        // Bounded.
        let mut big = call_trace();
        for i in 0..200 {
            big.entries
                .push_back(entry(1_700_000_000_000 + i, Kind::Tool));
        }
        for _ in 0..200 {
            append(&dir, "k", &big).unwrap();
        }
        let len = std::fs::metadata(path(&dir, "k")).unwrap().len();
        assert!(len <= MAX_BYTES, "{len}");
        assert!(read(&path(&dir, "k")).entries.len() > 1000);
        remove(&dir, "k");
        assert!(read(&path(&dir, "k")).entries.is_empty());
    }
}
