//! The `agentbreaker` command's building blocks: the stream parsers, the supervisor, replay, the
//! Ralph-style loop, the layered settings and the trajectory evaluation. The binary
//! (`src/main.rs`) is the command line over them; the library exists so tests and fuzz targets can
//! reach the parsers directly.

pub mod eval;
pub mod hook;
pub mod html_report;
pub mod metrics_file;
pub mod ralph;
pub mod replay;
pub mod report;
pub mod settings;
pub mod stream;
pub mod supervise;
pub mod timeline;
pub mod trace;
pub mod watch;
pub mod worktree;
