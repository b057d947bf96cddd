"""The replay gate: which logged items may be replayed to another model.

* ``check(item, tools)`` → ``Verdict`` (one ``Code``; schema errors with JSON paths);
* ``check_pairing(items, tools)`` → ``PairingResult`` (call/output pairing over a trajectory);
* ``diff(left, right)`` → ``DiffResult`` (the same trajectory from two providers);
* ``load_tools(obj)`` → ``ToolCatalog`` (request tools, tool files, ``{name: schema}`` maps).

Everything here is a plain function over JSON values: no I/O, no exceptions
for expected outcomes. See ``docs/gate.md``.
"""

from orgate.gate.checks import check
from orgate.gate.diff import DIFF_KINDS, Difference, DiffResult, diff, json_equal
from orgate.gate.pairing import PAIRING_KINDS, PairingIssue, PairingResult, check_pairing
from orgate.gate.schemas import BACKENDS, SchemaCache, SchemaProblem, compile_schema
from orgate.gate.tools import Tool, ToolCatalog, ToolsError, load_tools
from orgate.gate.verdict import CODES, Code, SchemaError, Verdict

__all__ = [
    "BACKENDS",
    "CODES",
    "DIFF_KINDS",
    "PAIRING_KINDS",
    "Code",
    "DiffResult",
    "Difference",
    "PairingIssue",
    "PairingResult",
    "SchemaCache",
    "SchemaError",
    "SchemaProblem",
    "Tool",
    "ToolCatalog",
    "ToolsError",
    "Verdict",
    "check",
    "check_pairing",
    "compile_schema",
    "diff",
    "json_equal",
    "load_tools",
]
