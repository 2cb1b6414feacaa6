"""Checks of .github/workflows/release.yml, which cannot run here (make test-dist-meta): it is valid
YAML, its jobs' needs exist, it builds with maturin-action and napi for the platforms it names,
for every napi target of node/package.json, publishes only on a tag, pins every action, and the
shell of every step parses."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    with open(WORKFLOW, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    assert isinstance(data, dict)
    # YAML 1.1 reads the key `on` as True.
    data["on"] = data.pop(True, data.get("on"))
    return data


def steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def uses(job: dict) -> list[str]:
    return [step["uses"] for step in steps(job) if "uses" in step]


def test_it_runs_on_version_tags_and_by_hand(workflow: dict) -> None:
    assert workflow["on"]["push"]["tags"] == ["v*"]
    assert "workflow_dispatch" in workflow["on"]
    assert workflow["permissions"] == {"contents": "read"}


def test_every_need_is_a_job(workflow: dict) -> None:
    jobs = workflow["jobs"]
    for name, job in jobs.items():
        needs = job.get("needs", [])
        for need in [needs] if isinstance(needs, str) else needs:
            assert need in jobs, f"{name} needs {need}"


def test_the_versions_are_checked_against_the_tag(workflow: dict) -> None:
    run = steps(workflow["jobs"]["versions"])[1]["run"]
    assert "tools/dist/versions.py --release" in run


def test_wheels_for_every_platform_with_maturin_action(workflow: dict) -> None:
    job = workflow["jobs"]["python-wheels"]
    assert any(action.startswith("PyO3/maturin-action@") for action in uses(job))
    names = {platform["name"] for platform in job["strategy"]["matrix"]["platform"]}
    assert names == {"linux-x86_64", "linux-aarch64", "macos-x86_64", "macos-arm64", "windows-x64"}
    build = next(step for step in steps(job) if step.get("uses", "").startswith("PyO3/maturin"))
    assert build["with"]["manylinux"] == "2014"
    assert "--profile dist" in build["with"]["args"]
    assert any("smoke.py" in step.get("run", "") for step in steps(job))
    sdist = workflow["jobs"]["python-sdist"]
    assert any(step.get("with", {}).get("command") == "sdist" for step in steps(sdist))


def test_an_addon_for_every_napi_target(workflow: dict) -> None:
    manifest = json.loads((ROOT / "node" / "package.json").read_text(encoding="utf-8"))
    job = workflow["jobs"]["node-addons"]
    targets = [setting["target"] for setting in job["strategy"]["matrix"]["settings"]]
    assert sorted(targets) == sorted(manifest["napi"]["targets"])
    assert any("napi build" in step.get("run", "") for step in steps(job))
    tested = {setting["platform"] for setting in
              workflow["jobs"]["node-test"]["strategy"]["matrix"]["settings"]}
    assert tested | {"linux-x64-gnu"} == {
        path.name for path in (ROOT / "node" / "npm").iterdir() if path.is_dir()}


def test_the_linux_artifacts_come_from_the_make_targets(workflow: dict) -> None:
    runs = " ".join(step.get("run", "") for step in steps(workflow["jobs"]["linux"]))
    assert "make dist-lua dist-c dist-cli" in runs
    assert "make test-dist-lua test-dist-c test-dist-cli" in runs
    assert workflow["jobs"]["linux"]["strategy"]["matrix"]["runner"] == [
        "ubuntu-latest", "ubuntu-24.04-arm"]
    apt = re.search(r"^DIST_APT := (.*)$", (ROOT / "mk" / "dist.mk").read_text(encoding="utf-8"),
                    re.M)
    assert apt and apt[1] in runs, "the workflow installs mk/dist.mk's Debian packages"


def test_publishing_only_on_a_tag_after_every_test(workflow: dict) -> None:
    jobs = workflow["jobs"]
    publishing = [name for name in jobs if name.startswith("publish-") or name == "github-release"]
    assert set(publishing) == {"publish-pypi", "publish-npm", "publish-crates", "publish-luarocks",
                               "github-release"}
    builds = {"python-wheels", "python-sdist", "node-test", "linux", "macos-cli"}
    for name in publishing:
        assert jobs[name]["if"] == "github.ref_type == 'tag'"
        assert builds <= set(jobs[name]["needs"]), name
    for name, job in jobs.items():
        if name not in publishing:
            assert "if" not in job and "environment" not in job, name


def test_every_action_is_pinned(workflow: dict) -> None:
    for name, job in workflow["jobs"].items():
        for action in uses(job):
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[\w./-]+", action), f"{name}: {action}"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_every_run_step_is_valid_shell(workflow: dict) -> None:
    for name, job in workflow["jobs"].items():
        for step in steps(job):
            if "run" not in step:
                continue
            script = re.sub(r"\$\{\{[^}]*\}\}", "EXPRESSION", step["run"])
            result = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
            assert result.returncode == 0, f"{name}: {result.stderr}"
