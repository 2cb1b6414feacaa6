//! End-to-end tests of the `agentbreaker` binary with small fake agents (shell scripts that print
//! stream lines with delays).

// Helpers outside #[test] functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agentbreaker");

fn agentbreaker(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args).current_dir(dir);
    // The tests must not pick up the developer's own settings.
    for (k, _) in std::env::vars() {
        if k.starts_with("AGENTBREAKER_") || k.starts_with("BB_CIRCUIT_BREAKER_") {
            c.env_remove(k);
        }
    }
    c
}

fn run(dir: &Path, args: &[&str]) -> (Output, Duration) {
    let start = Instant::now();
    let out = agentbreaker(dir, args).output().expect("run agentbreaker");
    (out, start.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn report(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("report written")).expect("report is JSON")
}

const TOOL_USE: &str = r#"{"type":"tool_use","name":"web_fetch"}"#;

#[test]
fn runaway_tool_calls_exit_2_with_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("while true; do echo '{TOOL_USE}'; sleep 0.02; done");
    let (out, took) = run(
        dir.path(),
        &[
            "run",
            "--max-tool-calls",
            "5",
            "--grace-secs",
            "1",
            "--report",
            "report.json",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(took < Duration::from_secs(10));
    let err = stderr(&out);
    // A one-line warning at 80% of the limit, with the nudge for the model.
    assert!(
        err.contains(
            "agentbreaker: warning [tool_call_limit] task session, step 1: tool calls: 4 of 5 \
             (warning) | nudge: You have made 4 of the 5 tool calls allowed for this task."
        ),
        "{err}"
    );
    // The halt card names the rule, its message and the nudge.
    assert!(
        err.contains(
            "agentbreaker: stopped by rule tool_call_limit: tool calls: 6 of 5 (task session, step 1)"
        ),
        "{err}"
    );
    assert!(
        err.contains("agentbreaker: nudge for the agent: You have used all 5 tool calls"),
        "{err}"
    );
    assert!(
        err.contains("reason tool_call_limit (exit code 2)"),
        "{err}"
    );
    let r = report(&dir.path().join("report.json"));
    assert_eq!(r["halt"]["action"], "halt");
    assert_eq!(r["halt"]["reason"], "tool_call_limit");
    assert_eq!(r["halt"]["detail"]["actual"], 6);
    assert_eq!(r["warnings"][0]["reason"], "tool_call_limit");
    assert_eq!(r["exitCode"], 2);
    assert_eq!(r["stopped"], true);
    assert_eq!(r["invalidEvents"]["count"], 0);
    assert_eq!(r["status"]["profile"], "coding-agent");
    // Every line the agent printed before the halt was passed through unchanged.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().take(6).all(|l| l == TOOL_USE), "{stdout}");
}

#[test]
fn near_identical_outputs_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    // An agent that only talks: three answers in a row the same is a loop here.
    std::fs::write(
        dir.path().join("agentbreaker.toml"),
        "[budget]\nloopWindow = 3\n",
    )
    .unwrap();
    let line = r#"{"type":"assistant","text":"I will retry the same command again now"}"#;
    let script = format!("for i in 1 2 3 4 5 6; do echo '{line}'; sleep 0.05; done; sleep 5");
    let (out, _) = run(
        dir.path(),
        &[
            "run",
            "--report",
            "r.json",
            "--grace-secs",
            "1",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let r = report(&dir.path().join("r.json"));
    assert_eq!(r["halt"]["reason"], "output_loop");
    assert!(
        stderr(&out).contains("stopped by rule output_loop: 3 near-identical answers in a row"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn repeated_tool_errors_exit_3_and_the_card_names_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    // Seed 004's path hallucination: a different guessed path each time, the same error.
    let call = r#"{"type":"assistant","message":{"id":"mID","content":[{"type":"tool_use","id":"tID","name":"read_script","input":{"path":"Script.ID"}}]},"session_id":"s"}"#;
    let result = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"tID","content":"Error: Path not found","is_error":true}]},"session_id":"s"}"#;
    let script = format!(
        "for i in a b c d e f g h; do echo '{call}' | sed \"s/ID/$i/g\"; echo '{result}' | sed \"s/ID/$i/g\"; done; sleep 5"
    );
    let (out, _) = run(
        dir.path(),
        &[
            "run",
            "--report",
            "r.json",
            "--grace-secs",
            "1",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let r = report(&dir.path().join("r.json"));
    assert_eq!(r["halt"]["reason"], "fail_streak");
    assert_eq!(r["halt"]["detail"]["count"], 5);
    assert!(
        err.contains(
            "agentbreaker: warning [fail_streak] task session, step 3: 3 failed steps in a row \
             (3 of 5) with 1 distinct error: `Error: Path not found` (warning) | nudge: "
        ),
        "{err}"
    );
    assert!(
        err.contains("agentbreaker: stopped by rule fail_streak: 5 failed steps in a row"),
        "{err}"
    );
    assert!(err.contains("reason fail_streak (exit code 3)"), "{err}");
}

#[test]
fn a_silent_agent_is_stopped_for_idling() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("echo '{TOOL_USE}'; sleep 30");
    let (out, took) = run(
        dir.path(),
        &[
            "run",
            "--idle-secs",
            "2",
            "--grace-secs",
            "1",
            "--report",
            "r.json",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert_eq!(
        report(&dir.path().join("r.json"))["halt"]["reason"],
        "idle_timeout"
    );
}

#[test]
fn a_healthy_agent_keeps_its_exit_code_and_we_stay_silent() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "echo '{TOOL_USE}'; echo 'plain text line'; printf 'no newline at the end'; exit 0"
    );
    let (out, _) = run(dir.path(), &["run", "--", "sh", "-c", &script]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{TOOL_USE}\nplain text line\nno newline at the end")
    );
    assert_eq!(stderr(&out), "");
    let (out, _) = run(dir.path(), &["run", "--", "sh", "-c", "echo '{}'; exit 7"]);
    assert_eq!(out.status.code(), Some(7));
}

#[test]
fn an_agent_ignoring_sigterm_is_killed_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "trap '' TERM; for i in 1 2 3; do echo '{TOOL_USE}'; done; while true; do sleep 0.1; done"
    );
    let (out, took) = run(
        dir.path(),
        &[
            "run",
            "--max-tool-calls",
            "2",
            "--grace-secs",
            "1",
            "--report",
            "r.json",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        took >= Duration::from_secs(1),
        "killed before the grace period: {took:?}"
    );
    assert!(took < Duration::from_secs(6), "took {took:?}");
    assert_eq!(report(&dir.path().join("r.json"))["agent"]["signal"], 9);
}

#[test]
fn malformed_lines_are_passed_through_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let script = "printf 'not json\\n{\"type\":\"assistant\",\n\\377\\376binary\\n[1,2]\\n'; \
                  head -c 20000000 /dev/zero | tr '\\0' x; echo; echo done";
    let (out, _) = run(
        dir.path(),
        &["run", "--report", "r.json", "--", "sh", "-c", script],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = out.stdout;
    assert!(stdout.starts_with(b"not json\n{\"type\":\"assistant\",\n\xff\xfebinary\n[1,2]\n"));
    assert_eq!(stdout.len(), 45 + 20_000_000 + 1 + 5);
    let r = report(&dir.path().join("r.json"));
    assert!(r["malformedLines"].as_u64().unwrap() >= 5, "{r}");
}

#[test]
fn events_the_monitor_refuses_are_counted_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "echo '{{\"type\":\"tool_use\"}}'; echo '{TOOL_USE}'; \
         echo '{{\"type\":\"heartbeat\",\"phase\":\"starting\"}}'; exit 0"
    );
    let (out, _) = run(
        dir.path(),
        &["run", "--report", "r.json", "--", "sh", "-c", &script],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = report(&dir.path().join("r.json"));
    assert_eq!(r["invalidEvents"]["count"], 2, "{r}");
    assert!(
        r["invalidEvents"]["examples"][0]
            .as_str()
            .unwrap()
            .starts_with("\"tool_use\": "),
        "{r}"
    );
    // The agent's start (an `alive`) and its one valid line.
    assert_eq!(r["events"], 2);
    assert!(
        stderr(&out).contains("2 events were refused by the Monitor (INVALID_EVENT)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn ctrl_c_is_forwarded_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("got-int");
    let script = format!(
        "trap 'touch {}; exit 1' INT; echo ready; while true; do sleep 0.1; done",
        marker.display()
    );
    let mut child = agentbreaker(dir.path(), &["run", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 6];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    assert_eq!(&first, b"ready\n");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(marker.exists(), "the agent did not receive SIGINT");
}

fn alive(pid: i32) -> bool {
    // A zombie is dead for our purpose; init reaps it.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')),
        Err(_) => false,
    }
}

fn wait_dead(pid: i32) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn no_grandchild_outlives_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    // The agent starts a background job and exits; the job holds stdout open.
    let script = format!("sleep 1000 & echo $! > {}; exit 0", pidfile.display());
    let (out, took) = run(dir.path(), &["run", "--", "sh", "-c", &script]);
    assert_eq!(out.status.code(), Some(0));
    assert!(took < Duration::from_secs(8), "took {took:?}");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(wait_dead(pid), "grandchild {pid} still alive");

    // And when the agent is stopped by a halt.
    let script = format!(
        "sleep 1000 & echo $! > {}; while true; do echo '{TOOL_USE}'; sleep 0.05; done",
        pidfile.display()
    );
    let (out, _) = run(
        dir.path(),
        &[
            "run",
            "--max-tool-calls",
            "3",
            "--grace-secs",
            "1",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(wait_dead(pid), "grandchild {pid} still alive after a halt");
}

#[test]
fn a_command_that_does_not_exist_is_127() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = run(dir.path(), &["run", "--", "/nonexistent/agent"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(stderr(&out).contains("cannot start"));
}

#[test]
fn usage_errors_are_64_not_a_halt_code() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = run(dir.path(), &["run", "--bogus", "--", "true"]);
    assert_eq!(out.status.code(), Some(64));
    let (out, _) = run(dir.path(), &["run", "--jaccard", "2", "--", "true"]);
    assert_eq!(out.status.code(), Some(78));
    let (out, _) = run(dir.path(), &["--help"]);
    assert_eq!(out.status.code(), Some(0));
}

// ------------------------------------------------------------------------------------------------
// loop

#[test]
fn loop_exits_0_when_the_agent_edits_files_then_says_it_is_done() {
    let dir = tempfile::tempdir().unwrap();
    // Iteration 1 edits a file; iteration 2 edits again and reports EXIT_SIGNAL.
    let script = "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; \
                  echo \"change $n\" >> work.txt; \
                  if [ $n -ge 2 ]; then printf 'Implemented everything.\\nEXIT_SIGNAL: true\\n'; \
                  else echo 'Implemented the parser.'; fi";
    let (out, _) = run(dir.path(), &["loop", "--", "sh", "-c", script]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("iteration 1: 2 files changed"), "{err}");
    assert!(
        err.contains("loop finished after 2 iterations: completed (success)"),
        "{err}"
    );
    assert!(!dir.path().join(".agentbreaker/state.json").exists());
}

#[test]
fn loop_opens_the_circuit_after_the_4th_idle_iteration_and_stays_open() {
    let dir = tempfile::tempdir().unwrap();
    let idle = "echo 'Still looking into the failing test.'";
    let (out, _) = run(dir.path(), &["loop", "--", "sh", "-c", idle]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("loop finished after 4 iterations: circuit_open (failure)"),
        "{err}"
    );
    assert!(
        err.contains("iteration 3:") && err.contains("HALF_OPEN"),
        "{err}"
    );
    let state: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join(".agentbreaker/state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["stagnation"]["state"], "OPEN");

    // A restart refuses to run anything, and says how to reset.
    let marker = dir.path().join("ran");
    let touch = format!("touch {}", marker.display());
    let (out, _) = run(dir.path(), &["loop", "--", "sh", "-c", &touch]);
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("--reset"), "{}", stderr(&out));
    assert!(
        !marker.exists(),
        "the agent ran although the breaker is OPEN"
    );

    // --reset starts over.
    let done = format!("{touch}; echo 'EXIT_SIGNAL: true'");
    let (out, _) = run(dir.path(), &["loop", "--reset", "--", "sh", "-c", &done]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(marker.exists());
}

#[test]
fn a_loop_that_crashed_half_open_comes_back_closed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".agentbreaker")).unwrap();
    let snapshot = serde_json::json!({
        "version": 1, "kind": "loop", "iteration": 3, "exit": null,
        "stagnation": {"version": 1, "kind": "stagnation", "state": "HALF_OPEN",
            "consecutiveNoProgress": 3, "errorCounts": {}, "outputTrend": [40, 40, 40],
            "lastProgress": null, "baselineOutputs": [40, 40, 40], "bestTestsPassing": 0,
            "reason": "No progress in 3 consecutive iterations"}
    });
    std::fs::write(
        dir.path().join(".agentbreaker/state.json"),
        serde_json::to_vec(&snapshot).unwrap(),
    )
    .unwrap();
    // Back CLOSED with no iterations without progress: three more idle ones only reach HALF_OPEN.
    let (out, _) = run(
        dir.path(),
        &[
            "loop",
            "--max-iterations",
            "3",
            "--",
            "sh",
            "-c",
            "echo 'thinking'",
        ],
    );
    let err = stderr(&out);
    assert!(
        err.contains("resuming after 3 earlier iterations (breaker CLOSED)"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("max_iterations"), "{err}");
}

#[test]
fn loop_uses_the_test_command() {
    let dir = tempfile::tempdir().unwrap();
    let script = "n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; echo 'Working.'";
    let (out, _) = run(
        dir.path(),
        &[
            "loop",
            "--max-iterations",
            "2",
            "--test-cmd",
            "echo \"$(cat n)0 passed, 0 failed\"",
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    let err = stderr(&out);
    assert!(err.contains("tests: 10 passed, 0 failed"), "{err}");
    assert!(err.contains("tests: 20 passed, 0 failed"), "{err}");
    assert_eq!(out.status.code(), Some(2), "{err}");
}

#[test]
fn loop_watches_each_iteration_step_by_step() {
    let dir = tempfile::tempdir().unwrap();
    // One iteration that runs the same failing command again and again: the Monitor halts the
    // iteration (a repeated step), and the loop ends with it.
    let call = r#"{"type":"assistant","message":{"id":"mID","content":[{"type":"tool_use","id":"tID","name":"Bash","input":{"command":"make"}}]},"session_id":"s"}"#;
    let result = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"tID","content":"make: *** No rule to make target","is_error":true}]},"session_id":"s"}"#;
    let script = format!(
        "for i in 1 2 3 4 5 6 7 8; do echo '{call}' | sed \"s/ID/$i/g\"; echo '{result}' | sed \"s/ID/$i/g\"; done; sleep 5"
    );
    let (out, took) = run(
        dir.path(),
        &["loop", "--grace-secs", "1", "--", "sh", "-c", &script],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(
        err.contains("agentbreaker: stopped by rule repeated_step: the same step 5 times in a row"),
        "{err}"
    );
    assert!(err.contains("task iteration-1"), "{err}");
    assert!(
        err.contains(
            "loop finished after 1 iterations: the Monitor halted iteration 1 (repeated_step)"
        ),
        "{err}"
    );
    let state: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join(".agentbreaker/state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["halt"]["reason"], "repeated_step");
    assert_eq!(state["exit"], Value::Null);
}

#[test]
fn configs_output_saved_as_agentbreaker_toml_keeps_how_loop_judges_iterations() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = run(dir.path(), &["config"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("[loop.stagnation]"), "{text}");
    std::fs::write(dir.path().join("agentbreaker.toml"), &text).unwrap();
    // As without a file: the 4th iteration without progress opens the breaker (the step-level
    // [stagnation] section, no progress in 15 steps, is not the loop's).
    let (out, _) = run(
        dir.path(),
        &[
            "loop",
            "-q",
            "--max-iterations",
            "30",
            "--",
            "sh",
            "-c",
            "echo 'Still looking into the failing test.'",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("loop finished after 4 iterations: circuit_open (failure)"),
        "{err}"
    );
    // `[loop.stagnation]` is how iterations are judged.
    std::fs::write(
        dir.path().join("agentbreaker.toml"),
        "[loop.stagnation]\nnoProgressThreshold = 2\n",
    )
    .unwrap();
    let (out, _) = run(
        dir.path(),
        &[
            "loop",
            "-q",
            "--reset",
            "--",
            "sh",
            "-c",
            "echo 'Still looking.'",
        ],
    );
    let err = stderr(&out);
    assert!(
        err.contains("loop finished after 3 iterations: circuit_open (failure)"),
        "{err}"
    );
}

#[test]
fn loop_does_not_count_its_own_metrics_file_as_progress() {
    let dir = tempfile::tempdir().unwrap();
    // Each iteration lasts long enough for the metrics file to be rewritten during it.
    let (out, _) = run(
        dir.path(),
        &[
            "loop",
            "-q",
            "--max-iterations",
            "6",
            "--metrics-file",
            "m.prom",
            "--",
            "sh",
            "-c",
            "echo 'Still looking.'; sleep 1.3",
        ],
    );
    let err = stderr(&out);
    assert!(err.contains("iteration 2: 0 files changed"), "{err}");
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("loop finished after 4 iterations: circuit_open (failure)"),
        "{err}"
    );
    assert!(dir.path().join("m.prom").exists());
}

#[test]
fn a_second_loop_on_the_same_state_folder_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join(".agentbreaker/loop.lock");
    // Loop B makes progress for a while.
    let b = agentbreaker(
        dir.path(),
        &[
            "loop",
            "-q",
            "--max-iterations",
            "2",
            "--",
            "sh",
            "-c",
            "sleep 1; date +%s%N >> progress.txt; echo 'Changed a file.'",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let start = Instant::now();
    while std::fs::read_to_string(&lock).map_or(true, |t| t.trim().is_empty()) {
        assert!(start.elapsed() < Duration::from_secs(10), "no lock file");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Loop A, meanwhile, would overwrite B's state (and B A's): it does not start.
    let marker = dir.path().join("ran");
    let touch = format!("touch {}", marker.display());
    let (out, _) = run(dir.path(), &["loop", "-q", "--", "sh", "-c", &touch]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(75), "{err}");
    assert!(
        err.contains(&format!(
            "another `agentbreaker loop` (pid {}) is running with the state folder .agentbreaker",
            b.id()
        )),
        "{err}"
    );
    assert!(!marker.exists(), "loop A ran its agent");
    // --reset does not take the state from under a running loop either.
    let (out, _) = run(dir.path(), &["loop", "-q", "--reset", "--", "true"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let b_out = b.wait_with_output().unwrap();
    assert_eq!(b_out.status.code(), Some(2), "{}", stderr(&b_out));
    // Once B has ended, the next loop starts.
    let (out, _) = run(
        dir.path(),
        &[
            "loop",
            "-q",
            "--max-iterations",
            "1",
            "--",
            "sh",
            "-c",
            &touch,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(marker.exists());
}

#[test]
fn a_loop_whose_state_cannot_be_saved_exits_74_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // Each iteration turns the state folder into a file: no state can be written any more.
    let (out, _) = run(
        dir.path(),
        &[
            "loop",
            "-q",
            "--state-dir",
            "st",
            "--",
            "sh",
            "-c",
            "rm -rf st; echo x > st; echo 'Still looking.'",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(74), "{err}");
    assert!(
        err.contains("loop finished after 4 iterations: circuit_open (failure)"),
        "{err}"
    );
    assert!(
        err.contains(
            "could not save the loop's state to st/state.json: cannot create st: File exists"
        ) && err.contains("the OPEN breaker is not kept"),
        "{err}"
    );
    assert!(!err.contains("stays OPEN"), "{err}");
}

// ------------------------------------------------------------------------------------------------
// replay and config

fn example(name: &str) -> String {
    format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn replay_of_the_examples() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("runaway-tool-calls.jsonl", Some(("tool_call_limit", 403))),
        ("near-identical-outputs.jsonl", Some(("repeated_step", 20))),
        ("path-hallucination.jsonl", Some(("fail_streak", 12))),
        ("healthy-session.jsonl", None),
    ];
    for (file, halt) in cases {
        let (out, _) = run(dir.path(), &["replay", &example(file), "--json"]);
        assert_eq!(out.status.code(), Some(0), "{file}: {}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["halted"], halt.is_some(), "{file}: {v}");
        if let Some((slug, line)) = halt {
            assert_eq!(v["halt"]["reason"], slug, "{file}: {v}");
            assert_eq!(v["line"], line, "{file}: {v}");
            // Each was warned before it was stopped.
            assert_eq!(v["warnings"][0]["reason"], slug, "{file}: {v}");
        } else {
            assert_eq!(v["warningsTotal"], 0, "{file}: {v}");
        }
        assert_eq!(v["malformedLines"], 0, "{file}");
        assert_eq!(v["invalidEvents"]["count"], 0, "{file}");
    }
    let (out, _) = run(
        dir.path(),
        &["replay", &example("runaway-tool-calls.jsonl")],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "agentbreaker: stopped by rule tool_call_limit: tool calls: 201 of 200 (task session"
        ),
        "{text}"
    );
}

/// The two recorded healthy Claude Code sessions of the evaluation set (docs/detection.md),
/// copied whole into the fixtures so the test always runs.
fn shared_streams() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/streams")
}

#[test]
fn the_recorded_healthy_sessions_run_to_the_end_with_the_defaults() {
    let streams = shared_streams();
    let dir = tempfile::tempdir().unwrap();
    for file in [
        "claude-code-session-1.jsonl",
        "claude-code-pricing-run1.jsonl",
    ] {
        let path = streams.join(file);
        let path = path.to_string_lossy();
        let (out, _) = run(dir.path(), &["replay", &path, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{file}: {}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["halted"], false, "{file}: {}", v["halt"]);
        assert_eq!(v["malformedLines"], 0, "{file}");
        assert_eq!(v["invalidEvents"]["count"], 0, "{file}");
        assert_eq!(v["status"]["tasks"].as_array().unwrap().len(), 1, "{file}");
    }
}

#[test]
fn the_docs_give_the_profiles_step_level_no_progress_threshold() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md"))
            .unwrap();
    let n = agentbreaker::profile("coding-agent")
        .unwrap()
        .stagnation
        .no_progress_threshold;
    // docs/cli.md's words (`loop`), one line or two.
    let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(&format!(
            "the `coding-agent` profile's no-progress threshold of {n} steps"
        )),
        "docs/cli.md does not give the coding-agent profile's no-progress threshold ({n})"
    );
}

#[test]
fn config_layers_file_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentbreaker.toml"),
        "[budget]\nmaxToolCallsPerTask = 120\n",
    )
    .unwrap();
    let out = agentbreaker(dir.path(), &["config", "--json"])
        .env("AGENTBREAKER_IDLE_SECS", "45")
        .env("AGENTBREAKER_JACCARD", "nope")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["profile"], "coding-agent");
    assert_eq!(v["config"]["budget"]["maxToolCallsPerTask"], 120);
    assert_eq!(v["config"]["monitor"]["warnBefore"], 2);
    assert_eq!(v["config"]["budget"]["maxIdleSecs"], 45);
    assert_eq!(v["config"]["budget"]["similarityJaccardThreshold"], 0.95);
    assert_eq!(v["warnings"].as_array().unwrap().len(), 1);
    assert_eq!(v["source"], "agentbreaker.toml");
    std::fs::write(dir.path().join("agentbreaker.toml"), "[budget]\nnope = 1\n").unwrap();
    let (out, _) = run(dir.path(), &["config"]);
    assert_eq!(out.status.code(), Some(78));
}

// ------------------------------------------------------------------------------------------------
// eval

fn write_gz(path: &Path, lines: &[Value]) {
    use std::io::Write;
    let file = std::fs::File::create(path).unwrap();
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    for l in lines {
        writeln!(gz, "{l}").unwrap();
    }
    gz.finish().unwrap();
}

fn trajectory(id: &str, steps: &[(&str, &str, bool)]) -> Vec<Value> {
    let mut lines = vec![serde_json::json!({"step": 0, "kind": "meta", "id": id})];
    for (i, (action, result, ok)) in steps.iter().enumerate() {
        let n = i + 1;
        lines.push(serde_json::json!({"step": n, "kind": "assistant", "text": ""}));
        lines.push(
            serde_json::json!({"step": n, "kind": "tool_call", "name": "bash", "args": action}),
        );
        lines.push(serde_json::json!({"step": n, "kind": "tool_result", "name": "bash", "ok": ok, "text": result}));
    }
    lines.push(serde_json::json!({"step": steps.len(), "kind": "end", "exit_status": "submitted"}));
    lines
}

/// A small labelled set in `dir`: a stuck run (gzipped) and a healthy one; returns the paths of
/// the trajectories folder and the labels file.
fn eval_set(dir: &Path) -> (String, String) {
    let trajectories = dir.join("t");
    std::fs::create_dir(&trajectories).unwrap();
    // Stuck: the same failing command from step 3 on, 8 times, then the run ends.
    let mut stuck = vec![("ls", "a b", true), ("cat a", "text", true)];
    stuck.extend(std::iter::repeat_n(
        ("make", "make: *** No rule to make target", false),
        8,
    ));
    write_gz(
        &trajectories.join("src__stuck.jsonl.gz"),
        &trajectory("src__stuck", &stuck),
    );
    // Healthy: different commands and results (numbers alone would normalize away).
    let names = [
        "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
        "lambda", "mu",
    ];
    let healthy: Vec<(String, String, bool)> = names
        .iter()
        .map(|n| (format!("open {n}.py"), format!("contents of {n}"), true))
        .collect();
    let healthy: Vec<(&str, &str, bool)> = healthy
        .iter()
        .map(|(a, r, o)| (a.as_str(), r.as_str(), *o))
        .collect();
    std::fs::write(
        trajectories.join("src__healthy.jsonl"),
        trajectory("src__healthy", &healthy)
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let labels = dir.join("labels.csv");
    std::fs::write(
        &labels,
        "id,label,reason,onset_step\nsrc__stuck,stuck,\"terminal loop, period 1\",3\nsrc__healthy,healthy,fine,\n",
    )
    .unwrap();
    (
        trajectories.to_string_lossy().into_owned(),
        labels.to_string_lossy().into_owned(),
    )
}

#[test]
fn eval_counts_halts_before_the_last_step_per_label() {
    let dir = tempfile::tempdir().unwrap();
    let (t, l) = eval_set(dir.path());
    let (out, _) = run(
        dir.path(),
        &["eval", "--trajectories", &t, "--labels", &l, "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stuck"]["total"], 1);
    assert_eq!(v["stuck"]["halted"], 1, "{v}");
    // Repeat threshold 5: the 5th identical step is step 7, four steps after the onset.
    assert_eq!(v["stuck"]["medianStepsAfterOnset"], 4.0);
    assert_eq!(v["stepsSaved"], 3);
    assert_eq!(v["healthy"]["total"], 1);
    assert_eq!(v["healthy"]["halted"], 0);
    assert_eq!(v["bySource"]["src"]["stuck"]["halted"], 1);
    assert_eq!(v["haltedBy"]["stuck"]["repeated_step"], 1);

    let plot = dir.path().join("curve.svg");
    let p = plot.to_string_lossy().into_owned();
    let (out, _) = run(
        dir.path(),
        &["eval", "--trajectories", &t, "--labels", &l, "--plot", &p],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("repeatThreshold=3"),
        "{svg}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sweep over coding-agent"), "{text}");
}

#[test]
fn eval_reads_neither_the_working_directorys_toml_nor_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let (t, l) = eval_set(dir.path());
    let args = ["eval", "--trajectories", &t, "--labels", &l, "--json"];
    let (plain, _) = run(dir.path(), &args);
    assert_eq!(plain.status.code(), Some(0), "{}", stderr(&plain));
    // A project's file in the working directory (halting the stuck run two steps earlier) and
    // a variable: the figures do not move.
    std::fs::write(
        dir.path().join("agentbreaker.toml"),
        "[stagnation]\nrepeatThreshold = 3\n",
    )
    .unwrap();
    let out = agentbreaker(dir.path(), &args)
        .env("AGENTBREAKER_TOOL_CAP", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stuck"]["medianStepsAfterOnset"], 4.0, "{v}");
    assert_eq!(v, serde_json::from_slice::<Value>(&plain.stdout).unwrap());
    // Even an invalid one is not read; --config names the file to use.
    std::fs::write(dir.path().join("agentbreaker.toml"), "[nonsense]\n").unwrap();
    let (out, _) = run(dir.path(), &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (out, _) = run(
        dir.path(),
        &[&args[..], &["--config", "agentbreaker.toml"]].concat(),
    );
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
}

#[test]
fn eval_refuses_a_run_in_two_files() {
    let dir = tempfile::tempdir().unwrap();
    let (t, l) = eval_set(dir.path());
    // The stuck run unpacked beside its .gz (`gunzip -k`).
    let lines: Vec<Value> = trajectory("src__stuck", &[("ls", "a b", true)]);
    std::fs::write(
        Path::new(&t).join("src__stuck.jsonl"),
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    let (out, _) = run(dir.path(), &["eval", "--trajectories", &t, "--labels", &l]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(65), "{err}");
    assert!(
        err.contains("run \"src__stuck\" is in two files")
            && err.contains("src__stuck.jsonl and ")
            && err.contains("src__stuck.jsonl.gz"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn eval_list_json_includes_the_halted_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (t, l) = eval_set(dir.path());
    let (out, _) = run(
        dir.path(),
        &[
            "eval",
            "--trajectories",
            &t,
            "--labels",
            &l,
            "--list",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["halts"],
        serde_json::json!([{"label": "stuck", "id": "src__stuck", "step": 7, "lastStep": 10,
            "rule": "repeated_step"}]),
        "{v}"
    );
    // Without --list, no list.
    let (out, _) = run(
        dir.path(),
        &["eval", "--trajectories", &t, "--labels", &l, "--json"],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("halts").is_none(), "{v}");
}

#[test]
fn the_default_profile_stops_a_repeated_tool_step() {
    let dir = tempfile::tempdir().unwrap();
    // The same Read of the same missing file, answered the same way, again and again.
    let call = r#"{"type":"assistant","message":{"id":"mID","content":[{"type":"tool_use","id":"tID","name":"Read","input":{"file_path":"/src/main.py"}}]},"session_id":"s"}"#;
    let result = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"tID","content":"File does not exist.","is_error":false}]},"session_id":"s"}"#;
    let script = format!(
        "for i in 1 2 3 4 5 6 7 8; do echo '{call}' | sed \"s/ID/$i/g\"; echo '{result}' | sed \"s/ID/$i/g\"; done; sleep 5"
    );
    let (out, _) = run(
        dir.path(),
        &[
            "run",
            "--grace-secs",
            "1",
            "--report",
            "r.json",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let r = report(&dir.path().join("r.json"));
    assert_eq!(r["halt"]["reason"], "repeated_step");
    assert_eq!(
        r["halt"]["message"], "the same step 5 times in a row (5 of 5): `Read /src/main.py`",
        "{r}"
    );
    assert!(
        r["halt"]["nudge"]
            .as_str()
            .unwrap()
            .starts_with("You have run `Read /src/main.py` 5 times with the same result."),
        "{r}"
    );
    // With the repeat detector off, the same agent runs to its end.
    std::fs::write(
        dir.path().join("agentbreaker.toml"),
        "[stagnation]\nrepeatThreshold = 0\n",
    )
    .unwrap();
    let (out, _) = run(
        dir.path(),
        &[
            "run",
            "--",
            "sh",
            "-c",
            &script.replace("sleep 5", "exit 0"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

// ------------------------------------------------------------------------------------------------
// Review fixes: output that is not an event, the report's exit code, a stdout nobody reads.

#[test]
fn output_that_is_no_event_keeps_the_agent_alive() {
    let dir = tempfile::tempdir().unwrap();
    // Plain progress text every half second for 4 s, with a 2 s idle limit.
    let script = "echo '{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s\"}'; \
                  i=0; while [ $i -lt 8 ]; do echo \"working... $i\"; sleep 0.5; i=$((i+1)); done";
    let (out, _) = run(
        dir.path(),
        &[
            "run",
            "--idle-secs",
            "2",
            "--grace-secs",
            "1",
            "--report",
            "r.json",
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = report(&dir.path().join("r.json"));
    assert_eq!(r["halt"], Value::Null, "{r}");
    assert_eq!(r["malformedLines"], 8, "{r}");

    // One that prints nothing at all is idle from its start.
    let (out, took) = run(
        dir.path(),
        &[
            "run",
            "--idle-secs",
            "2",
            "--grace-secs",
            "1",
            "--report",
            "r.json",
            "--",
            "sleep",
            "10",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(took < Duration::from_secs(6), "took {took:?}");
    assert_eq!(
        report(&dir.path().join("r.json"))["halt"]["reason"],
        "idle_timeout"
    );
}

#[test]
fn a_report_that_cannot_be_written_exits_74_unless_the_agent_was_halted() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = run(
        dir.path(),
        &[
            "run",
            "--report",
            "/nonexistent/dir/r.json",
            "--",
            "sh",
            "-c",
            "exit 0",
        ],
    );
    assert_eq!(out.status.code(), Some(74), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("could not write the report /nonexistent/dir/r.json"),
        "{}",
        stderr(&out)
    );
    // A halt says more about the run: its code stays.
    let script = format!("while true; do echo '{TOOL_USE}'; sleep 0.02; done");
    let (out, _) = run(
        dir.path(),
        &[
            "run",
            "--max-tool-calls",
            "2",
            "--grace-secs",
            "1",
            "--report",
            "/nonexistent/dir/r.json",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("could not write the report"));
}

#[test]
fn replay_takes_equal_timestamps_as_no_time_and_labels_gap_warnings_with_their_time() {
    let dir = tempfile::tempdir().unwrap();
    let same = dir.path().join("same.jsonl");
    std::fs::write(
        &same,
        "{\"type\": \"alive\", \"timestamp\": \"2025-01-01T00:00:00Z\"}\n".repeat(30),
    )
    .unwrap();
    let same = same.to_string_lossy().into_owned();
    let (out, _) = run(
        dir.path(),
        &["replay", &same, "--duration-secs", "10", "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["halted"], false, "{v}");
    // As live: the same lines from a fast agent run to the end.
    let (out, _) = run(
        dir.path(),
        &["run", "--duration-secs", "10", "--", "cat", &same],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // 20 minutes without a line: the idle warning came 720 s into the silence, at 722 s.
    let gap = dir.path().join("gap.jsonl");
    std::fs::write(
        &gap,
        "{\"type\": \"assistant\", \"text\": \"start\", \"ts\": 1700000000000}\n\
         {\"type\": \"tool_use\", \"name\": \"Bash\", \"input\": {\"command\": \"ls\"}, \"ts\": 1700000001000}\n\
         {\"type\": \"tool_result\", \"ok\": true, \"text\": \"a\", \"ts\": 1700000002000}\n\
         {\"type\": \"assistant\", \"text\": \"later\", \"ts\": 1700001202000}\n",
    )
    .unwrap();
    let gap = gap.to_string_lossy().into_owned();
    let (out, _) = run(dir.path(), &["replay", &gap, "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["warnings"][0]["reason"], "idle_timeout", "{v}");
    assert_eq!(v["warnings"][0]["at"]["atSecs"], 722.0, "{v}");
    assert_eq!(v["halt"]["reason"], "idle_timeout", "{v}");
    assert_eq!(v["atSecs"], 903.0, "{v}");
    let (out, _) = run(dir.path(), &["replay", &gap]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("line 4 (12m02s): warning [idle_timeout]"),
        "{text}"
    );
}

/// Peak resident memory of a process, in KB.
fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_stdout_nobody_reads_stops_neither_the_ticks_nor_the_halt() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("agent.pid");
    // A first line larger than a pipe holds, then a line every 0.1 s.
    let script = format!(
        "echo $$ > {}; head -c 200000 /dev/zero | tr '\\0' x; echo; \
         while true; do echo 'working'; sleep 0.1; done",
        pidfile.display()
    );
    let start = Instant::now();
    let mut child = agentbreaker(
        dir.path(),
        &[
            "run",
            "--duration-secs",
            "2",
            "--grace-secs",
            "1",
            "--report",
            "r.json",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Our end of agentbreaker's stdout is held and never read.
    let stdout = child.stdout.take().unwrap();
    while !pidfile.exists() || std::fs::read_to_string(&pidfile).unwrap().trim().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the agent did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stopped = loop {
        if !alive(pid) {
            break true;
        }
        if start.elapsed() > Duration::from_secs(8) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        stopped,
        "the agent {pid} runs on while our stdout is blocked"
    );
    drop(stdout);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(2));
    let r = report(&dir.path().join("r.json"));
    assert_eq!(r["halt"]["reason"], "duration_limit", "{r}");
}

#[test]
fn a_flooding_agent_waits_for_a_slow_stdout_and_its_output_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    // 100 000 lines of 1000 bytes: 100 MB.
    let script = "yes \"$(head -c 1000 /dev/zero | tr '\\0' x)\" | head -n 100000";
    let mut child = agentbreaker(dir.path(), &["run", "--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // Nobody reads for a while: agentbreaker holds a bounded amount, the agent waits.
    std::thread::sleep(Duration::from_millis(1500));
    let peak = peak_rss_kb(child.id());
    let mut all = Vec::new();
    std::io::Read::read_to_end(&mut stdout, &mut all).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(peak < 64 * 1024, "agentbreaker grew to {peak} kB");
    assert_eq!(all.len(), 100_000 * 1001);
    assert!(
        all.chunks(1001)
            .all(|l| l[..1000].iter().all(|&b| b == b'x') && l[1000] == b'\n')
    );
}

#[test]
fn an_agent_stopped_for_reading_the_terminal_is_told_about_and_ended_by_a_limit() {
    // A terminal for agentbreaker's stdin: util-linux `script` runs it on a pseudo-terminal.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` command to make a terminal");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let inner = format!(
        "'{BIN}' run -q --idle-secs 2 --grace-secs 1 -- sh -c 'echo asking >&2; read x; echo got'"
    );
    let start = Instant::now();
    let mut child = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut text);
        text
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("agentbreaker did not end the stopped agent");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = reader.join().unwrap();
    let text = String::from_utf8_lossy(&text);
    assert!(
        text.contains("agentbreaker: the agent is stopped (SIGTTIN): it read from the terminal"),
        "{text}"
    );
    assert!(text.contains("stopped by rule idle_timeout"), "{text}");
    assert_eq!(status.code(), Some(2), "{text}");
    assert!(start.elapsed() < Duration::from_secs(10));
}
