"""The self-contained HTML report ``orgate eval --save`` writes next to its JSON report.

The page inlines uPlot, the console's eval chart script and the chart model
(``charts.eval_model``): the same charts as the console's Eval page, readable offline
from a file, with nothing fetched.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from orgate.evaluation.charts import eval_model
from orgate.evaluation.run import EvalReport


def _static(name: str) -> str:
    return resources.files("orgate.console").joinpath("static", name).read_text(encoding="utf-8")


def _script_safe(text: str) -> str:
    """Text that cannot end the inline element it sits in (``</script>`` in a case name)."""
    return text.replace("</", "<\\/")


def eval_html(reports: list[EvalReport]) -> str:
    model = json.dumps(eval_model(reports)).replace("</", "<\\/")
    title = f"orgate eval — {reports[-1].model}" if reports else "orgate eval"
    if reports and reports[-1].mode is not None:
        title += ": modes side by side"
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{_escape(title)}</title>
<style>{_static("uplot.min.css")}
{_static("console.css")}</style>
</head>
<body>
<main id="report"><h1>{_escape(title)}</h1></main>
<script type="application/json" id="eval-model">{model}</script>
<script>{_script_safe(_static("uplot.min.js"))}</script>
<script>{_script_safe(_static("evalcharts.js"))}</script>
<script>
window.orgateEvalCharts.render(document.getElementById("report"),
  JSON.parse(document.getElementById("eval-model").textContent));
</script>
</body>
</html>
"""


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_eval_html(reports: list[EvalReport], path: Path) -> Path:
    path.write_text(eval_html(reports), encoding="utf-8")
    return path
