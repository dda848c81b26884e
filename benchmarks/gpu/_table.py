"""`results.md`: the suite's records as Markdown, one table per row."""

from __future__ import annotations

import datetime
from typing import Any

from benchmarks.gpu._rows import Row


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ", ".join(_cell(v) for v in value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown(records: list[dict[str, Any]], rows: list[Row], *, part: str, smoke: bool) -> str:
    """The header (device, jax version, date) and, per row of `rows`, what it
    measures, its baseline, its status and a table of its `columns`."""
    env = next((r for r in records if r["row"] == "environment" and "device" in r), {})
    size = "smoke (tiny sizes)" if smoke else "full size"
    lines = [
        f"# GPU suite: part {part}, {size}",
        "",
        f"- device: {env.get('device', 'unknown')} ({env.get('backend', '?')}, "
        f"{env.get('device_count', '?')} device(s))",
        f"- jax {env.get('jax', '?')}, Python {env.get('python', '?')}, "
        f"torch {env.get('torch') or 'missing'}, "
        f"neuraloperator {env.get('neuraloperator') or 'missing'}",
        f"- precision: jax default matmul {env.get('jax_default_matmul_precision', '?')}, "
        f"torch matmul.allow_tf32 {env.get('torch_matmul_allow_tf32', '?')}, "
        f"cudnn.allow_tf32 {env.get('torch_cudnn_allow_tf32', '?')}",
        f"- date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
    ]
    install = next((r for r in records if r["row"] == "install"), None)
    if install is not None:
        failed = ", ".join(install["failed"]) or "none"
        lines.append(
            f"- carried wheels: {len(install['installed'])} installed in "
            f"{install['seconds']:.0f} s, failed: {failed}"
        )
    lines.append("")
    for row in rows:
        mine = [r for r in records if r["row"] == row.name]
        if not mine:
            continue
        status = next((r for r in mine if "status" in r), None)
        measured = [r for r in mine if "status" not in r]
        lines += [f"## {row.name}", "", f"{row.measures}. Baseline: {row.baseline}.", ""]
        if status is not None:
            note = f": {status['note']}" if status["note"] else ""
            lines += [
                f"Status **{status['status']}** after {status['seconds']:.0f} s "
                f"(budget {status['budget_s']:.0f} s){note}",
                "",
            ]
        columns = [c for c in row.columns if any(c in r for r in measured)]
        if measured and columns:
            lines.append("| " + " | ".join(columns) + " |")
            lines.append("|" + " --- |" * len(columns))
            for r in measured:
                lines.append("| " + " | ".join(_cell(r.get(c)) for c in columns) + " |")
            lines.append("")
    return "\n".join(lines)
