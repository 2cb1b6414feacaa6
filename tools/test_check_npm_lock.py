"""Tests of tools/check_npm_lock.py, and the check itself on every lock file of the repository.

    python3 -m pytest tools/test_check_npm_lock.py
"""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))
import check_npm_lock  # noqa: E402

ROOT = TOOLS.parent
LOCKS = sorted(p for p in ROOT.glob("**/package-lock.json") if "node_modules" not in p.parts)

GOOD = {
    "name": "x",
    "lockfileVersion": 3,
    "requires": True,
    "packages": {
        "": {"name": "x", "version": "1.0.0"},
        "node_modules/a": {"version": "1.2.3", "integrity": "sha512-AAAA"},
        "node_modules/b": {"version": "2.0.0", "resolved": "https://registry.npmjs.org/b/-/b-2.0.0.tgz"},
        "packages/ws": {"link": True, "resolved": "packages/ws"},
    },
}


def test_the_repository_has_lock_files_to_check():
    assert any(p.parent.name == "node" for p in LOCKS), LOCKS


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_lock_file_installs_from_an_empty_cache(lock):
    found = check_npm_lock.problems(json.loads(lock.read_text(encoding="utf-8")))
    assert found == [], "\n".join(found)


def test_a_complete_lock_passes():
    assert check_npm_lock.problems(GOOD) == []


def test_an_entry_without_a_version_fails():
    # What npm 11.13 wrote for the napi CLI's optional platform packages (issue 14).
    lock = copy.deepcopy(GOOD)
    lock["packages"]["node_modules/@napi-rs/lzma/node_modules/@napi-rs/lzma-darwin-arm64"] = {
        "optional": True
    }
    found = check_npm_lock.problems(lock)
    assert any("lzma-darwin-arm64: no version" in line for line in found), found
    assert any("lzma-darwin-arm64: neither resolved nor integrity" in line for line in found), found


def test_an_entry_without_a_source_fails():
    lock = copy.deepcopy(GOOD)
    del lock["packages"]["node_modules/a"]["integrity"]
    assert check_npm_lock.problems(lock) == ["node_modules/a: neither resolved nor integrity"]


def test_an_empty_version_fails():
    lock = copy.deepcopy(GOOD)
    lock["packages"]["node_modules/b"]["version"] = ""
    assert check_npm_lock.problems(lock) == ["node_modules/b: no version"]


@pytest.mark.parametrize("version", [1, None, "3"])
def test_an_old_or_unknown_lockfile_version_fails(version):
    lock = copy.deepcopy(GOOD)
    lock["lockfileVersion"] = version
    assert len(check_npm_lock.problems(lock)) == 1


def test_the_command_exits_1_and_names_the_entry(tmp_path):
    lock = copy.deepcopy(GOOD)
    lock["packages"]["node_modules/c"] = {"dev": True}
    path = tmp_path / "package-lock.json"
    path.write_text(json.dumps(lock), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(TOOLS / "check_npm_lock.py"), str(path)], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "node_modules/c: no version" in done.stderr
    assert "empty cache" in done.stderr


def test_the_command_passes_a_good_lock(tmp_path):
    path = tmp_path / "package-lock.json"
    path.write_text(json.dumps(GOOD), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(TOOLS / "check_npm_lock.py"), str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
