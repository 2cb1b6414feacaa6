"""Tests of tools/dist/versions.py on a copy of the files it reads (make test-dist-meta)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import versions  # noqa: E402

ROOT = versions.ROOT
COPIED = ["Cargo.toml", "Cargo.lock", "CHANGELOG.md", "README.md", "python/pyproject.toml",
          "node/package.json", "node/package-lock.json", "node/index.js", "lua/README.md"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A copy of what versions.py reads and writes."""
    paths = [Path(name) for name in COPIED]
    paths += [path.relative_to(ROOT) for path in versions.member_manifests(ROOT)]
    paths += [path.relative_to(ROOT) for path in (ROOT / "node" / "npm").glob("*/*")]
    paths += [path.relative_to(ROOT) for path in versions.source_rockspecs(ROOT)]
    paths += [path.relative_to(ROOT) for path in (ROOT / "mk").glob("*.mk")]
    for path in paths:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, tmp_path / path)
    return tmp_path


def replace(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_the_repository_agrees() -> None:
    assert versions.check(ROOT, None) == []


def test_the_copy_agrees_and_write_changes_nothing(root: Path) -> None:
    assert versions.check(root, None) == []
    assert versions.write(root) == []


def test_a_node_version_of_its_own_is_refused(root: Path) -> None:
    version = versions.workspace_version(root)
    replace(root / "node/package.json", f'"version": "{version}"', '"version": "9.9.9"')
    assert any("node/package.json" in problem for problem in versions.check(root, None))


def test_a_platform_package_of_another_version_is_refused(root: Path) -> None:
    package = root / "node/npm/linux-x64-gnu/package.json"
    manifest = json.loads(package.read_text(encoding="utf-8"))
    manifest["version"] = "9.9.9"
    package.write_text(json.dumps(manifest), encoding="utf-8")
    assert any("linux-x64-gnu" in problem for problem in versions.check(root, None))


def test_a_crate_with_a_version_of_its_own_is_refused(root: Path) -> None:
    replace(root / "crates/agentbreaker-cli/Cargo.toml", "version.workspace = true",
            'version = "9.9.9"')
    assert any("agentbreaker-cli" in problem for problem in versions.check(root, None))


def test_a_readme_download_of_another_version_is_refused(root: Path) -> None:
    version = versions.workspace_version(root)
    replace(root / "README.md", f"VERSION={version}\n", "VERSION=9.9.9\n")
    assert "README.md: VERSION=9.9.9, not " + version in versions.check(root, None)


def test_a_rockspec_of_another_version_is_refused(root: Path) -> None:
    (rockspec,) = versions.source_rockspecs(root)
    rockspec.rename(rockspec.with_name("agentbreaker-9.9.9-1.rockspec"))
    assert any("rockspecs" in problem for problem in versions.check(root, None))


def test_a_release_needs_its_tag_and_a_dated_changelog_entry(root: Path) -> None:
    version = versions.workspace_version(root)
    problems = versions.check(root, f"v{version}")
    assert problems == [f"CHANGELOG.md has no entry `## [{version}] - YYYY-MM-DD`"]
    replace(root / "CHANGELOG.md", "## [Unreleased]\n",
            f"## [Unreleased]\n\n## [{version}] - 2026-11-26\n")
    assert versions.check(root, f"v{version}") == []
    assert versions.check(root, "v9.9.9") == [f"the tag v9.9.9 is not v{version}"]


def test_write_carries_a_new_workspace_version_everywhere(root: Path) -> None:
    old = versions.workspace_version(root)
    replace(root / "Cargo.toml", f'version = "{old}"', 'version = "0.2.0"')
    assert versions.check(root, None) != []
    changed = versions.write(root)
    assert versions.check(root, None) == []
    assert (root / "lua/agentbreaker-0.2.0-1.rockspec").is_file()
    assert "lua/agentbreaker-0.2.0-1.rockspec" in (root / "mk/lua.mk").read_text(encoding="utf-8")
    assert "node/index.js" in changed and "Cargo.lock" in changed and "README.md" in changed
    assert "VERSION=0.2.0\n" in (root / "README.md").read_text(encoding="utf-8")
    assert versions.write(root) == []


def test_the_command_prints_the_version() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tools/dist/versions.py")],
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == versions.workspace_version(ROOT)
