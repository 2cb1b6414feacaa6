"""The store keywords from Python (contract §12, docs/distributed.md) against a real redis-server.

``FailureBreaker(store=..., key=...)`` and ``Monitor(store=..., key=...)``: the keywords reach the
core's config, breakers and monitors on one key share one state, every call that may wait for the
store releases the GIL, and the password never shows. Each test starts its own redis-server
(Debian's package) on a free loopback port with a temporary directory, and stops it at its end.

Run by ``make test-redis`` (``AGENTBREAKER_REDIS_TESTS=1``); skipped elsewhere.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from typing import Any, Callable, Iterator, List, Optional, Union

import pytest

import agentbreaker as ab

pytestmark = pytest.mark.skipif(
    not os.environ.get("AGENTBREAKER_REDIS_TESTS"),
    reason="needs redis-server: run by make test-redis",
)


class RedisServer:
    """A throw-away redis-server: no persistence, killed, paused or restarted on demand."""

    def __init__(self, *args: str) -> None:
        self.args = list(args)
        self.dir = tempfile.mkdtemp(prefix="agentbreaker-py-redis.")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--save", "", "--appendonly", "no", "--loglevel", "warning", *self.args],
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            out = self.cli("PING")
            if "PONG" in out or "NOAUTH" in out:
                return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on {self.port}")

    def cli(self, *args: str) -> str:
        cmd = ["redis-cli", "-p", str(self.port)]
        if "--requirepass" in self.args:
            cmd += ["--no-auth-warning", "-a", self.args[self.args.index("--requirepass") + 1]]
        done = subprocess.run(cmd + list(args), capture_output=True, text=True)
        return done.stdout + done.stderr

    def url(self, password: str = "") -> str:
        auth = f":{password}@" if password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    try:
        yield s
    finally:
        s.close()


def linked(o: Union[ab.FailureBreaker, ab.Monitor]) -> bool:
    """Whether the object's link to the store is up."""
    status = o.store_status()
    return status is not None and status["mode"] == "shared"


def eventually(check: Callable[[], bool], limit: float = 10.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()


def test_failure_breakers_share_one_circuit(server: RedisServer, clock: ab.ManualClock) -> None:
    a = ab.FailureBreaker(store=server.url(), key="tool:search", failure_threshold=3, clock=clock)
    b = ab.FailureBreaker(
        {"store": server.url(), "key": "tool:search", "failureThreshold": 3}, clock=clock
    )
    assert a.config["store"] == server.url()
    assert a.config["key"] == "tool:search"
    assert a.config["storeTimeoutMs"] == 50
    assert a.config["storeFailure"] == "open"
    events: List[Any] = []
    a.add_listener(events.append)
    a.record_failure("boom")
    b.record_failure("boom")
    a.record_failure("boom")
    assert a.state == "OPEN"
    assert eventually(lambda: b.state == "OPEN")
    assert b.should_allow_operation()[0] is False
    assert [e["type"] for e in events] == ["stateChange"]
    status = b.store_status()
    assert status is not None
    assert status["mode"] == "shared"
    assert status["key"] == "tool:search"
    assert status["url"] == f"redis://127.0.0.1:{server.port}/0"
    assert ab.FailureBreaker().store_status() is None
    assert "tool:search:failure" in server.cli("KEYS", "*")


def test_guarded_calls_through_a_shared_breaker(server: RedisServer) -> None:
    breaker = ab.FailureBreaker(store=server.url(), key="guarded", failure_threshold=2)

    @breaker
    def ok() -> int:
        return 42

    @breaker
    def bad() -> None:
        raise ValueError("down")

    for _ in range(100):
        assert ok() == 42
    with pytest.raises(ValueError):
        bad()
    assert ok() == 42  # the success clears the shared count: one round trip
    for _ in range(2):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(ab.CircuitOpenError):
        ok()
    assert server.cli("HGET", "guarded:failure", "state").strip() == "OPEN"


def test_monitors_share_one_budget(server: RedisServer, clock: ab.ManualClock) -> None:
    def monitor() -> ab.Monitor:
        return ab.Monitor(
            store=server.url(),
            key="tenant-7",
            profile="seed",
            budget={"maxToolCallsPerTask": 3},
            clock=clock,
        )

    a, b = monitor(), monitor()
    assert a.config["store"] == server.url()
    assert "store" not in a.config["failure"]
    use = {"type": "tool_use", "name": "search", "taskId": "t1"}
    assert a.observe(use)["action"] != "halt"
    assert b.observe(use)["action"] != "halt"
    assert a.observe(use)["action"] != "halt"
    verdict = b.observe(use)
    assert verdict["action"] == "halt"
    assert verdict["reason"] == "tool_call_limit"
    assert verdict["message"] == "tool calls: 4 of 3"
    status = a.status()
    assert status["store"]["mode"] == "shared"
    assert status["tasks"][0]["toolCalls"] == 3
    assert server.cli("HGET", "tenant-7:task:t1", "toolCalls").strip() == "4"
    assert ab.Monitor().store_status() is None
    assert "store" not in ab.Monitor().status()


def test_store_keys_inside_a_monitors_failure_section_are_refused() -> None:
    with pytest.raises(ab.InvalidConfigError, match="top level"):
        ab.Monitor(failure={"store": "redis://127.0.0.1:1/0", "key": "k"})
    with pytest.raises(ab.InvalidConfigError):
        ab.Monitor(store="redis://127.0.0.1:1/0")  # no key
    with pytest.raises(ab.InvalidConfigError):
        ab.FailureBreaker(key="k")  # no store
    with pytest.raises(ab.InvalidConfigError):
        ab.Monitor(store="redis://127.0.0.1:1/0", key="k", store_failure="maybe")  # type: ignore[arg-type]


def _runs_beside(call: Callable[[], Any]) -> tuple[float, int]:
    """Runs ``call`` while a Python thread ticks; returns how long the call took and how many
    ticks the thread made in the middle of it (none if the call held the GIL)."""
    ticks: List[float] = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.002)

    t = threading.Thread(target=tick)
    t.start()
    time.sleep(0.05)
    start = time.monotonic()
    call()
    end = time.monotonic()
    stop.set()
    t.join()
    middle = [x for x in ticks if start + 0.1 < x < end - 0.1]
    return end - start, len(middle)


def test_round_trips_release_the_gil(server: RedisServer, clock: ab.ManualClock) -> None:
    timeout = 600
    breaker = ab.FailureBreaker(
        store=server.url(), key="gil", store_timeout_ms=timeout, cooldown_ms=0, clock=clock
    )
    monitor = ab.Monitor(store=server.url(), key="gil", store_timeout_ms=timeout, clock=clock)
    # Construction waits for the first connection at most the timeout; on a loaded machine the
    # link can come up later, and a call before it falls back at once instead of waiting.
    assert eventually(lambda: linked(breaker) and linked(monitor))
    breaker.record_failure("x")  # a failure pending: the next success is a round trip
    monitor.observe({"type": "alive"})
    server.pause()
    try:
        waits = {
            "a success that clears a failure": lambda: breaker.call(lambda: None),
            "a Monitor's tool_use": lambda: monitor.observe({"type": "tool_use", "name": "x"}),
            "constructing a Monitor": lambda: ab.Monitor(
                store=server.url(), key="gil2", store_timeout_ms=timeout
            ),
        }
        for what, call in waits.items():
            took, ticks = _runs_beside(call)
            assert took > 0.3, f"{what} did not wait for the paused store ({took:.3f} s)"
            assert ticks > 10, f"{what} held the GIL for {took:.3f} s ({ticks} ticks beside it)"
    finally:
        server.resume()


def test_the_password_never_appears() -> None:
    secret = "Pa55-n0t-sh0wn"
    server = RedisServer("--requirepass", secret)
    try:
        with pytest.raises(ab.PersistenceError) as wrong:
            ab.FailureBreaker(store=server.url("wrong-Pa55word"), key="k")
        assert wrong.value.code == "IO"
        assert "wrong-Pa55word" not in str(wrong.value)
        with pytest.raises(ab.PersistenceError) as wrong:
            ab.Monitor(store=server.url("wrong-Pa55word"), key="k")
        assert "wrong-Pa55word" not in str(wrong.value)
        with pytest.raises(ab.InvalidConfigError) as bad:
            ab.Monitor(store=f"redis://:{secret}@127.0.0.1:0/0", key="k")
        assert secret not in str(bad.value)

        events: List[Any] = []
        breaker = ab.FailureBreaker(store=server.url(secret), key="pw", store_timeout_ms=50)
        monitor = ab.Monitor(store=server.url(secret), key="pw", store_timeout_ms=50,
                             store_failure="closed")
        breaker.add_listener(events.append)
        monitor.add_listener(events.append)
        shown: List[str] = [repr(breaker), repr(monitor), str(breaker.store_status())]
        shown += [str(breaker.config), str(monitor.config)]
        stores = [monitor.config["store"], breaker.config["store"]]
        assert all(store is not None and ":***@" in store for store in stores), stores
        server.kill()
        for _ in range(3):
            breaker.record_failure("x")
            shown.append(str(monitor.observe({"type": "tool_use", "name": "x"})))
        shown += [str(breaker.store_status()), str(monitor.status()), str(breaker.get_status())]
        server.start()
        assert eventually(lambda: linked(monitor))
        shown.append(str(monitor.observe({"type": "tool_use", "name": "x"})))
        shown += [str(e) for e in events]
        assert any("unreachable" in str(e) for e in events)
        for text in shown:
            assert secret not in text, text
    finally:
        server.close()
