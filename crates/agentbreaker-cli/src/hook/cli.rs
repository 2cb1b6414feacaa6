//! The command lines of `agentbreaker hook` (and its `install`, `uninstall`, `reset`) and
//! `agentbreaker status`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::install::{self, Scope};
use super::protocol::Agent;
use super::{HookArgs, status};

const EXIT_IO: i32 = 74;
const EXIT_CONFIG: i32 = 78;
const AGENTS: [&str; 3] = ["claude", "codex", "gemini"];

/// `agentbreaker hook`: without a subcommand, one hook event from stdin.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct HookCli {
    #[command(subcommand)]
    action: Option<HookAction>,
    /// The agent that calls: claude, codex or gemini (recognised from the event when not given).
    #[arg(long, value_parser = AGENTS)]
    agent: Option<String>,
    /// Where sessions are kept (default: $AGENTBREAKER_STATE_DIR, else ~/.agentbreaker/sessions).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Start from a named profile: coding-agent (the default here) or seed.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// A TOML configuration file instead of the project's agentbreaker.toml (the event's cwd).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// After each call, write the live sessions' metrics to FILE in the Prometheus text format
    /// (for node_exporter's textfile collector; docs/observability.md).
    #[arg(long, value_name = "FILE")]
    metrics_file: Option<PathBuf>,
    /// Add the task attribute (the subagent, or `session`) to the metrics.
    #[arg(long)]
    metrics_task: bool,
}

#[derive(Debug, Subcommand)]
enum HookAction {
    /// Add agentbreaker's hooks to an agent's settings file (merged with the hooks already there).
    Install(InstallArgs),
    /// Remove exactly the hooks `install` added.
    Uninstall(InstallArgs),
    /// Forget a session's state, so a halted session can go on.
    Reset(ResetArgs),
}

#[derive(Debug, Args)]
struct InstallArgs {
    /// claude, codex or gemini.
    #[arg(value_parser = AGENTS)]
    agent: String,
    /// The user's settings (~/.claude, ~/.codex, ~/.gemini) or the project's (./.claude, ...).
    #[arg(long, value_parser = ["user", "project"], default_value = "user")]
    scope: String,
    /// Print the change instead of making it.
    #[arg(long)]
    dry_run: bool,
    /// Change this settings file instead of the agent's own.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// The program the hooks run (default: this agentbreaker, by its absolute path).
    #[arg(long, value_name = "PROGRAM")]
    program: Option<String>,
    /// The profile the hooks use (default: coding-agent).
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// The hooks also write the sessions' metrics to FILE (Prometheus text format).
    #[arg(long, value_name = "FILE")]
    metrics_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ResetArgs {
    /// The session id (`agentbreaker status` lists them).
    session: String,
    /// Where sessions are kept.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

/// `agentbreaker status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Where sessions are kept (default: $AGENTBREAKER_STATE_DIR, else ~/.agentbreaker/sessions).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long, conflicts_with = "prometheus")]
    json: bool,
    /// Print the live sessions' metrics (and the ended sessions' counters) in the Prometheus
    /// text format.
    #[arg(long)]
    prometheus: bool,
}

fn print(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Runs `agentbreaker hook ...`; returns the exit code.
pub fn run_hook(cli: &HookCli) -> i32 {
    match &cli.action {
        None => super::run(&HookArgs {
            agent: cli.agent.as_deref().and_then(Agent::from_name),
            state_dir: cli.state_dir.clone(),
            profile: cli.profile.clone(),
            config: cli.config.clone(),
            metrics_file: cli.metrics_file.clone(),
            metrics_task: cli.metrics_task,
        }),
        Some(HookAction::Install(a)) => install_cmd(a, false),
        Some(HookAction::Uninstall(a)) => install_cmd(a, true),
        Some(HookAction::Reset(a)) => match status::reset(a.state_dir.as_deref(), &a.session) {
            Ok(msg) => {
                print(&format!("{msg}\n"));
                0
            }
            Err(e) => {
                eprintln!("agentbreaker: {e}");
                EXIT_IO
            }
        },
    }
}

/// Runs `agentbreaker status`; returns the exit code.
pub fn run_status(args: &StatusArgs) -> i32 {
    let (code, text) = if args.prometheus {
        status::prometheus(args.state_dir.as_deref())
    } else {
        status::status(args.state_dir.as_deref(), args.json)
    };
    if code == 0 {
        print(&text);
    } else {
        eprint!("{text}");
    }
    code
}

fn install_cmd(a: &InstallArgs, remove: bool) -> i32 {
    let Some(agent) = Agent::from_name(&a.agent) else {
        return EXIT_CONFIG;
    };
    let scope = if a.scope == "project" {
        Scope::Project
    } else {
        Scope::User
    };
    if let Some(p) = &a.profile
        && let Err(e) = crate::settings::Settings::from_profile(p)
    {
        eprintln!("agentbreaker: {e}");
        return EXIT_CONFIG;
    }
    let path = match &a.file {
        Some(f) => f.clone(),
        None => {
            let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
            let Some(home) = home else {
                eprintln!("agentbreaker: HOME is not set; name the settings file with --file");
                return EXIT_CONFIG;
            };
            let project = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            install::settings_path(agent, scope, &PathBuf::from(home), &project)
        }
    };
    let program = a.program.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|| "agentbreaker".into())
    });
    let mut command = install::hook_command(&program, agent, a.profile.as_deref());
    if let Some(f) = &a.metrics_file {
        // An absolute path: the hooks run in the agent's working folder.
        let f = std::path::absolute(f).unwrap_or_else(|_| f.clone());
        command = install::with_metrics_file(&command, &f.to_string_lossy());
    }
    let change = match install::apply(&path, agent, &command, remove, a.dry_run) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("agentbreaker: {e}");
            return if e.contains("as JSON") || e.contains("cannot add hooks") {
                EXIT_CONFIG
            } else {
                EXIT_IO
            };
        }
    };
    let shown = change.path.display();
    let mut out = String::new();
    match (remove, change.changed, a.dry_run) {
        (_, false, _) if remove => {
            out.push_str(&format!(
                "no agentbreaker hooks in {shown}: nothing to change\n"
            ));
        }
        (_, false, _) => out.push_str(&format!(
            "agentbreaker's hooks for {} are already in {shown}: nothing to change\n",
            agent.title()
        )),
        (_, true, true) => out.push_str(&format!(
            "would change {shown} (dry run, nothing written):\n{}",
            change.diff
        )),
        (true, true, false) => out.push_str(&format!(
            "removed agentbreaker's hooks for {} from {shown}\n",
            agent.title()
        )),
        (false, true, false) => out.push_str(&format!(
            "added agentbreaker's hooks for {} to {shown} ({} events, command: {command})\n",
            agent.title(),
            install::events(agent).len()
        )),
    }
    if !remove && change.changed {
        out.push_str(match agent {
            Agent::Claude => {
                "Claude Code reads its hooks when it starts: restart it (or review them in /hooks).\n"
            }
            Agent::Codex => {
                "Codex runs a new hook only once it is trusted: open /hooks in Codex and approve \
                 agentbreaker's hooks (until then they are skipped).\n"
            }
            Agent::Gemini => {
                "Restart Gemini CLI to load the hooks (project hooks run only in trusted folders).\n"
            }
        });
    }
    print(&out);
    0
}
