"""Shared helpers of the observability end-to-end tests (make test-observability).

The binary under test is $AGENTBREAKER_BIN (the target builds it). Every test works in its own
temporary folders: a fake agent (a Python script printing Monitor events), a state folder for the
hook, the metrics file and the report pages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

import pytest
from prometheus_client.parser import text_string_to_metric_families

BIN = os.environ.get("AGENTBREAKER_BIN") or str(
    Path(__file__).resolve().parents[2] / "target" / "debug" / "agentbreaker"
)

# The scripted sessions of issue 22: one warning and one halt (repeated_step), or none.
# repeatThreshold 4 with the default warnBefore 2: the warning at the 2nd identical step, the halt
# at the 4th; every result succeeds, so no failure rule counts.
CONFIG = "[stagnation]\nrepeatThreshold = 4\n"


def stuck_events(n: int = 8) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for i in range(n):
        out += [
            {"type": "assistant", "text": "Let me check the build again."},
            {"type": "tool_use", "name": "Bash", "id": f"t{i}", "input": {"command": "make check"}},
            {"type": "tool_result", "id": f"t{i}", "ok": True, "text": "nothing to be done"},
        ]
    return out


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


def healthy_events(n: int = 6) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for i in range(n):
        w = WORDS[i]
        out += [
            {"type": "assistant", "text": f"Now the {w} module."},
            {"type": "tool_use", "name": "Edit", "id": f"t{i}", "input": {"file": f"{w}.py"}},
            {"type": "progress", "files": [f"{w}.py"]},
            {"type": "tool_result", "id": f"t{i}", "ok": True, "text": f"edited {w}.py"},
            {"type": "usage", "costCents": 1.5},
        ]
    return out


def write_agent(folder: Path, events: Iterable[Dict[str, Any]], delay: float = 0.0) -> List[str]:
    """A fake agent printing `events` (one JSON line each, `delay` seconds apart)."""
    script = folder / "agent.py"
    lines = [json.dumps(e) for e in events]
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            for line in {lines!r}:
                print(line, flush=True)
                time.sleep({delay})
            """
        )
    )
    return [sys.executable, str(script)]


def run(args: List[str], stdin: Optional[str] = None, cwd: Optional[Path] = None,
        env: Optional[Dict[str, str]] = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    full_env.pop("AGENTBREAKER_STATE_DIR", None)
    full_env.update(env or {})
    return subprocess.run(
        [BIN, *args], input=stdin, capture_output=True, text=True, cwd=cwd, env=full_env,
        timeout=timeout,
    )


Samples = Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]


def parse(text: str) -> Tuple[Dict[str, str], Samples]:
    """The file through prometheus_client's own text parser: family name -> type, and every
    sample by (sample name, sorted labels). The parser raises on anything malformed."""
    types: Dict[str, str] = {}
    samples: Samples = {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return types, samples


def total(samples: Samples, name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    p = tmp_path / "agentbreaker.toml"
    p.write_text(CONFIG)
    return p
