"""The `ssebench` command and the runner.

`Runner` carries out a `RunPlan` on any `Backend` and records it; `plan_run`
makes the plan from `ssebench run`'s options without side effects.
Evaluations (`ssebench eval`): `plan_evaluation` (or `resume_plan`) checks
and finds the evaluation, `what_to_run` decides what runs and what stands,
`Evaluator` runs it N at a time through one Runner, `build_report` counts it.
"""

from ssebench.runner._eval_plan import (
    EvalOptions,
    EvalPlan,
    Pending,
    Skipped,
    check_model,
    plan_evaluation,
    resume_plan,
    what_to_run,
)
from ssebench.runner._evaluate import EvalResult, Evaluator, Finished, Progress
from ssebench.runner._lifecycle import RunCancelled, Runner
from ssebench.runner._options import new_run_id, validate_run_id
from ssebench.runner._plan import (
    RunOptions,
    RunPlan,
    container_env,
    plan_of,
    plan_run,
    run_spec,
)
from ssebench.runner._provenance import folder_digest, provenance_of, run_inputs
from ssebench.runner._record import RunEnding, read_result, record_run
from ssebench.runner._report import EvalReport, build_report, report_of, wilson
from ssebench.runner._run_dir import create_run_dir, point_latest, run_dir_path
from ssebench.runner._signals import SecondSignal, StopOnSignal

__all__ = [
    "EvalOptions",
    "EvalPlan",
    "EvalReport",
    "EvalResult",
    "Evaluator",
    "Finished",
    "Pending",
    "Progress",
    "RunCancelled",
    "RunEnding",
    "RunOptions",
    "RunPlan",
    "Runner",
    "SecondSignal",
    "Skipped",
    "StopOnSignal",
    "build_report",
    "check_model",
    "container_env",
    "create_run_dir",
    "folder_digest",
    "new_run_id",
    "plan_evaluation",
    "plan_of",
    "plan_run",
    "point_latest",
    "provenance_of",
    "read_result",
    "record_run",
    "report_of",
    "resume_plan",
    "run_dir_path",
    "run_inputs",
    "run_spec",
    "validate_run_id",
    "what_to_run",
    "wilson",
]
