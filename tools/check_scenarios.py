#!/usr/bin/env python3
"""Check the agentbreaker conformance scenarios (tests/conformance/).

Usage:
    python3 tools/check_scenarios.py [DIR]

DIR defaults to $AGENTBREAKER_CONFORMANCE_DIR, or else to tests/conformance of the repository this
script lives in. Every *.json file under DIR (recursively, except DIR/schema.json) is a scenario.

Each file is validated against DIR/schema.json (falling back to the repository's schema when DIR
has none), and the suite is checked for what a schema cannot see:

  * invalid JSON (including duplicate object keys and NaN/Infinity),
  * file names not matching ^[a-z0-9_]+\\.json$,
  * a file not at <subject>/<name>.json, where <subject> is the file's own "subject",
  * `at` or `repeat` written as a float (1.0) rather than an integer,
  * "steps": [] without "configError" (the scenario checks nothing),
  * "$last_snapshot" (README, "Snapshots within a scenario") outside a restore step's
    args.snapshot, or before any snapshot step,
  * the same file name in two directories,
  * two files with the same scenario (same subject, config, configError and steps once
    `description` and `spec` are dropped, defaults filled in and key order normalized),
  * two files with the same description (compared ignoring case and runs of whitespace).

Output: one line per problem, "path: problem", and exit status 1; or
"N scenarios OK (suite version X)" and exit status 0. Exit status 2 means the check could not run
(jsonschema missing, DIR missing).
"""

import json
import os
import re
import sys
from pathlib import Path

try:
    import jsonschema
except ImportError:  # pragma: no cover - depends on the environment
    print(
        "check_scenarios.py: the Python package 'jsonschema' is missing; "
        "pip install jsonschema",
        file=sys.stderr,
    )
    sys.exit(2)

if not hasattr(jsonschema, "Draft202012Validator"):  # pragma: no cover - jsonschema < 4
    print(
        "check_scenarios.py: jsonschema is too old (draft 2020-12 needs >= 4.0); "
        "pip install --upgrade jsonschema",
        file=sys.stderr,
    )
    sys.exit(2)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = REPO_ROOT / "tests" / "conformance"
ENV_VAR = "AGENTBREAKER_CONFORMANCE_DIR"

SUBJECTS = ("failure", "stagnation", "budget", "analyzer", "fixPlan", "strategy", "loop", "env",
            "monitor")
LAST_SNAPSHOT = "$last_snapshot"
FILE_NAME_RE = re.compile(r"^[a-z0-9_]+\.json$")
SEMVER_RE = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
MAX_MESSAGE = 300


class JsonProblem(ValueError):
    """A file that is not acceptable JSON."""


# --------------------------------------------------------------------------------------- helpers


def display(path):
    """A path as the user is most likely to want it: relative to the cwd when below it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def json_path(parts):
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += "[%d]" % part
        elif re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", part):
            out += "." + part
        else:
            out += "[%s]" % json.dumps(part)
    return out


def shorten(text):
    text = " ".join(text.split())
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 3] + "..."
    return text


def _pairs_without_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise JsonProblem("duplicate key %s in one object" % json.dumps(key))
        obj[key] = value
    return obj


def _reject_constant(name):
    raise JsonProblem("%s is not valid JSON" % name)


def load_json(path):
    """Parse a file strictly; raise JsonProblem with a one-line reason."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise JsonProblem("cannot read file: %s" % exc.strerror)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonProblem("invalid JSON: not UTF-8 (%s)" % exc.reason)
    try:
        return json.loads(
            text,
            object_pairs_hook=_pairs_without_duplicates,
            parse_constant=_reject_constant,
        )
    except json.JSONDecodeError as exc:
        raise JsonProblem("invalid JSON: %s (line %d, column %d)" % (exc.msg, exc.lineno, exc.colno))
    except JsonProblem as exc:
        raise JsonProblem("invalid JSON: %s" % exc)
    except RecursionError:
        raise JsonProblem("invalid JSON: nested too deeply")


def canonical(value):
    """JSON-like data with integral floats as ints (1.0 and 1 match in `expect`)."""
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def scenario_key(data):
    """What makes two scenarios the same test: everything but description/spec, defaults filled."""
    body = {k: v for k, v in data.items() if k not in ("description", "spec")}
    body.setdefault("config", {})
    steps = body.get("steps")
    if isinstance(steps, list):
        norm = []
        for step in steps:
            if isinstance(step, dict):
                step = dict(step)
                step.setdefault("args", {})
                step.setdefault("repeat", 1)
            norm.append(step)
        body["steps"] = norm
    return json.dumps(canonical(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def description_key(description):
    return " ".join(description.split()).casefold()


# ---------------------------------------------------------------------------- schema messages


def schema_message(error, data):
    """jsonschema's message, made readable for the errors this schema is known to produce."""
    path = list(error.absolute_path)
    where = json_path(path)
    subject = data.get("subject") if isinstance(data, dict) else None
    instance = error.instance

    if error.validator == "not" and isinstance(instance, dict) and "expect" in instance \
            and "expectError" in instance:
        return "%s: expect and expectError are mutually exclusive" % where
    if error.validator == "maxProperties" and path and path[-1] == "args":
        op = None
        if len(path) >= 2 and path[0] == "steps":
            try:
                op = data["steps"][path[1]].get("op")
            except (KeyError, IndexError, TypeError, AttributeError):
                op = None
        return "%s: op %s takes no args (only {} is allowed)" % (where, json.dumps(op))
    if error.validator == "maxItems" and path == ["steps"]:
        return "%s: steps must be [] when configError is set" % where
    if error.validator == "enum" and len(path) == 3 and path[0] == "steps" and path[2] == "op" \
            and isinstance(subject, str):
        return "%s: op %s is not allowed for subject %s (allowed: %s)" % (
            where, json.dumps(instance), json.dumps(subject), ", ".join(error.validator_value))
    return "%s: %s" % (where, shorten(error.message))


def schema_problems(validator, data):
    errors = sorted(
        validator.iter_errors(data),
        key=lambda e: ([str(p) for p in e.absolute_path], list(map(str, e.absolute_schema_path))),
    )
    seen = []
    for error in errors:
        msg = schema_message(error, data)
        if msg not in seen:
            seen.append(msg)
    return seen


# ----------------------------------------------------------------------------- per-file checks


def layout_problems(rel, data):
    problems = []
    if not FILE_NAME_RE.match(rel.name):
        problems.append("file name %s does not match ^[a-z0-9_]+\\.json$" % json.dumps(rel.name))
    subject = data.get("subject") if isinstance(data, dict) else None
    parts = rel.parts
    if isinstance(subject, str) and subject in SUBJECTS:
        if len(parts) != 2 or parts[0] != subject:
            problems.append(
                "subject %s but the file is at %s (expected %s/%s)"
                % (json.dumps(subject), rel.as_posix(), subject, rel.name)
            )
    elif len(parts) != 2 or parts[0] not in SUBJECTS:
        problems.append(
            "file is at %s, not in a subject directory (%s)" % (rel.as_posix(), ", ".join(SUBJECTS))
        )
    return problems


def data_problems(data):
    """Checks on the content that the schema does not (or cannot) express."""
    problems = []
    if not isinstance(data, dict):
        return problems
    steps = data.get("steps")
    if steps == [] and "configError" not in data:
        problems.append("$.steps: scenario checks nothing (steps is [] and there is no configError)")
    if isinstance(steps, list):
        snapshot_seen = False
        for i, step in enumerate(steps):
            if not isinstance(step, dict):
                continue
            problems.extend(last_snapshot_problems(step, i, snapshot_seen))
            if step.get("op") == "snapshot":
                snapshot_seen = True
            for key in ("at", "repeat"):
                value = step.get(key)
                if isinstance(value, float) and value.is_integer():
                    problems.append(
                        "%s: %s must be written as an integer, not %r"
                        % (json_path(["steps", i, key]), key, value)
                    )
    return problems


def _placeholder_paths(value, path):
    """Paths (lists of keys) under `value` whose value is the "$last_snapshot" placeholder."""
    if value == LAST_SNAPSHOT:
        yield path
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _placeholder_paths(v, path + [k])
    elif isinstance(value, list):
        for j, v in enumerate(value):
            yield from _placeholder_paths(v, path + [j])


def last_snapshot_problems(step, i, snapshot_seen):
    """"$last_snapshot" only as a restore step's args.snapshot, after some snapshot step."""
    problems = []
    for path in _placeholder_paths(step, ["steps", i]):
        where = json_path(path)
        if path[2:] != ["args", "snapshot"] or step.get("op") != "restore":
            problems.append("%s: %s is only allowed as a restore step's args.snapshot"
                            % (where, LAST_SNAPSHOT))
        elif not snapshot_seen:
            problems.append("%s: %s before any snapshot step" % (where, LAST_SNAPSHOT))
    return problems


# ------------------------------------------------------------------------------------- driver


def resolve_dir(argv):
    if argv:
        return Path(argv[0])
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return DEFAULT_DIR


def read_version(root, problems):
    path = root / "VERSION"
    if not path.is_file():
        path = DEFAULT_DIR / "VERSION"
    try:
        version = path.read_text(encoding="utf-8").strip()
    except OSError:
        problems.append("%s: VERSION file missing or unreadable" % display(path))
        return "unknown"
    if not SEMVER_RE.match(version):
        problems.append("%s: %s is not a semver version" % (display(path), json.dumps(version)))
    return version


def load_validator(root, problems):
    path = root / "schema.json"
    if not path.is_file():
        path = DEFAULT_DIR / "schema.json"
    try:
        schema = load_json(path)
    except JsonProblem as exc:
        problems.append("%s: %s" % (display(path), exc))
        return None
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        problems.append("%s: not a valid draft 2020-12 schema: %s" % (display(path), shorten(exc.message)))
        return None
    return jsonschema.Draft202012Validator(schema)


def find_scenarios(root):
    files = []
    for path in root.rglob("*.json"):
        rel = path.relative_to(root)
        if rel.as_posix() == "schema.json" or path.is_dir():
            continue
        files.append(rel)
    return sorted(files, key=lambda r: r.as_posix())


def check(root):
    """Return (problems, scenario count, version) for the suite at root."""
    problems = []
    validator = load_validator(root, problems)
    version = read_version(root, problems)
    if validator is None:
        return problems, 0, version

    files = find_scenarios(root)
    first_by_stem = {}
    first_by_content = {}
    first_by_description = {}

    for rel in files:
        path = root / rel
        shown = display(path)

        def report(problem, shown=shown):
            problems.append("%s: %s" % (shown, problem))

        try:
            data = load_json(path)
        except JsonProblem as exc:
            data = None
            report(str(exc))
            json_ok = False
        else:
            json_ok = True

        for problem in layout_problems(rel, data):
            report(problem)

        stem = rel.name
        if stem in first_by_stem:
            report("file name %s is also used by %s" % (stem, first_by_stem[stem].as_posix()))
        else:
            first_by_stem[stem] = rel

        if not json_ok:
            continue

        for problem in schema_problems(validator, data):
            report(problem)
        for problem in data_problems(data):
            report(problem)

        if isinstance(data, dict):
            key = scenario_key(data)
            if key in first_by_content:
                report(
                    "same scenario as %s (only description/spec differ)"
                    % first_by_content[key].as_posix()
                )
            else:
                first_by_content[key] = rel
            description = data.get("description")
            if isinstance(description, str) and description.strip():
                dkey = description_key(description)
                if dkey in first_by_description:
                    report(
                        "description %s is also used by %s"
                        % (json.dumps(description), first_by_description[dkey].as_posix())
                    )
                else:
                    first_by_description[dkey] = rel

    return problems, len(files), version


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) > 1:
        print("usage: check_scenarios.py [DIR]", file=sys.stderr)
        return 2
    root = resolve_dir(argv)
    if not root.is_dir():
        print("check_scenarios.py: %s is not a directory" % display(root), file=sys.stderr)
        return 2

    problems, count, version = check(root)
    if problems:
        for line in problems:
            print(line)
        print(
            "%d problem%s in the conformance suite at %s"
            % (len(problems), "" if len(problems) == 1 else "s", display(root)),
            file=sys.stderr,
        )
        return 1
    print("%d scenarios OK (suite version %s)" % (count, version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
