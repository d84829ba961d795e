"""Autotuning: the Optuna search, GPU timing, and the crash-isolated worker."""

from tunefuse.tuning.tuner import SegmentReport, TuneReport, tune

__all__ = ["SegmentReport", "TuneReport", "tune"]
