"""The wheel, installed into a fresh virtual environment: where it was imported from, its version
and one guarded call (make test-dist-python runs it with the venv's python, outside the
repository). usage: python smoke.py VERSION"""

import sys
from pathlib import Path

import agentbreaker
from agentbreaker import CircuitOpenError, FailureBreaker

version = sys.argv[1]
native = Path(agentbreaker._native.__file__)
assert "site-packages" in native.parts, f"agentbreaker._native was imported from {native}"
assert agentbreaker.__version__ == version, f"__version__ {agentbreaker.__version__}, not {version}"

tools = FailureBreaker(failure_threshold=3, cooldown_ms=30_000)
calls = []


@tools
def search(query: str) -> str:
    calls.append(query)
    raise TimeoutError(f"search backend timed out: {query}")


outcomes = []
for _ in range(4):
    try:
        search("circuit breakers")
    except CircuitOpenError as error:
        outcomes.append(f"refused: {error}")
    except TimeoutError:
        outcomes.append("failed")
assert outcomes[:3] == ["failed"] * 3, outcomes
assert outcomes[3].startswith("refused: Circuit breaker OPEN"), outcomes
assert len(calls) == 3, "the refused call must not run"
print(f"python: agentbreaker {agentbreaker.__version__} from {native.name}; "
      f"guarded call: 3 failures, then {outcomes[3][:40]}...")
