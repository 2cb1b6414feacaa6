//! "How many files did this iteration change?" — with git when the directory is a repository
//! (commits made inside the iteration included), from file sizes and modification times
//! otherwise. The loop's own output (its state folder, its metrics file) is never counted: it
//! changes whatever the agent does.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// Directories never walked in file mode.
const SKIPPED_DIRS: [&str; 7] = [
    ".git",
    ".agentbreaker",
    "target",
    "node_modules",
    "__pycache__",
    ".venv",
    ".tox",
];
/// The most files looked at in file mode.
const MAX_FILES: usize = 200_000;

/// Paths that are not the agent's work: the loop's state folder and metrics file (and the
/// metrics file's temporary siblings, `.NAME.<pid>.<nanos>.tmp`). Held absolute, with symlinks
/// in their existing part resolved, as the walk and git name paths.
#[derive(Debug, Clone, Default)]
pub struct Excluded {
    paths: Vec<PathBuf>,
}

/// `path` absolute (over `cwd`), without `.` and `..`, and with the longest existing prefix
/// resolved (`canonicalize`), so that it compares with the paths under a resolved root.
fn resolved(path: &Path, cwd: &Path) -> PathBuf {
    use std::path::Component;
    let mut lexical = PathBuf::new();
    for c in cwd.join(path).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                lexical.pop();
            }
            other => lexical.push(other),
        }
    }
    let mut tail = Vec::new();
    let mut head = lexical.clone();
    loop {
        if let Ok(real) = head.canonicalize() {
            return tail.iter().rev().fold(real, |p, name| p.join(name));
        }
        match (head.file_name().map(ToOwned::to_owned), head.parent()) {
            (Some(name), Some(parent)) => {
                tail.push(name);
                head = parent.to_path_buf();
            }
            _ => return lexical,
        }
    }
}

impl Excluded {
    /// The given paths (relative ones taken from `cwd`).
    pub fn new<I: IntoIterator<Item = PathBuf>>(paths: I, cwd: &Path) -> Self {
        Excluded {
            paths: paths.into_iter().map(|p| resolved(&p, cwd)).collect(),
        }
    }

    /// Whether `path` (absolute, under a resolved root) is one of them, inside one of them, or a
    /// temporary sibling of one of them.
    fn covers(&self, path: &Path) -> bool {
        self.paths
            .iter()
            .any(|e| path.starts_with(e) || crate::metrics_file::is_temp_of(path, e))
    }
}

/// The state of a working directory before an iteration.
#[derive(Debug)]
pub enum WorkTree {
    /// A git repository: `HEAD`, and a content hash of every file that was already dirty.
    Git {
        root: PathBuf,
        head: Option<String>,
        dirty: HashMap<String, Option<u64>>,
        excluded: Excluded,
    },
    /// Any other directory: size and modification time of every file.
    Files {
        root: PathBuf,
        files: HashMap<PathBuf, (u64, Option<SystemTime>)>,
        excluded: Excluded,
    },
}

fn git(root: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

fn content_hash(path: &Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok()?;
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    Some(h.finish())
}

/// The paths `git status` reports (modified, added, deleted, untracked), relative to the root.
fn git_dirty(root: &Path) -> Vec<String> {
    let Some(out) = git(
        root,
        &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
    ) else {
        return Vec::new();
    };
    let mut paths = Vec::new();
    let mut entries = out.split(|&b| b == 0).filter(|e| !e.is_empty());
    while let Some(entry) = entries.next() {
        if entry.len() < 4 {
            continue;
        }
        let (xy, path) = entry.split_at(3);
        paths.push(String::from_utf8_lossy(path).into_owned());
        if xy[0] == b'R' || xy[0] == b'C' {
            // The original path of a rename or copy follows; it changed too.
            if let Some(orig) = entries.next() {
                paths.push(String::from_utf8_lossy(orig).into_owned());
            }
        }
    }
    paths
}

fn walk(root: &Path, excluded: &Excluded, files: &mut HashMap<PathBuf, (u64, Option<SystemTime>)>) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if files.len() >= MAX_FILES {
                return;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if excluded.covers(&path) {
                continue;
            }
            if kind.is_dir() {
                let name = entry.file_name();
                if !SKIPPED_DIRS.iter().any(|s| name == *s) {
                    stack.push(path);
                }
            } else if let Ok(meta) = entry.metadata() {
                files.insert(path, (meta.len(), meta.modified().ok()));
            }
        }
    }
}

impl WorkTree {
    /// Records the state of `dir`, leaving out `excluded`.
    pub fn snapshot(dir: &Path, excluded: &Excluded) -> WorkTree {
        if let Some(top) = git(dir, &["rev-parse", "--show-toplevel"]) {
            let root = PathBuf::from(String::from_utf8_lossy(&top).trim().to_string());
            let head = git(&root, &["rev-parse", "HEAD"])
                .map(|h| String::from_utf8_lossy(&h).trim().to_string());
            let dirty = git_dirty(&root)
                .into_iter()
                .map(|p| {
                    let hash = content_hash(&root.join(&p));
                    (p, hash)
                })
                .collect();
            return WorkTree::Git {
                root,
                head,
                dirty,
                excluded: excluded.clone(),
            };
        }
        // Resolved, as the excluded paths are.
        let root = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let mut files = HashMap::new();
        walk(&root, excluded, &mut files);
        WorkTree::Files {
            root,
            files,
            excluded: excluded.clone(),
        }
    }

    /// How many files differ now from when the snapshot was taken.
    pub fn changed_files(&self) -> u64 {
        match self {
            WorkTree::Git {
                root,
                head,
                dirty,
                excluded,
            } => {
                let mut candidates: HashSet<String> = git_dirty(root).into_iter().collect();
                candidates.extend(dirty.keys().cloned());
                let since_head: HashSet<String> = match head {
                    Some(h) => git(root, &["diff", "--name-only", "-z", h])
                        .map(|out| {
                            out.split(|&b| b == 0)
                                .filter(|e| !e.is_empty())
                                .map(|e| String::from_utf8_lossy(e).into_owned())
                                .collect()
                        })
                        .unwrap_or_default(),
                    None => HashSet::new(),
                };
                let untracked_or_dirty_now: HashSet<String> = git_dirty(root).into_iter().collect();
                candidates.extend(since_head.iter().cloned());
                candidates
                    .iter()
                    .filter(|p| !excluded.covers(&root.join(p)))
                    .filter(|p| match dirty.get(*p) {
                        // Dirty before: changed if its content differs from then.
                        Some(before) => content_hash(&root.join(p)) != *before,
                        // Clean before (= as in HEAD then): changed if it differs from that HEAD.
                        None => since_head.contains(*p) || untracked_or_dirty_now.contains(*p),
                    })
                    .count() as u64
            }
            WorkTree::Files {
                root,
                files,
                excluded,
            } => {
                let mut now = HashMap::new();
                walk(root, excluded, &mut now);
                let changed = now
                    .iter()
                    .filter(|(p, meta)| files.get(*p) != Some(meta))
                    .count();
                let removed = files.keys().filter(|p| !now.contains_key(*p)).count();
                (changed + removed) as u64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, script: &str) {
        let ok = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "{script}");
    }

    #[test]
    fn git_counts_edits_new_files_and_commits_inside_the_iteration() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        sh(
            d,
            "git init -q && git config user.email t@t && git config user.name t && \
             echo a > a && echo b > b && echo dirty > c && git add a b && git commit -qm init",
        );
        let before = WorkTree::snapshot(d, &Excluded::default());
        assert!(matches!(before, WorkTree::Git { .. }));
        assert_eq!(before.changed_files(), 0);
        // Edit a and commit it, create d, leave the already-dirty c alone.
        sh(d, "echo a2 > a && git commit -qam edit && echo new > d");
        assert_eq!(before.changed_files(), 2);
        // Now touch c's content: three.
        sh(d, "echo dirty2 > c");
        assert_eq!(before.changed_files(), 3);
    }

    #[test]
    fn plain_directories_use_sizes_and_times() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a"), "a").unwrap();
        std::fs::create_dir(d.join("node_modules")).unwrap();
        let before = WorkTree::snapshot(d, &Excluded::default());
        assert!(matches!(before, WorkTree::Files { .. }));
        std::fs::write(d.join("a"), "longer").unwrap();
        std::fs::write(d.join("b"), "b").unwrap();
        std::fs::write(d.join("node_modules/x"), "ignored").unwrap();
        assert_eq!(before.changed_files(), 2);
    }

    #[test]
    fn the_loops_own_files_are_not_counted() {
        for git in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            if git {
                sh(
                    d,
                    "git init -q && git config user.email t@t && git config user.name t && \
                     echo a > a && git add a && git commit -qm init",
                );
            }
            std::fs::create_dir(d.join("out")).unwrap();
            std::fs::write(d.join("out/m.prom"), "1").unwrap();
            // Relative to the working directory, through `.` and `..`, and not there yet.
            let excluded = Excluded::new(
                [
                    PathBuf::from("./out/../out/m.prom"),
                    PathBuf::from("st"),
                    d.join("st2"),
                ],
                d,
            );
            let before = WorkTree::snapshot(d, &excluded);
            assert_eq!(matches!(before, WorkTree::Git { .. }), git);
            std::fs::write(d.join("out/m.prom"), "22").unwrap();
            std::fs::write(d.join("out/.m.prom.1.2.tmp"), "22").unwrap();
            std::fs::create_dir_all(d.join("st/sub")).unwrap();
            std::fs::write(d.join("st/sub/state.json"), "{}").unwrap();
            std::fs::create_dir(d.join("st2")).unwrap();
            std::fs::write(d.join("st2/state.json"), "{}").unwrap();
            assert_eq!(before.changed_files(), 0, "git {git}");
            // A file of the agent's next to them still counts.
            std::fs::write(d.join("out/m.prom.txt"), "mine").unwrap();
            std::fs::write(d.join("state.json"), "mine").unwrap();
            assert_eq!(before.changed_files(), 2, "git {git}");
        }
    }
}
