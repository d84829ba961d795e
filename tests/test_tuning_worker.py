"""The crash-isolated worker, with workers that really die."""

import pytest

from tunefuse.tuning.worker import Worker, WorkerDied


def test_requests_are_answered_and_state_persists():
    with Worker("worker_handlers.echo", setup={"device": 0}) as w:
        assert w.request("a") == {"echo": "a", "calls": 1, "setup": {"device": 0}}
        assert w.request("b")["calls"] == 2


@pytest.mark.parametrize(
    "how, reason", [("exit", "exit code 3"), ("segfault", "exit code -11"), ("hang", "hung")]
)
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


def test_the_timers_spin_outlasts_the_hosts_call_and_compiles():
    """The GPU spins before each timed call for three times the host's slowest warm-up call
    (at least 100 µs, at most 20 ms), so that host work never lands between the events."""
    from tunefuse.compiler import compile_kernel
    from tunefuse.tuning.timing import MAX_SPIN_US, MIN_SPIN_US, SPIN_SOURCE, spin_us

    assert spin_us([]) == MIN_SPIN_US and spin_us([10.0, 20.0]) == MIN_SPIN_US
    assert spin_us([50.0, 400.0, 90.0]) == 1200.0
    assert spin_us([1e6]) == MAX_SPIN_US
    for arch in ("sm_80", "sm_90"):
        assert compile_kernel(SPIN_SOURCE, "tf_spin", arch).cubin
