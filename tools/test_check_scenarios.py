"""Self-test for tools/check_scenarios.py.

Run with either of:
    python3 -m pytest tools/test_check_scenarios.py
    python3 -m unittest discover -s tools -p 'test_check_scenarios.py'
    python3 tools/test_check_scenarios.py

Each test builds a temporary suite directory, runs the checker on it as a subprocess and looks at
the exit status and output. Needs the `jsonschema` package (the checker exits 2 without it).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
CHECKER = TOOLS / "check_scenarios.py"
REPO_SCHEMA = TOOLS.parent / "tests" / "conformance" / "schema.json"

# The README's example, extended with a wrong-type step (contract §10).
GOOD_FAILURE = {
    "description": "opens after five consecutive failures",
    "subject": "failure",
    "config": {"failureThreshold": 5},
    "spec": "2",
    "steps": [
        {"at": 0, "op": "recordFailure", "args": {"error": "Path not found"}, "repeat": 4},
        {"op": "getStatus", "expect": {"state": "CLOSED", "consecutiveFailures": 4}},
        {"at": 1000, "op": "recordFailure", "args": {"error": "Path not found"}},
        {
            "at": 3000,
            "op": "shouldAllowOperation",
            "expect": {
                "allowed": False,
                "message": "Circuit breaker OPEN. 28 seconds remaining in cooldown. "
                "5 consecutive failures detected. Human intervention required.",
            },
        },
        {"op": "recordFailure", "args": {"error": 42}, "expectError": "INVALID_ARGUMENT"},
        {"op": "reset", "args": {}},
        {"op": "events", "expect": {"events": [{"type": "stateChange", "to": "OPEN"}]}},
    ],
}

GOOD_STRATEGY_CONFIG_ERROR = {
    "description": "a composite strategy with no members is rejected",
    "subject": "strategy",
    "config": {"type": "composite", "members": []},
    "configError": "INVALID_CONFIG",
    "steps": [],
}

GOOD_FIX_PLAN = {
    "description": "a fix plan starts at its first step",
    "subject": "fixPlan",
    "config": {"steps": [{"description": "fix the parser"}]},
    "steps": [{"op": "getStatus", "expect": {"currentStep": 0}}],
}

GOOD_ANALYZER = {
    "description": "an empty response signals nothing",
    "subject": "analyzer",
    "steps": [{"op": "analyze", "args": {"text": ""}, "expect": {"exitSignal": False}}],
}

GOOD_BUDGET = {
    "description": "a tick with no open task halts nothing",
    "subject": "budget",
    "steps": [{"at": 5000, "op": "tick", "expect": {"halts": []}}],
}

GOOD_MONITOR = {
    "description": "a repeated failing step halts, and a restored snapshot halts the same way",
    "subject": "monitor",
    "config": {"profile": "seed", "stagnation": {"repeatThreshold": 2}, "warnBefore": 0},
    "spec": "11",
    "steps": [
        {"op": "observe", "args": {"event": {"type": "tool_use", "name": "Bash"}}},
        {"op": "observe", "args": {"event": {"type": "tool_result", "ok": False}}},
        {"op": "snapshot", "expect": {"kind": "monitor"}},
        {"op": "observe", "args": {"event": {"type": "tool_use", "name": "Bash"}}},
        {"op": "observe", "args": {"event": {"type": "tool_result", "ok": False}},
         "expect": {"action": "halt", "reason": "repeated_step"}},
        {"op": "reset"},
        {"op": "restore", "args": {"snapshot": "$last_snapshot"}},
        {"op": "status", "expect": {"tasks": [{"steps": 1}]}},
        {"op": "observe", "args": {"event": 42}, "expectError": "INVALID_EVENT"},
        {"op": "tick", "expect": {"verdicts": []}},
        {"op": "events", "expect": {"events": [{"type": "verdict", "action": "halt"}]}},
    ],
}

GOOD_FILES = {
    "failure/opens_at_fifth_failure.json": GOOD_FAILURE,
    "strategy/composite_without_members.json": GOOD_STRATEGY_CONFIG_ERROR,
    "fixPlan/starts_at_first_step.json": GOOD_FIX_PLAN,
    "analyzer/empty_text.json": GOOD_ANALYZER,
    "budget/tick_without_tasks.json": GOOD_BUDGET,
    "monitor/restore_after_snapshot.json": GOOD_MONITOR,
}


def variant(base, **changes):
    data = json.loads(json.dumps(base))
    data.update(changes)
    return data


def step_scenario(subject, step, description="one step"):
    return {"description": description, "subject": subject, "steps": [step]}


class CheckerTest(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="check_scenarios_"))
        self.addCleanup(shutil.rmtree, str(self.dir), True)
        (self.dir / "VERSION").write_text("9.8.7\n", encoding="utf-8")
        shutil.copy(str(REPO_SCHEMA), str(self.dir / "schema.json"))
        for rel, data in GOOD_FILES.items():
            self.write(rel, data)

    # -- helpers

    def write(self, rel, data):
        path = self.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = data if isinstance(data, str) else json.dumps(data, indent=2)
        path.write_text(text, encoding="utf-8")
        return path

    def run_checker(self, *args, env=None):
        full_env = dict(os.environ)
        full_env.pop("AGENTBREAKER_CONFORMANCE_DIR", None)
        if env:
            full_env.update(env)
        return subprocess.run(
            [sys.executable, str(CHECKER)] + [str(a) for a in args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
            env=full_env,
            cwd=str(self.dir),
        )

    def assert_ok(self, expected_count):
        result = self.run_checker(self.dir)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(
            result.stdout.strip(), "%d scenarios OK (suite version 9.8.7)" % expected_count
        )

    def assert_rejected(self, rel, *fragments):
        """The checker exits 1 with a problem line for `rel` containing every fragment."""
        result = self.run_checker(self.dir)
        out = result.stdout
        self.assertEqual(result.returncode, 1, out + result.stderr)
        lines = [l for l in out.splitlines() if l.startswith(rel + ": ")]
        self.assertTrue(lines, "no problem reported for %s:\n%s" % (rel, out))
        for fragment in fragments:
            self.assertTrue(
                any(fragment in l for l in lines),
                "%r not in the problems for %s:\n%s" % (fragment, rel, out),
            )
        # Only the bad file is blamed: the good ones stay clean.
        for good in GOOD_FILES:
            if good != rel:
                self.assertNotIn(good + ": ", out.replace("also used by " + good, ""))
        return out

    # -- the good suite

    def test_good_suite_is_accepted(self):
        self.assert_ok(len(GOOD_FILES))

    def test_repo_schema_is_a_valid_2020_12_schema(self):
        import jsonschema

        schema = json.loads(REPO_SCHEMA.read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        self.assertEqual(schema["$schema"], "https://json-schema.org/draft/2020-12/schema")

    def test_empty_suite_is_accepted(self):
        for rel in GOOD_FILES:
            (self.dir / rel).unlink()
        self.assert_ok(0)

    def test_every_subject_and_op_from_the_readme_is_accepted(self):
        ops = {
            "failure": ["recordSuccess", "recordFailure", "shouldAllowOperation", "getStatus",
                        "metrics", "reset", "snapshot", "restore", "call", "save", "load",
                        "events"],
            "stagnation": ["recordProgress", "recordError", "recordStep", "check", "getStatus", "reset",
                           "snapshot", "restore", "events"],
            "budget": ["ingest", "tick", "snapshot", "reset", "events"],
            "analyzer": ["analyze"],
            "strategy": ["shouldExit", "reset", "events"],
            "fixPlan": ["shouldExit", "getStatus", "reset", "events"],
            "loop": ["observe", "getStatus", "reset", "events"],
            "env": ["configFromEnv"],
            "monitor": ["observe", "tick", "status", "snapshot", "restore", "reset", "events"],
        }
        for subject, names in ops.items():
            steps = [{"op": name} for name in names]
            self.write(
                "%s/all_ops_%s.json" % (subject, subject.lower()),
                {"description": "every op of %s" % subject, "subject": subject, "steps": steps},
            )
        self.assert_ok(len(GOOD_FILES) + len(ops))

    def test_environment_variable_is_honoured(self):
        other = self.dir / "elsewhere"
        other.mkdir()
        (other / "VERSION").write_text("1.2.3\n", encoding="utf-8")
        result = self.run_checker(env={"AGENTBREAKER_CONFORMANCE_DIR": str(other)})
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout.strip(), "0 scenarios OK (suite version 1.2.3)")
        # An explicit argument wins over the variable.
        result = self.run_checker(self.dir, env={"AGENTBREAKER_CONFORMANCE_DIR": str(other)})
        self.assertIn("%d scenarios OK" % len(GOOD_FILES), result.stdout)

    def test_missing_directory_exits_2(self):
        result = self.run_checker(self.dir / "nope")
        self.assertEqual(result.returncode, 2)

    def test_missing_jsonschema_exits_2_with_install_hint(self):
        # -S: no site-packages, so jsonschema cannot be imported.
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        result = subprocess.run(
            [sys.executable, "-S", str(CHECKER), str(self.dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
            env=env,
        )
        if result.returncode == 0:
            self.skipTest("jsonschema is importable without site-packages here")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("pip install jsonschema", result.stderr)

    # -- the bad files the brief names

    def test_malformed_json(self):
        self.write("failure/broken.json", '{"description": "x", "subject": "failure",')
        self.assert_rejected("failure/broken.json", "invalid JSON")

    def test_unknown_top_level_key(self):
        self.write("failure/extra_key.json",
                   variant(GOOD_FAILURE, description="has an extra key", tags=["x"]))
        self.assert_rejected("failure/extra_key.json", "'tags' was unexpected")

    def test_unknown_op_for_subject(self):
        # getStatus exists for fixPlan but not for strategy.
        self.write("strategy/get_status.json",
                   step_scenario("strategy", {"op": "getStatus"}, "strategy status"))
        self.assert_rejected("strategy/get_status.json", "$.steps[0].op",
                             'op "getStatus" is not allowed for subject "strategy"')

    def test_op_that_exists_nowhere(self):
        self.write("failure/frobnicate.json",
                   step_scenario("failure", {"op": "frobnicate"}, "frobnicates"))
        self.assert_rejected("failure/frobnicate.json", "frobnicate")

    def test_expect_and_expect_error_together(self):
        self.write("failure/both.json", step_scenario(
            "failure",
            {"op": "recordFailure", "args": {"error": 1}, "expect": None,
             "expectError": "INVALID_ARGUMENT"},
            "both expectations"))
        self.assert_rejected("failure/both.json", "mutually exclusive")

    def test_duplicate_content(self):
        self.write("failure/same_again.json",
                   variant(GOOD_FAILURE, description="the same thing said differently",
                           spec="seed 004"))
        self.assert_rejected("failure/same_again.json", "same scenario as failure/opens_at_fifth_failure")

    def test_duplicate_content_after_filling_defaults(self):
        # Explicit defaults (repeat 1, args {}, config {}) and 1.0 vs 1 do not make a new scenario.
        dup = variant(GOOD_ANALYZER, description="analyzes nothing", config={})
        dup["steps"][0]["repeat"] = 1
        self.write("analyzer/empty_text_again.json", dup)
        self.assert_rejected("analyzer/empty_text_again.json", "same scenario as analyzer/empty_text")

    def test_duplicate_stem(self):
        self.write("stagnation/opens_at_fifth_failure.json", step_scenario(
            "stagnation", {"op": "check"}, "stagnation check"))
        self.assert_rejected("stagnation/opens_at_fifth_failure.json", "also used by failure/")

    def test_wrong_directory(self):
        self.write("budget/a_failure_scenario.json",
                   step_scenario("failure", {"op": "metrics"}, "metrics in the wrong place"))
        self.assert_rejected("budget/a_failure_scenario.json", 'subject "failure"',
                             "expected failure/a_failure_scenario.json")

    def test_monitor_op_of_another_subject(self):
        self.write("monitor/ingest.json", step_scenario(
            "monitor", {"op": "ingest", "args": {"event": {"type": "alive"}}}, "monitor ingest"))
        self.assert_rejected("monitor/ingest.json",
                             'op "ingest" is not allowed for subject "monitor"')

    def test_monitor_status_takes_no_args(self):
        self.write("monitor/status_args.json", step_scenario(
            "monitor", {"op": "status", "args": {"taskId": "t1"}}, "status with args"))
        self.assert_rejected("monitor/status_args.json", 'op "status" takes no args')

    def test_monitor_config_error(self):
        self.write("monitor/config_error.json", {
            "description": "unknown profile", "subject": "monitor",
            "config": {"profile": "fast"}, "configError": "INVALID_CONFIG", "steps": []})
        self.assert_ok(len(GOOD_FILES) + 1)

    def test_last_snapshot_before_any_snapshot(self):
        data = json.loads(json.dumps(GOOD_MONITOR))
        data["description"] = "restores before snapshotting"
        data["steps"] = [data["steps"][6]] + data["steps"]
        self.write("monitor/restore_first.json", data)
        self.assert_rejected("monitor/restore_first.json", "$.steps[0].args.snapshot",
                             "$last_snapshot before any snapshot step")

    def test_last_snapshot_outside_restore(self):
        self.write("monitor/placeholder_event.json", {
            "description": "a placeholder as an event", "subject": "monitor",
            "steps": [{"op": "snapshot"},
                      {"op": "observe", "args": {"event": "$last_snapshot"}}]})
        self.write("failure/placeholder_expect.json", {
            "description": "a placeholder in an expectation", "subject": "failure",
            "steps": [{"op": "snapshot", "expect": {"kind": "$last_snapshot"}}]})
        out = self.assert_rejected("monitor/placeholder_event.json", "$.steps[1].args.event",
                                   "only allowed as a restore step's args.snapshot")
        self.assertIn("failure/placeholder_expect.json: $.steps[0].expect.kind", out)

    def test_literal_snapshot_is_not_a_placeholder(self):
        self.write("monitor/literal_restore.json", {
            "description": "a literal snapshot", "subject": "monitor",
            "steps": [{"op": "restore", "args": {"snapshot": "monitor"},
                       "expectError": "INVALID_SNAPSHOT"}]})
        self.assert_ok(len(GOOD_FILES) + 1)

    # -- further bad files

    def test_file_outside_subject_directory(self):
        self.write("top_level.json", step_scenario("failure", {"op": "metrics"}, "top level"))
        self.assert_rejected("top_level.json", "expected failure/top_level.json")

    def test_bad_file_name(self):
        self.write("failure/OpensEarly.json", step_scenario("failure", {"op": "metrics"}, "camel"))
        self.assert_rejected("failure/OpensEarly.json", "does not match")

    def test_duplicate_description(self):
        self.write("failure/other.json", step_scenario(
            "failure", {"op": "metrics"}, "Opens after five  consecutive failures"))
        self.assert_rejected("failure/other.json", "description")

    def test_args_for_op_without_args(self):
        self.write("failure/reset_args.json", step_scenario(
            "failure", {"op": "reset", "args": {"hard": True}}, "reset with args"))
        self.assert_rejected("failure/reset_args.json", 'op "reset" takes no args')

    def test_at_float(self):
        self.write("failure/at_float.json", step_scenario(
            "failure", {"at": 1000.0, "op": "metrics"}, "float time"))
        self.assert_rejected("failure/at_float.json", "$.steps[0].at", "integer")

    def test_at_fraction_string_and_negative(self):
        for name, at in (("at_fraction", 1.5), ("at_string", "1000"), ("at_negative", -1),
                         ("at_bool", True)):
            self.write("failure/%s.json" % name, step_scenario(
                "failure", {"at": at, "op": "metrics"}, "time %s" % name))
        out = self.run_checker(self.dir).stdout
        for name in ("at_fraction", "at_string", "at_negative", "at_bool"):
            self.assertIn("failure/%s.json: $.steps[0].at" % name, out)

    def test_repeat_zero(self):
        self.write("failure/repeat_zero.json", step_scenario(
            "failure", {"op": "metrics", "repeat": 0}, "never runs"))
        self.assert_rejected("failure/repeat_zero.json", "$.steps[0].repeat")

    def test_unknown_step_key(self):
        self.write("failure/step_key.json", step_scenario(
            "failure", {"op": "metrics", "expected": {}}, "typo in a step key"))
        self.assert_rejected("failure/step_key.json", "'expected' was unexpected")

    def test_empty_steps_without_config_error(self):
        self.write("failure/nothing.json",
                   {"description": "nothing", "subject": "failure", "steps": []})
        self.assert_rejected("failure/nothing.json", "scenario checks nothing")

    def test_config_error_with_steps(self):
        self.write("failure/config_error_steps.json", {
            "description": "bad threshold", "subject": "failure",
            "config": {"failureThreshold": 0}, "configError": "INVALID_CONFIG",
            "steps": [{"op": "metrics"}]})
        self.assert_rejected("failure/config_error_steps.json", "steps must be []")

    def test_unknown_error_code(self):
        self.write("failure/bad_code.json", step_scenario(
            "failure", {"op": "recordFailure", "args": {"error": 1}, "expectError": "TYPE_ERROR"},
            "bad code"))
        self.assert_rejected("failure/bad_code.json", "$.steps[0].expectError")

    def test_missing_and_empty_description(self):
        self.write("failure/no_description.json", {"subject": "failure", "steps": [{"op": "metrics"}]})
        self.write("failure/blank_description.json",
                   {"description": " ", "subject": "failure", "steps": [{"op": "reset"}]})
        out = self.assert_rejected("failure/no_description.json", "'description' is a required")
        self.assertIn("failure/blank_description.json: $.description", out)

    def test_unknown_subject(self):
        self.write("failure/unknown_subject.json", step_scenario("breaker", {"op": "metrics"}, "?"))
        self.assert_rejected("failure/unknown_subject.json", "$.subject")

    def test_duplicate_json_key(self):
        self.write("failure/dup_key.json",
                   '{"description": "d", "subject": "failure", "subject": "budget", "steps": [{"op": "metrics"}]}')
        self.assert_rejected("failure/dup_key.json", "duplicate key")

    def test_nan_is_not_json(self):
        self.write("failure/nan.json",
                   '{"description": "d", "subject": "failure", "steps": [{"op": "metrics", "expect": NaN}]}')
        self.assert_rejected("failure/nan.json", "NaN")

    def test_top_level_array(self):
        self.write("failure/array.json", "[]")
        self.assert_rejected("failure/array.json", "is not of type 'object'")


if __name__ == "__main__":
    unittest.main()
