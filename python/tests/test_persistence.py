"""Snapshots and state files: `snapshot`/`restore`, `save`/`load`, `state_path`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import pytest

import agentbreaker as ab
from agentbreaker.types import Event


def open_breaker(clock: ab.ManualClock, **config: object) -> ab.FailureBreaker:
    breaker = ab.FailureBreaker(clock=clock, **config)  # type: ignore[arg-type]
    for _ in range(5):
        breaker.record_failure("Path not found")
    return breaker


def test_save_and_load_round_trip_with_str_and_pathlib_paths(
    clock: ab.ManualClock, tmp_path: Path
) -> None:
    clock.set(1_000)
    breaker = open_breaker(clock)
    target = tmp_path / "state.json"
    breaker.save(target)
    breaker.save(str(target))  # str works as well as os.PathLike
    written = json.loads(target.read_text())
    assert written["kind"] == "failure" and written["state"] == "OPEN"

    clock.set(2_000)
    restarted = ab.FailureBreaker(clock=clock)
    assert restarted.load(target) is True
    status = restarted.get_status()
    assert (status["state"], status["openedAt"], status["cooldownRemainingMs"]) == ("OPEN", 1_000, 29_000)


def test_load_of_a_missing_file_is_false_and_changes_nothing(
    clock: ab.ManualClock, tmp_path: Path
) -> None:
    breaker = ab.FailureBreaker(clock=clock)
    breaker.record_failure("x")
    assert breaker.load(tmp_path / "missing.json") is False
    assert breaker.get_status()["consecutiveFailures"] == 1


def test_a_corrupt_file_is_an_invalid_snapshot(clock: ab.ManualClock, tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("{not json")
    breaker = ab.FailureBreaker(clock=clock)
    with pytest.raises(ab.InvalidSnapshotError) as e:
        breaker.load(target)
    assert e.value.code == "INVALID_SNAPSHOT"
    assert isinstance(e.value, ValueError)
    with pytest.raises(ab.InvalidSnapshotError):
        ab.FailureBreaker(state_path=target, clock=clock)


def test_saving_into_a_missing_directory_is_a_persistence_error(
    clock: ab.ManualClock, tmp_path: Path
) -> None:
    breaker = ab.FailureBreaker(clock=clock)
    with pytest.raises(ab.PersistenceError) as e:
        breaker.save(tmp_path / "no-such-dir" / "state.json")
    assert e.value.code == "IO"
    assert isinstance(e.value, OSError)


def test_state_path_saves_on_every_transition_and_loads_at_construction(
    clock: ab.ManualClock, tmp_path: Path
) -> None:
    target = tmp_path / "breaker.json"
    breaker = open_breaker(clock, state_path=target, failure_threshold=5)
    assert json.loads(target.read_text())["state"] == "OPEN"
    assert breaker.config["statePath"] == str(target)

    clock.advance(10_000)
    after_restart = ab.FailureBreaker(state_path=str(target), clock=clock)
    assert after_restart.state == "OPEN"
    allowed, message = after_restart.should_allow_operation()
    assert not allowed
    assert message is not None and message.startswith("Circuit breaker OPEN. 20 seconds remaining")


def test_a_failed_save_is_a_warning_event_not_an_error(
    clock: ab.ManualClock, tmp_path: Path
) -> None:
    target = tmp_path / "gone" / "breaker.json"
    breaker = ab.FailureBreaker(state_path=target, failure_threshold=1, clock=clock)
    received: List[Event] = []
    breaker.add_listener(received.append)
    breaker.record_failure("x")
    assert breaker.state == "OPEN"
    assert [e["type"] for e in received] == ["stateChange", "warning"]
    assert received[1]["message"].startswith(f"Could not save state to {target}")  # type: ignore[typeddict-item]


def test_snapshot_and_restore_with_dicts(clock: ab.ManualClock) -> None:
    breaker = open_breaker(clock)
    snapshot = breaker.snapshot()
    assert list(snapshot) == sorted([
        "version", "kind", "state", "consecutiveFailures", "openedAt", "backoffLevel", "trips",
        "failureHistory",
    ])
    other = ab.FailureBreaker(clock=clock)
    other.restore(snapshot)
    assert other.get_status() == breaker.get_status()
    # A JSON round trip is the same snapshot.
    other.restore(json.loads(json.dumps(snapshot)))
    with pytest.raises(ab.InvalidSnapshotError):
        other.restore({**snapshot, "version": 2})
    with pytest.raises(ab.InvalidSnapshotError):
        other.restore("not a snapshot")  # type: ignore[arg-type]
    assert other.get_status() == breaker.get_status()  # a failed restore changes nothing


def test_stagnation_snapshot_round_trip(clock: ab.ManualClock) -> None:
    breaker = ab.StagnationBreaker(clock=clock)
    breaker.record_progress(files_changed=1, tests_passing=3, output_length=900)
    breaker.record_error("Disk full")
    copy = ab.StagnationBreaker(clock=clock)
    copy.restore(breaker.snapshot())
    assert copy.snapshot() == breaker.snapshot()
