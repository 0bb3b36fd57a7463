"""The evaluator: grades the agent's final diff over the daemon's admin socket.

`python -m ssebench.daemon.evaluator` runs prepare_grading, then build (a
failure stops), every PoC, the function tests and the intent tests, and
writes `result.json` (docs/results.md) atomically and `source.tar.gz`.
"""

from ssebench.daemon.evaluator._files import SOURCE_ARCHIVE, write_result
from ssebench.daemon.evaluator._grading import Deadline, Grade, GradingApi, grade
from ssebench.daemon.evaluator._main import EvaluatorOptions, crash_result, evaluate, main

__all__ = [
    "SOURCE_ARCHIVE",
    "Deadline",
    "EvaluatorOptions",
    "Grade",
    "GradingApi",
    "crash_result",
    "evaluate",
    "grade",
    "main",
    "write_result",
]
