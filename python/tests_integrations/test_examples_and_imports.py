"""The examples run offline and print what they promise; `import agentbreaker` imports no
framework; an adapter whose framework is missing names the extra to install."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
README = Path(__file__).resolve().parents[2] / "README.md"
FRAMEWORKS = ["langchain", "langchain_core", "langgraph", "agents", "openai", "pydantic_ai", "claude_agent_sdk"]
ADAPTERS = {
    "langchain": ("langchain", "langchain"),
    "openai_agents": ("agents", "openai-agents"),
    "pydantic_ai": ("pydantic_ai", "pydantic-ai"),
    "claude_agent_sdk": ("claude_agent_sdk", "claude-agent-sdk"),
    "otel": ("opentelemetry", "otel"),
}


@pytest.mark.parametrize(
    "name,lines",
    [
        ("langchain", ["the model read: [agentbreaker] You have run `run_tests pytest -q` 3 times", "verdict: repeated_step at step 5", "last message: [agentbreaker] Run halted (repeated_step): the same step 5 times"]),
        ("openai_agents", ["halted: repeated_step at step 5", "why: the same step 5 times in a row", "the model read: [agentbreaker] You have run", "model calls: 5"]),
        ("pydantic_ai", ["cancelled: repeated_step at step 5", "why: the same step 5 times in a row", "the model read: [agentbreaker] You have run"]),
        ("claude_agent_sdk", ["session ended: [agentbreaker] Run halted (repeated_step)", "cost: 0.0625 USD after 5 turns", "Claude read: [agentbreaker] You have run `pytest -q` 3 times"]),
    ],
)
def test_example_runs(capsys: pytest.CaptureFixture[str], name: str, lines: list[str]) -> None:
    runpy.run_path(str(EXAMPLES / f"integrations_{name}.py"), run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(lines), out
    for line, start in zip(out, lines):
        assert line.startswith(start), (line, start)


def test_readme_shows_the_langchain_two_liner() -> None:
    example = (EXAMPLES / "integrations_langchain.py").read_text()
    readme = README.read_text()
    for line in (
        "from agentbreaker.integrations.langchain import AgentBreakerMiddleware",
        "agent = create_agent(model, tools, middleware=[AgentBreakerMiddleware()])",
    ):
        assert line in example and line in readme
    assert "docs/integrations.md" in readme


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120)


def test_import_agentbreaker_imports_no_framework() -> None:
    done = python(
        "import sys, agentbreaker, agentbreaker.integrations, agentbreaker.integrations._common\n"
        f"print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_a_missing_framework_names_the_extra(adapter: str) -> None:
    module, extra = ADAPTERS[adapter]
    # The framework made unimportable, as if it were not installed.
    done = python(
        "import sys\n"
        f"sys.modules[{module!r}] = None\n"
        "try:\n"
        f"    import agentbreaker.integrations.{adapter}\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    assert done.returncode == 0, done.stderr
    assert f"agentbreaker.integrations.{adapter} needs " in done.stdout
    assert f"pip install 'agentbreaker[{extra}]'" in done.stdout


def test_extras_match_the_pinned_environments() -> None:
    """The extras' ranges hold the versions tested: the newest pins and the oldest ones, which are
    the ranges' lower ends; the installed wheel declares the extras."""
    import importlib.metadata
    import tomllib

    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[1]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert sorted(extras) == sorted(extra for _, extra in ADAPTERS.values())

    def pins(name: str) -> dict[str, str]:
        lines = (root / name).read_text().splitlines()
        found = dict(line.split("==") for line in lines if line and not line.startswith("#"))
        return {key.lower().replace("_", "-"): value for key, value in found.items()}

    newest, oldest = pins("requirements-integrations.txt"), pins("requirements-integrations-oldest.txt")
    for requirements in extras.values():
        for text in requirements:
            requirement = Requirement(text)
            assert newest[requirement.name] in requirement.specifier, (text, newest[requirement.name])
            assert oldest[requirement.name] in requirement.specifier, (text, oldest[requirement.name])
            lowest = next(s.version for s in requirement.specifier if s.operator == ">=")
            assert oldest[requirement.name].startswith(lowest), (text, oldest[requirement.name])
    declared = importlib.metadata.metadata("agentbreaker").get_all("Provides-Extra") or []
    assert sorted(declared) == sorted(extras)
