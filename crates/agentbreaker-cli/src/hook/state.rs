//! The state folder of `agentbreaker hook`: one JSON file per session (its Monitor's snapshot and
//! the hook's own cursors), a lock file beside it, written atomically.
//!
//! Safety rules (docs/hooks.md, "Never harm the agent"):
//! - the folder is created private (0700) and its files too (0600); a folder that is a symlink, or
//!   that others can write to, is refused (and never chmod'ed);
//! - a session id never becomes a path as it is: the file name is a strictly sanitized prefix of
//!   it and 128 bits of its SHA-256 ([`StateDir::key`]);
//! - nothing in the folder is followed when it is a symlink (`O_NOFOLLOW`), and nothing that is not
//!   a regular file is read;
//! - a state file that cannot be used (unreadable, corrupt, of another version, a symlink) is
//!   moved aside (`<name>.corrupt-<ms>`), never deleted, and the session starts fresh;
//! - a save writes a new file, optionally fsyncs it, and renames it over the old one: a reader, a
//!   killed writer or a full disk never leaves a torn file.

use std::ffi::OsStr;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentbreaker::Verdict;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::transcript::Cursor;

/// The kind written in every session file.
pub const STATE_KIND: &str = "hook-session";
/// The largest session file read (a Monitor snapshot is bounded far below this).
pub const MAX_STATE_BYTES: u64 = 16 * 1024 * 1024;
/// Sessions not touched for this long are removed.
pub const STALE_AFTER: Duration = Duration::from_secs(24 * 3600);
/// Files moved aside are kept this long, for a person to look at.
pub const ASIDE_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);
/// Temporary files of a killed writer are removed after this long.
const TEMP_STALE: Duration = Duration::from_secs(60);
/// The longest session id kept in the file (for `status`); the key hashes all of it.
const MAX_SHOWN_ID: usize = 256;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One session's file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionState {
    /// 1.
    pub version: u32,
    /// [`STATE_KIND`].
    pub kind: String,
    /// `claude`, `codex`, `gemini`.
    pub agent: String,
    /// The session id (its first 256 bytes).
    pub session_id: String,
    /// The project directory of the first event.
    pub cwd: Option<String>,
    /// The profile the Monitor started from.
    pub profile: String,
    /// When the session was first seen (ms since the epoch).
    pub created_ms: u64,
    /// The last event (ms since the epoch).
    pub updated_ms: u64,
    /// Hook calls so far.
    pub calls: u64,
    /// Time spent waiting for the user (between the end of a turn and the next prompt), which the
    /// Monitor's clock leaves out: its duration limit counts the agent's working time.
    pub paused_ms: u64,
    /// When the current wait began (the last `Stop`), if the agent is waiting.
    pub paused_since: Option<u64>,
    /// Where each transcript was read up to.
    #[serde(default)]
    pub transcripts: Vec<Cursor>,
    /// A warning for the model that the agent could not take on the event it came on (Gemini's
    /// `BeforeTool`), given on the next event that can carry it.
    #[serde(default)]
    pub pending_nudge: Option<String>,
    /// The halt that stopped the session: every later tool call is denied with it.
    #[serde(default)]
    pub session_halt: Option<Verdict>,
    /// The Monitor's snapshot.
    pub monitor: Value,
    /// The session's counters in the metrics vocabulary (`agentbreaker::metrics::Registry` as
    /// JSON; null before the first counted event).
    #[serde(default)]
    pub metrics: Value,
}

impl SessionState {
    /// A new session.
    pub fn new(agent: &str, session_id: &str, cwd: Option<&str>, profile: &str, now: u64) -> Self {
        SessionState {
            version: 1,
            kind: STATE_KIND.into(),
            agent: agent.into(),
            session_id: agentbreaker::text::truncate(session_id, MAX_SHOWN_ID).to_string(),
            cwd: cwd.map(str::to_string),
            profile: profile.into(),
            created_ms: now,
            updated_ms: now,
            calls: 0,
            paused_ms: 0,
            paused_since: None,
            transcripts: Vec::new(),
            pending_nudge: None,
            session_halt: None,
            monitor: Value::Null,
            metrics: Value::Null,
        }
    }
}

/// How a load went.
#[derive(Debug)]
pub enum Loaded {
    /// No state yet.
    Fresh,
    /// The saved state.
    State(Box<SessionState>),
    /// The file could not be used and was moved aside (the message says why and where).
    Aside(String),
}

/// The state folder.
#[derive(Debug, Clone)]
pub struct StateDir {
    /// Its path.
    pub path: PathBuf,
}

/// A held session lock (released when dropped, or by the kernel when the process dies).
#[derive(Debug)]
pub struct SessionLock {
    file: File,
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        let _ = fs4::FileExt::unlock(&self.file);
    }
}

fn os_err(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

fn no_follow() -> i32 {
    libc::O_NOFOLLOW | libc::O_CLOEXEC
}

impl StateDir {
    /// `AGENTBREAKER_STATE_DIR`, else `~/.agentbreaker/sessions`.
    pub fn default_path() -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("AGENTBREAKER_STATE_DIR").filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(p));
        }
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".agentbreaker").join("sessions"))
    }

    /// Refuses a state folder (`meta`: its own metadata, not followed) that is a symlink or not a
    /// folder.
    pub fn check_kind(path: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
        if meta.file_type().is_symlink() {
            return Err(format!(
                "the state folder {} is a symlink; it is not followed",
                path.display()
            ));
        }
        if !meta.is_dir() {
            return Err(format!(
                "the state folder {} is not a folder",
                path.display()
            ));
        }
        Ok(())
    }

    /// Opens the folder, creating it (0700) when `create`. A folder that is a symlink, is not a
    /// folder, or can be written by others is refused.
    pub fn open(path: &Path, create: bool) -> Result<StateDir, String> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound && create => {
                DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(path)
                    .map_err(|e| {
                        format!("cannot create the state folder {}: {e}", path.display())
                    })?;
                std::fs::symlink_metadata(path)
                    .map_err(|e| format!("cannot read the state folder {}: {e}", path.display()))?
            }
            Err(e) => {
                return Err(format!(
                    "cannot read the state folder {}: {e}",
                    path.display()
                ));
            }
        };
        Self::check_kind(path, &meta)?;
        // A folder others can write to (`/tmp`, say) could have our files replaced: refused, and
        // never chmod'ed (it may be shared).
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "the state folder {} can be written by others (mode {:o}); use a private folder",
                path.display(),
                meta.mode() & 0o7777
            ));
        }
        Ok(StateDir {
            path: path.to_path_buf(),
        })
    }

    /// The file name stem of a session: up to 32 of its characters that are ASCII letters,
    /// digits, `-` or `_`, then 32 hex digits of the SHA-256 of the whole id. Nothing else of the
    /// id reaches the file system.
    pub fn key(session_id: &str) -> String {
        let prefix: String = session_id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(32)
            .collect();
        let digest = Sha256::digest(session_id.as_bytes());
        let hash: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        if prefix.is_empty() {
            hash
        } else {
            format!("{prefix}-{hash}")
        }
    }

    fn state_path(&self, key: &str) -> PathBuf {
        self.path.join(format!("{key}.json"))
    }

    fn lock_path(&self, key: &str) -> PathBuf {
        self.path.join(format!("{key}.lock"))
    }

    /// Takes the session's lock, waiting for it (the caller's watchdog bounds the wait). The
    /// lock file is re-checked after locking, so a lock file removed meanwhile (a `SessionEnd`,
    /// a cleanup) is never shared by two holders; its modification time is set to now, so that
    /// the lock of a session in use never looks stale.
    pub fn lock(&self, key: &str) -> Result<SessionLock, String> {
        let lock = self
            .take_lock(key, true)?
            .ok_or_else(|| format!("cannot lock {}", self.lock_path(key).display()))?;
        let _ = lock.file.set_modified(SystemTime::now());
        Ok(lock)
    }

    /// Takes the session's lock if no other process holds it (`None` when one does). For the
    /// cleanup: what another call of a session holds, or waits for, is not stale.
    pub fn try_lock(&self, key: &str) -> Result<Option<SessionLock>, String> {
        self.take_lock(key, false)
    }

    /// Opens the lock file (created when missing) and locks it, waiting when `wait`. A lock file
    /// is only ever removed by the holder of its lock (`remove`, the cleanup), so after locking
    /// the path must still name the locked file, else it is opened again.
    fn take_lock(&self, key: &str, wait: bool) -> Result<Option<SessionLock>, String> {
        let path = self.lock_path(key);
        for _ in 0..16 {
            let file = match OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(no_follow())
                .open(&path)
            {
                Ok(f) => f,
                Err(e) if os_err(&e) == libc::ELOOP => {
                    // A symlink where the lock file belongs: moved aside, never followed.
                    self.move_aside(&path, "a symlink")?;
                    continue;
                }
                Err(e) => return Err(format!("cannot open the lock {}: {e}", path.display())),
            };
            if wait {
                fs4::FileExt::lock(&file)
                    .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
            } else {
                match fs4::FileExt::try_lock(&file) {
                    Ok(()) => {}
                    Err(fs4::TryLockError::WouldBlock) => return Ok(None),
                    Err(fs4::TryLockError::Error(e)) => {
                        return Err(format!("cannot lock {}: {e}", path.display()));
                    }
                }
            }
            let lock = SessionLock { file };
            let held = lock.file.metadata().map_err(|e| e.to_string())?;
            match std::fs::symlink_metadata(&path) {
                Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => {
                    return Ok(Some(lock));
                }
                _ => continue,
            }
        }
        Err(format!("cannot hold the lock {}", path.display()))
    }

    /// Moves a file aside (`<name>.corrupt-<ms>`); says where.
    fn move_aside(&self, path: &Path, why: &str) -> Result<String, String> {
        let name = path
            .file_name()
            .map(OsStr::to_string_lossy)
            .unwrap_or_default();
        let aside = self.path.join(format!("{name}.corrupt-{}", now_ms()));
        std::fs::rename(path, &aside)
            .map_err(|e| format!("cannot move {} ({why}) aside: {e}", path.display()))?;
        Ok(format!(
            "{} was {why}; moved aside to {}",
            path.display(),
            aside.display()
        ))
    }

    /// Moves a session's state aside (a snapshot the Monitor refused).
    pub fn set_aside(&self, key: &str, why: &str) -> String {
        let path = self.state_path(key);
        self.move_aside(&path, why).unwrap_or_else(|e| e)
    }

    /// Reads a session's state (hold its lock).
    pub fn load(&self, key: &str) -> Loaded {
        let path = self.state_path(key);
        match read_state(&path) {
            Ok(None) => Loaded::Fresh,
            Ok(Some(state)) => Loaded::State(Box::new(state)),
            Err(why) => Loaded::Aside(self.move_aside(&path, &why).unwrap_or_else(|e| e)),
        }
    }

    /// Writes a session's state atomically (hold its lock): a new 0600 file, fsync'd when `sync`,
    /// renamed over the old one.
    pub fn save(&self, key: &str, state: &SessionState, sync: bool) -> Result<(), String> {
        let bytes = serde_json::to_vec(state).map_err(|e| e.to_string())?;
        let path = self.state_path(key);
        let tmp = self.path.join(format!(
            ".{key}.json.{}.{}.tmp",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        let result = (|| -> std::io::Result<()> {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(no_follow())
                .open(&tmp)?;
            f.write_all(&bytes)?;
            if sync {
                f.sync_all()?;
            }
            drop(f);
            std::fs::rename(&tmp, &path)
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(if os_err(&e) == libc::ENOSPC {
                format!("the disk is full; the state of this session was not saved ({e})")
            } else {
                format!("cannot save {}: {e}", path.display())
            });
        }
        Ok(())
    }

    /// Removes a session's state and lock file (hold its lock).
    pub fn remove(&self, key: &str) {
        let _ = std::fs::remove_file(self.state_path(key));
        let _ = std::fs::remove_file(self.lock_path(key));
    }

    /// Removes sessions untouched for [`STALE_AFTER`], files moved aside more than [`ASIDE_KEPT`]
    /// ago and temporary files of killed writers. Only names this folder uses are touched, and a
    /// symlink is removed itself, never followed.
    pub fn cleanup(&self) {
        let Ok(entries) = std::fs::read_dir(&self.path) else {
            return;
        };
        for entry in entries.flatten().take(100_000) {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with("retired.") {
                continue; // the counters of ended sessions (hook/metrics.rs)
            }
            let keep_for = if name.contains(".corrupt-") {
                ASIDE_KEPT
            } else if name.starts_with('.') && name.ends_with(".tmp") {
                TEMP_STALE
            } else if name.ends_with(".json")
                || name.ends_with(".lock")
                || name.ends_with(super::trace_file::SUFFIX)
            {
                STALE_AFTER
            } else {
                continue;
            };
            let old = entry.metadata().is_ok_and(|m| is_older_than(&m, keep_for));
            if !old {
                continue;
            }
            if !name.starts_with('.') && !name.contains(".corrupt-") {
                // A session's state and lock go together, under its lock (below).
                if let Some(key) = name.strip_suffix(".json")
                    && !key.contains('.')
                {
                    self.remove_stale_session(key);
                    continue;
                }
                if let Some(key) = name.strip_suffix(".lock") {
                    self.remove_stale_lock(key);
                    continue;
                }
                // A session's counters file and record go with its session, which retires them.
                if let Some(key) = name
                    .strip_suffix(super::metrics::SIDECAR_SUFFIX)
                    .or_else(|| name.strip_suffix(super::trace_file::SUFFIX))
                    && self.state_path(key).exists()
                {
                    continue;
                }
            }
            let _ = std::fs::remove_file(entry.path());
        }
    }

    /// Removes a stale session: its counters go on counting in the retired ones, then its
    /// counters file, record, state and lock file go. Done under its lock, taken without waiting:
    /// a session a call holds (or waits for) is in use, and two cleanups never retire it twice.
    fn remove_stale_session(&self, key: &str) {
        let Ok(Some(lock)) = self.try_lock(key) else {
            return;
        };
        let path = self.state_path(key);
        match std::fs::symlink_metadata(&path) {
            // Saved meanwhile by a call that held the lock: in use.
            Ok(m) if !is_older_than(&m, STALE_AFTER) => return,
            Ok(_) => {
                if let Ok(Some(st)) = read_state(&path) {
                    super::metrics::retire(self, key, &st);
                }
                super::metrics::remove_sidecar(self, key);
                super::trace_file::remove(self, key);
                let _ = std::fs::remove_file(&path);
            }
            // Removed meanwhile (another cleanup, a `SessionEnd`): only the lock file is left.
            Err(_) => {}
        }
        let _ = std::fs::remove_file(self.lock_path(key));
        drop(lock);
    }

    /// Removes a stale lock file of a session that has no state: only while holding it (taken
    /// without waiting), so no call ever holds a lock file that is gone.
    fn remove_stale_lock(&self, key: &str) {
        let Ok(Some(lock)) = self.try_lock(key) else {
            return;
        };
        if std::fs::symlink_metadata(self.state_path(key)).is_err() {
            let _ = std::fs::remove_file(self.lock_path(key));
        }
        drop(lock);
    }

    /// Every session file (for `status`): the key and the state, or why it cannot be read.
    pub fn list(&self) -> Vec<(String, Result<SessionState, String>)> {
        let Ok(entries) = std::fs::read_dir(&self.path) else {
            return Vec::new();
        };
        let mut out: Vec<(String, Result<SessionState, String>)> = entries
            .flatten()
            .take(100_000)
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_string();
                let key = name.strip_suffix(".json")?.to_string();
                // Session keys have no dot: `.tmp` files, counters files and the retired
                // counters are not sessions.
                if key.starts_with('.') || key.contains('.') {
                    return None;
                }
                let state = read_state(&e.path())
                    .and_then(|s| s.ok_or_else(|| "removed meanwhile".to_string()));
                Some((key, state))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// Whether a file was last modified more than `age` ago.
fn is_older_than(meta: &std::fs::Metadata, age: Duration) -> bool {
    meta.modified().is_ok_and(|t| {
        SystemTime::now()
            .duration_since(t)
            .is_ok_and(|since| since > age)
    })
}

/// Reads a state file without following a symlink or blocking on a special file; `Ok(None)` when
/// there is none, `Err(why)` when it cannot be used.
fn read_state(path: &Path) -> Result<Option<SessionState>, String> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(no_follow() | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) if os_err(&e) == libc::ELOOP => return Err("a symlink".into()),
        Err(e) => return Err(format!("unreadable ({e})")),
    };
    let meta = file.metadata().map_err(|e| format!("unreadable ({e})"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_STATE_BYTES {
        return Err(format!("larger than {MAX_STATE_BYTES} bytes"));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_STATE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("unreadable ({e})"))?;
    let state: SessionState =
        serde_json::from_slice(&bytes).map_err(|e| format!("corrupt ({e})"))?;
    if state.version != 1 || state.kind != STATE_KIND {
        return Err(format!(
            "of another kind or version ({} {})",
            state.kind, state.version
        ));
    }
    Ok(Some(state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_safe_file_names() {
        let long = "a".repeat(10_000);
        for id in [
            "../../x",
            "/etc/passwd",
            "a\0b",
            long.as_str(),
            "",
            "..",
            "ok-123_x",
        ] {
            let key = StateDir::key(id);
            assert!(key.len() <= 65, "{key}");
            assert!(
                key.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{key}"
            );
            assert!(!key.is_empty());
        }
        assert_ne!(StateDir::key("a/b"), StateDir::key("ab"));
        assert!(StateDir::key("ok-123_x").starts_with("ok-123_x-"));
    }

    #[test]
    fn corrupt_and_symlinked_files_are_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let sd = StateDir::open(&dir.path().join("s"), true).unwrap();
        let mode = std::fs::metadata(&sd.path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::write(sd.path.join("k.json"), b"{not json").unwrap();
        assert!(matches!(sd.load("k"), Loaded::Aside(_)));
        assert!(matches!(sd.load("k"), Loaded::Fresh));
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(
            &shared,
            std::os::unix::fs::PermissionsExt::from_mode(0o1777),
        )
        .unwrap();
        assert!(StateDir::open(&shared, true).is_err());
        assert_eq!(std::fs::metadata(&shared).unwrap().mode() & 0o7777, 0o1777);
        let target = dir.path().join("target");
        std::fs::write(&target, b"secret").unwrap();
        std::os::unix::fs::symlink(&target, sd.path.join("j.json")).unwrap();
        assert!(matches!(sd.load("j"), Loaded::Aside(_)));
        assert_eq!(std::fs::read(&target).unwrap(), b"secret");
        let state = SessionState::new("claude", "s", None, "coding-agent", 1);
        {
            let _lock = sd.lock("j").unwrap();
            sd.save("j", &state, true).unwrap();
        }
        let meta = std::fs::symlink_metadata(sd.path.join("j.json")).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert!(matches!(sd.load("j"), Loaded::State(s) if *s == state));
        assert_eq!(sd.list().len(), 1);
    }

    fn age(path: &Path) {
        let old = SystemTime::now() - STALE_AFTER - Duration::from_secs(60);
        File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }

    fn is_fresh(path: &Path) -> bool {
        let meta = std::fs::metadata(path).unwrap();
        !is_older_than(&meta, Duration::from_secs(3600))
    }

    #[test]
    fn cleanup_never_removes_a_held_lock_and_taking_one_refreshes_it() {
        let dir = tempfile::tempdir().unwrap();
        let sd = StateDir::open(&dir.path().join("s"), true).unwrap();
        // Taking a lock sets its time: a session in use never has a stale lock file.
        drop(sd.lock("a").unwrap());
        age(&sd.lock_path("a"));
        let held = sd.lock("a").unwrap();
        assert!(is_fresh(&sd.lock_path("a")));
        // Held and old (a first call, before its state exists): kept, and still exclusive.
        age(&sd.lock_path("a"));
        sd.cleanup();
        assert!(sd.lock_path("a").exists());
        assert!(sd.try_lock("a").unwrap().is_none());
        // Free, old and without a state: removed.
        drop(held);
        sd.cleanup();
        assert!(!sd.lock_path("a").exists());
        // Old, free, but its session's state is there (and fresh): kept.
        {
            let _lock = sd.lock("b").unwrap();
            sd.save("b", &SessionState::new("claude", "b", None, "p", 1), false)
                .unwrap();
        }
        age(&sd.lock_path("b"));
        sd.cleanup();
        assert!(sd.lock_path("b").exists() && sd.state_path("b").exists());
        // A stale session a call holds is left alone; once free, it goes with its lock file.
        let held = sd.lock("b").unwrap();
        age(&sd.state_path("b"));
        age(&sd.lock_path("b"));
        sd.cleanup();
        assert!(sd.state_path("b").exists() && sd.lock_path("b").exists());
        drop(held);
        sd.cleanup();
        assert!(!sd.state_path("b").exists() && !sd.lock_path("b").exists());
    }

    #[test]
    fn a_lock_removed_by_its_holder_is_never_shared() {
        let dir = tempfile::tempdir().unwrap();
        let sd = StateDir::open(&dir.path().join("s"), true).unwrap();
        let first = sd.lock("k").unwrap();
        let waiter = {
            let sd = sd.clone();
            std::thread::spawn(move || {
                let lock = sd.lock("k").unwrap();
                let held = lock.file.metadata().unwrap();
                let now = std::fs::symlink_metadata(sd.lock_path("k")).unwrap();
                (held.ino(), now.ino())
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        // The holder removes the lock file (a `SessionEnd`, a cleanup), then lets go: the waiter
        // locked the removed file, sees it, and takes the path's new one.
        sd.remove("k");
        drop(first);
        let (held, path) = waiter.join().unwrap();
        assert_eq!(held, path);
    }
}
