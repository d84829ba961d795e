"""GPU: the fuzzed corpus against the reference through the executor (default params and a
random valid point of every kernel's space), and the fusions of more than 2**31 elements.
The same runner, under compute-sanitizer, is the memory-safety gate (tests/fuzz_corpus.py)."""

import pytest
from fuzz_corpus import run_corpus, run_large

pytestmark = pytest.mark.gpu


def test_fuzzed_corpus_agrees_with_the_reference():
    summary = run_corpus(seed=11, count=120)
    assert summary["errors"] == 0 and summary["mismatches"] == 0, summary
    assert summary["runs"] == 2 * summary["fusions"]


def test_fusions_of_more_than_2_31_elements():
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_properties(0).total_memory < 24 * 2**30:
        pytest.skip("needs 24 GiB of GPU memory")
    summary = run_large()
    assert summary == {"large_fusions": 2, "large_mismatches": 0}
