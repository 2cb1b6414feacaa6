"""Guarding an agent loop with agentbreaker: the README's Python example, runnable as is.

A tool that keeps timing out is cut off by a FailureBreaker (refused without being called once
its circuit is open), and the Loop stops the agent when it stops making progress.
"""

from agentbreaker import CircuitOpenError, FailureBreaker, Loop

tools = FailureBreaker(failure_threshold=3, cooldown_ms=30_000)
agent = Loop(max_iterations=50, budget={"maxToolCallsPerTask": 20})


@tools
def search(query: str) -> str:
    raise TimeoutError(f"search backend timed out: {query}")  # a tool that keeps failing


while True:
    try:
        output = search("circuit breakers")
    except (CircuitOpenError, TimeoutError) as error:  # refused once 3 calls have failed
        output = f"Tool unavailable: {error}"
    decision = agent.observe(output, events=[{"type": "tool_use", "name": "search"}])
    if decision["action"] == "exit":
        print(f"stopped at iteration {decision['iteration']}: {decision['reason']}")
        break
print(tools.state, tools.metrics()["totalFailures"])  # OPEN 3
