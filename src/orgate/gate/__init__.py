"""The replay gate: which logged items may be replayed to another model.

* ``check(item, tools)`` → ``Verdict`` (one ``Code``; schema errors with JSON paths);
* ``check_pairing(items, tools)`` → ``PairingResult`` (call/output pairing over a trajectory);
* ``diff(left, right)`` → ``DiffResult`` (the same trajectory from two providers);
* ``load_tools(obj)`` → ``ToolCatalog`` (request tools, tool files, ``{name: schema}`` maps).

Everything here is a plain function over JSON values: no I/O, no exceptions
for expected outcomes. See ``docs/gate.md``.

The package also holds the schema tools every check of a client's JSON Schema shares, beyond
the replay gate (the safety net, the tool guard, the request edge, the built-in model):
linear-time ``pattern`` matching (``patterns.py``), a schema's static bounds (``bounds.py``),
its cost (``cost.py``, ``refs.py``) and where schema work runs (``work.py``). They live here
because the gate's checks are built on them and share their compiled-schema cache and worker
processes, and ``gate`` imports nothing else of orgate, so every layer may use them; moving
them would rename the imports of more than a dozen modules and change no dependency.
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
