"""The crash-isolated worker, with workers that really die."""

import pytest

from tunefuse.tuning.worker import Worker, WorkerDied


def test_requests_are_answered_and_state_persists():
    with Worker("worker_handlers.echo", setup={"device": 0}) as w:
        assert w.request("a") == {"echo": "a", "calls": 1, "setup": {"device": 0}}
        assert w.request("b")["calls"] == 2


@pytest.mark.parametrize("how, reason", [("exit", "exit code 3"), ("segfault", "exit code -11"), ("hang", "hung")])
def test_a_dying_worker_costs_one_request_and_is_replaced(how, reason):
    with Worker("worker_handlers.misbehave", timeout_s=10) as w:
        assert w.request("ok") == "fine"
        died = w.request(how, timeout_s=3 if how == "hang" else None)
        assert isinstance(died, WorkerDied) and reason in died.reason
        assert w.restarts == 1
        assert w.request("ok") == "fine"  # a fresh worker carries on


def test_a_python_error_is_an_answer_not_a_crash():
    with Worker("worker_handlers.misbehave") as w:
        with pytest.raises(RuntimeError, match="ValueError: bad candidate"):
            w.request("raise")
        assert w.request("ok") == "fine" and w.restarts == 0
