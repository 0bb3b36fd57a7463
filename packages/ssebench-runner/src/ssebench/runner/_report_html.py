"""`report.html`: one self-contained page, its plots drawn by matplotlib as inline SVG.

Nothing on the page is fetched: no script, no style sheet, no font, no image
by URL. Text in the plots is drawn as paths (matplotlib's default
`svg.fonttype`), and the SVG's XML prologue and metadata (which name W3C and
Dublin Core URLs as identifiers) are left out, so the file holds no URL at all
except links to the run directories, relative to the file.
"""

from __future__ import annotations

import html
import io
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ssebench.runner._report import CHECK_NAMES, OUTCOMES, EvalReport, GroupReport, Rate

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLOURS: Final = {
    "passed": "#2e7d32",
    "failed": "#c62828",
    "agent_timeout": "#ef6c00",
    "budget_exceeded": "#ad1457",
    "grader_error": "#6a1b9a",
    "infra_error": "#757575",
    "stopped": "#455a64",
    "touched": "#8e24aa",
    "not run": "#d0d0d0",
}
"""The colour of each outcome, in the grid and the legend."""

_STYLE: Final = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 80em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; }
th { background: #f3f3f3; } td.num { text-align: right; }
.cell { display: inline-block; width: 1.1em; height: 1.1em; margin-right: 2px;
        vertical-align: middle; border-radius: 2px; }
.legend span { margin-right: 1em; white-space: nowrap; }
.settings td { border: none; padding: 0.1em 1em 0.1em 0; }
svg { max-width: 100%; height: auto; }
"""


def percent(value: float | None) -> str:
    """`73.5%`, or `-` for no value."""
    return "-" if value is None else f"{100 * value:.1f}%"


def rate_text(rate: Rate) -> str:
    """`50.0% (2/4, 95% CI 15.0%-85.0%)`, or `- (0 counted)`."""
    if rate.rate is None or rate.interval is None:
        return "- (0 counted)"
    low, high = percent(rate.interval.low), percent(rate.interval.high)
    return f"{percent(rate.rate)} ({rate.passed}/{rate.counted}, 95% CI {low}-{high})"


def number(value: float | None, digits: int = 1) -> str:
    """A number with `digits` decimals, or `-`."""
    return "-" if value is None else f"{value:.{digits}f}"


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    # No metadata: matplotlib would name the Dublin Core and Creative Commons URLs.
    figure.savefig(
        buffer,
        format="svg",
        bbox_inches="tight",
        metadata={"Creator": None, "Date": None, "Format": None, "Type": None},
    )
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    # Inline SVG in HTML needs no namespace declarations; they are URLs by form.
    return re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)


def _labels(groups: Sequence[GroupReport]) -> list[str]:
    return [f"{group.agent} / {group.model}" for group in groups]


def pass_rate_plot(groups: Sequence[GroupReport]) -> str:
    """Horizontal bars of each group's pass rate with its 95% interval, as SVG."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 0.6 + 0.45 * len(groups)))
    axes = figure.subplots()
    rates = [100 * (group.pass_rate.rate or 0.0) for group in groups]
    lows, highs = [], []
    for group, value in zip(groups, rates, strict=True):
        interval = group.pass_rate.interval
        lows.append(0.0 if interval is None else value - 100 * interval.low)
        highs.append(0.0 if interval is None else 100 * interval.high - value)
    positions = range(len(groups))
    axes.barh(positions, rates, xerr=[lows, highs], color="#1565c0", capsize=4)
    axes.set_yticks(list(positions), _labels(groups))
    axes.invert_yaxis()
    axes.set_xlim(0, 100)
    axes.set_xlabel("pass rate, % (bars: 95% Wilson interval)")
    return _svg(figure)


def checks_plot(groups: Sequence[GroupReport]) -> str:
    """Grouped bars: each check's pass rate per group, as SVG."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 0.8 + 0.25 * len(groups) * len(CHECK_NAMES)))
    axes = figure.subplots()
    height = 0.8 / max(1, len(groups))
    for number_, group in enumerate(groups):
        values = [100 * (group.checks[name].rate or 0.0) for name in CHECK_NAMES]
        positions = [index + number_ * height for index in range(len(CHECK_NAMES))]
        axes.barh(positions, values, height=height, label=_labels([group])[0])
    axes.set_yticks(
        [index + 0.4 - height / 2 for index in range(len(CHECK_NAMES))], list(CHECK_NAMES)
    )
    axes.invert_yaxis()
    axes.set_xlim(0, 100)
    axes.set_xlabel("runs in which the check ran and passed, %")
    axes.legend(loc="lower right", fontsize="small")
    return _svg(figure)


def durations_plot(report: EvalReport) -> str:
    """Box plots of the agent's seconds per group, as SVG."""
    from matplotlib.figure import Figure

    groups = report.groups
    seconds: dict[tuple[str, str], list[float]] = {
        (group.agent, group.model): [] for group in groups
    }
    for row in report.runs:
        if row.agent_seconds is not None:
            seconds.setdefault((row.agent, row.model), []).append(row.agent_seconds)
    figure = Figure(figsize=(7, 0.6 + 0.45 * len(groups)))
    axes = figure.subplots()
    axes.boxplot(
        [seconds[group.agent, group.model] or [0.0] for group in groups], orientation="horizontal"
    )
    axes.set_yticks(range(1, len(groups) + 1), _labels(groups))
    axes.invert_yaxis()
    axes.set_xlabel("agent's time per run, s")
    return _svg(figure)


def _e(value: object) -> str:
    return html.escape(str(value))


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int = 1) -> str:
    out = ["<table><tr>", *(f"<th>{_e(cell)}</th>" for cell in head), "</tr>"]
    for row in rows:
        out.append("<tr>")
        for index, cell in enumerate(row):
            kind = ' class="num"' if index >= numeric_from else ""
            out.append(f"<td{kind}>{cell}</td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _cell(outcome: str, title: str) -> str:
    colour = COLOURS.get(outcome, COLOURS["not run"])
    return (
        f'<span class="cell" style="background:{colour}" title="{_e(title)}: {_e(outcome)}"></span>'
    )


def _grid(report: EvalReport) -> str:
    columns = [(group.agent, group.model) for group in report.groups]
    by_cell = {(cell.task, cell.agent, cell.model): cell for cell in report.grid}
    rows = []
    for task in report.settings.tasks:
        row = [_e(task)]
        for agent, model in columns:
            cell = by_cell.get((task, agent, model))
            if cell is None:
                row.append("")
                continue
            marks = "".join(
                _cell(outcome, f"{task} {agent} {model} #{repeat}")
                for repeat, outcome in enumerate(cell.outcomes, start=1)
            )
            row.append(f"{marks} {cell.passed}/{cell.counted}")
        rows.append(row)
    head = ["task", *(f"{agent} / {model}" for agent, model in columns)]
    legend = "".join(
        f"<span>{_cell(outcome, outcome)} {_e(outcome)}</span>" for outcome in OUTCOMES
    )
    return f'<p class="legend">{legend}</p>' + _table(head, rows, numeric_from=len(head))


def _link(run_dir: str | None, folder: Path, text: str) -> str:
    if run_dir is None:
        return _e(text)
    target = os.path.relpath(run_dir, folder)
    return f'<a href="{_e(target)}/">{_e(text)}</a>'


def render_html(report: EvalReport, folder: Path) -> str:
    """The whole page.

    Args:
        report: the evaluation's numbers.
        folder: where the page will be written; links to run directories are relative to it.

    Returns:
        The HTML document.
    """
    settings = report.settings
    groups = report.groups
    summary_rows = [
        [
            _e(f"{group.agent} / {group.model}"),
            _e(rate_text(group.pass_rate)),
            str(group.runs),
            *(str(group.outcomes[name]) for name in OUTCOMES),
        ]
        for group in groups
    ]
    check_rows = [
        [
            _e(f"{group.agent} / {group.model}"),
            *(_e(rate_text(group.checks[name])) for name in CHECK_NAMES),
        ]
        for group in groups
    ]
    cost_rows = [
        [
            _e(f"{group.agent} / {group.model}"),
            number(group.agent_seconds.mean),
            number(group.agent_seconds.median),
            number(group.agent_seconds.max),
            number(group.spend.total, 4) if group.spend.count else "-",
            number(group.spend.mean, 4) if group.spend.count else "-",
            number(group.tokens.total, 0) if group.tokens.count else "-",
            number(group.tokens.mean, 0) if group.tokens.count else "-",
        ]
        for group in groups
    ]
    run_rows = [
        [
            _e(row.task),
            _e(f"{row.agent} / {row.model}"),
            str(row.repeat),
            _cell(row.outcome, row.outcome) + " " + _e(row.outcome),
            str(row.attempts),
            number(row.agent_seconds),
            _link(row.run_dir, folder, row.run_id or "-"),
        ]
        for row in report.runs
    ]
    setting_rows = "".join(
        f"<tr><td>{_e(name)}</td><td>{_e(value)}</td></tr>"
        for name, value in (
            ("dataset", settings.dataset),
            ("tasks", ", ".join(settings.tasks)),
            ("agents", ", ".join(settings.agents)),
            ("models", ", ".join(settings.models)),
            ("mode", settings.mode),
            ("difficulty", settings.difficulty),
            ("repeats", settings.repeat),
            ("backend", settings.backend),
        )
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>SSEBench evaluation {_e(report.eval_id)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>SSEBench evaluation {_e(report.eval_id)}</h1>",
        f'<table class="settings">{setting_rows}</table>',
        "<h2>Pass rate per agent and model</h2>",
        "<p>Pass rate = passed / (passed + failed + agent_timeout + budget_exceeded); "
        "infra_error, grader_error, stopped and touched runs are not counted. "
        "Intervals: Wilson score, 95%.</p>",
        _table(["agent / model", "pass rate", "runs", *OUTCOMES], summary_rows),
        pass_rate_plot(groups) if groups else "",
        "<h2>Tasks</h2>",
        _grid(report),
        "<h2>Checks</h2>",
        "<p>Of the counted runs in which the check ran: how many passed it "
        "(poc: every PoC fixed).</p>",
        _table(["agent / model", *CHECK_NAMES], check_rows),
        checks_plot(groups) if groups else "",
        "<h2>Time, spend and tokens</h2>",
        _table(
            [
                "agent / model",
                "agent s (mean)",
                "agent s (median)",
                "agent s (max)",
                "spend (total)",
                "spend (mean)",
                "tokens (total)",
                "tokens (mean)",
            ],
            cost_rows,
        ),
        durations_plot(report) if groups else "",
        "<h2>Runs</h2>",
        _table(
            ["task", "agent / model", "repeat", "outcome", "attempts", "agent s", "run"],
            run_rows,
            numeric_from=2,
        ),
        "</body></html>",
    ]
    return "\n".join(parts)
