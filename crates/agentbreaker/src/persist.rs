//! Crash-safe state files: write to a temporary file in the same directory, fsync, rename over the
//! target, fsync the directory. A reader sees the old file or the new one, never a torn one.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};

/// The largest state file `read_optional` accepts.
pub const MAX_STATE_FILE_BYTES: u64 = 64 * 1024 * 1024;

fn io(path: &Path, what: &str, e: impl std::fmt::Display) -> Error {
    Error::io(format_args!("{what} {}: {e}", path.display()))
}

/// Writes `bytes` to `path` atomically. Never creates missing directories.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let prefix = temp_prefix(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)
        .map_err(|e| io(path, "cannot create a temporary file beside", e))?;
    tmp.write_all(bytes)
        .map_err(|e| io(path, "cannot write state for", e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| io(path, "cannot sync state for", e))?;
    tmp.persist(path)
        .map_err(|e| io(path, "cannot rename state onto", e.error))?;
    // Make the rename itself durable. Some file systems refuse to sync a directory; the data is
    // already safe in that case, so that error is not reported.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    remove_stale_temp_files(dir, &prefix);
    Ok(())
}

const TEMP_SUFFIX: &str = ".tmp";

/// A temporary file older than this is left over by a writer that was killed mid-save (a save
/// takes milliseconds), and the next save of the same file removes it.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(60);

/// `.<file name>.agentbreaker-`: the temporary files of one state file.
fn temp_prefix(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(".{name}.agentbreaker-")
}

/// Removes this state file's temporary files older than [`STALE_TEMP_AGE`] (best effort: a file
/// that cannot be read or removed is left).
fn remove_stale_temp_files(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if !(name.starts_with(prefix) && name.ends_with(TEMP_SUFFIX)) {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age >= STALE_TEMP_AGE));
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Reads `path`; `Ok(None)` when it does not exist.
pub fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path, "cannot open", e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_STATE_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io(path, "cannot read", e))?;
    if bytes.len() as u64 > MAX_STATE_FILE_BYTES {
        return Err(Error::snapshot(format_args!(
            "{} is larger than {MAX_STATE_FILE_BYTES} bytes",
            path.display()
        )));
    }
    Ok(Some(bytes))
}

/// Checks the `version` and `kind` every snapshot carries.
pub(crate) fn check_snapshot_header(version: u32, kind: &str, expected_kind: &str) -> Result<()> {
    if version != 1 {
        return Err(Error::snapshot(format_args!(
            "unknown snapshot version {version} (this library reads version 1)"
        )));
    }
    if kind != expected_kind {
        return Err(Error::snapshot(format_args!(
            "snapshot kind is {kind:?}, expected {expected_kind:?}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        assert_eq!(read_optional(&p).unwrap(), None);
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(read_optional(&p).unwrap().unwrap(), b"two");
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_save_removes_the_stale_temp_files_of_its_own_file_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        let old = std::time::SystemTime::now() - STALE_TEMP_AGE - Duration::from_secs(5);
        let make = |name: &str, stale: bool| {
            let f = File::create(dir.path().join(name)).unwrap();
            if stale {
                f.set_modified(old).unwrap();
            }
        };
        make(".state.json.agentbreaker-abc123.tmp", true); // left by a killed writer
        make(".state.json.agentbreaker-def456.tmp", false); // a save in progress elsewhere
        make(".other.json.agentbreaker-ghi789.tmp", true); // another state file's
        make("notes.tmp", true);
        write_atomic(&p, b"one").unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                ".other.json.agentbreaker-ghi789.tmp",
                ".state.json.agentbreaker-def456.tmp",
                "notes.tmp",
                "state.json"
            ]
        );
    }

    #[test]
    fn missing_directory_is_io() {
        let e = write_atomic(Path::new("/nonexistent-agentbreaker-dir/s.json"), b"x").unwrap_err();
        assert_eq!(e.code(), "IO");
    }
}
