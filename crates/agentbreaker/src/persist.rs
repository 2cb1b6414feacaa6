//! Crash-safe state files: write to a temporary file in the same directory, fsync, rename over the
//! target, fsync the directory. A reader sees the old file or the new one, never a torn one.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::path::Path;

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
    let mut tmp = tempfile::Builder::new()
        .prefix(".agentbreaker-")
        .suffix(".tmp")
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
    Ok(())
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
    fn missing_directory_is_io() {
        let e = write_atomic(Path::new("/nonexistent-agentbreaker-dir/s.json"), b"x").unwrap_err();
        assert_eq!(e.code(), "IO");
    }
}
