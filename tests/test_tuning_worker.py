"""The crash-isolated worker, with workers that really die."""

import pathlib
import subprocess
import sys

import pytest

from tunefuse.tuning.worker import Worker, WorkerDied, WorkerStartError

ROOT = pathlib.Path(__file__).resolve().parents[1]


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


def test_a_handler_that_cannot_load_is_refused_by_name():
    with Worker("worker_handlers.no_such_handler") as w:
        with pytest.raises(
            WorkerStartError, match="worker_handlers.no_such_handler.*AttributeError"
        ):
            w.request("a")


def test_a_script_that_tunes_at_its_top_level_is_told_why_its_worker_ends(tmp_path):
    """Spawn imports the calling script again in the worker; one that starts a worker at its
    top level (no `if __name__ == "__main__":`) ends the child before it is ready. The error
    says so, not "the default params do not run correctly"."""
    script = tmp_path / "tune_at_top_level.py"
    script.write_text(
        "import sys\n"
        f"sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]\n"
        "from tunefuse.tuning.worker import Worker\n"
        "with Worker('worker_handlers.echo') as w:\n"
        "    print(w.request('a'))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tunefuse.tuning.worker.WorkerStartError: the worker process ended")
    assert 'if __name__ == "__main__":' in last


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
