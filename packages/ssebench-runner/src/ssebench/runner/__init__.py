"""The `ssebench` command and the runner.

`Runner` carries out a `RunPlan` on any `Backend` and records it; `plan_run`
makes the plan from `ssebench run`'s options without side effects.
"""

from ssebench.runner._lifecycle import Runner
from ssebench.runner._options import new_run_id, validate_run_id
from ssebench.runner._plan import RunOptions, RunPlan, container_env, plan_run, run_spec
from ssebench.runner._record import RunEnding, read_result, record_run
from ssebench.runner._run_dir import create_run_dir, point_latest, run_dir_path
from ssebench.runner._signals import SecondSignal, StopOnSignal

__all__ = [
    "RunEnding",
    "RunOptions",
    "RunPlan",
    "Runner",
    "SecondSignal",
    "StopOnSignal",
    "container_env",
    "create_run_dir",
    "new_run_id",
    "plan_run",
    "point_latest",
    "read_result",
    "record_run",
    "run_dir_path",
    "run_spec",
    "validate_run_id",
]
