"""`report.md`: the evaluation's numbers as Markdown, short enough for a pull request."""

from __future__ import annotations

from collections.abc import Sequence

from ssebench.runner._report import CHECK_NAMES, OUTCOMES, EvalReport
from ssebench.runner._report_html import number, rate_text


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines.extend("| " + " | ".join(_escape(cell) for cell in row) + " |" for row in rows)
    return lines


def render_markdown(report: EvalReport) -> str:
    """The report as Markdown: pass rates, outcomes, checks, time, and the task grid."""
    settings = report.settings
    groups = report.groups
    lines = [
        f"## SSEBench evaluation `{report.eval_id}`",
        "",
        f"{len(settings.tasks)} tasks x {len(settings.agents)} agents x "
        f"{len(settings.models)} models x {settings.repeat} repeats; mode {settings.mode}, "
        f"difficulty {settings.difficulty}, backend {settings.backend}.",
        "",
        "Pass rate = passed / (passed + failed + agent_timeout + budget_exceeded), "
        "with a 95% Wilson interval.",
        "",
    ]
    present = [name for name in OUTCOMES if any(group.outcomes[name] for group in groups)]
    lines += _table(
        ["agent / model", "pass rate", *present],
        [
            [
                f"{group.agent} / {group.model}",
                rate_text(group.pass_rate),
                *(str(group.outcomes[name]) for name in present),
            ]
            for group in groups
        ],
    )
    lines += ["", "### Checks", ""]
    lines += _table(
        ["agent / model", *CHECK_NAMES],
        [
            [f"{group.agent} / {group.model}", *(rate_text(group.checks[n]) for n in CHECK_NAMES)]
            for group in groups
        ],
    )
    lines += ["", "### Time, spend and tokens", ""]
    lines += _table(
        ["agent / model", "agent s (mean)", "agent s (max)", "spend (total)", "tokens (total)"],
        [
            [
                f"{group.agent} / {group.model}",
                number(group.agent_seconds.mean),
                number(group.agent_seconds.max),
                number(group.spend.total, 4) if group.spend.count else "-",
                number(group.tokens.total, 0) if group.tokens.count else "-",
            ]
            for group in groups
        ],
    )
    lines += ["", "### Tasks (passed / counted)", ""]
    columns = [(group.agent, group.model) for group in groups]
    cells = {(cell.task, cell.agent, cell.model): cell for cell in report.grid}
    rows = []
    for task in settings.tasks:
        row = [task]
        for agent, model in columns:
            cell = cells.get((task, agent, model))
            row.append("-" if cell is None else f"{cell.passed}/{cell.counted}")
        rows.append(row)
    lines += _table(["task", *(f"{agent} / {model}" for agent, model in columns)], rows)
    return "\n".join(lines) + "\n"
