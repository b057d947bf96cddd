"""The findings of one probe, the mode orgate will use for a JSON schema on that model and why,
and the configuration keys that would write the findings down.

A finding's verdict: ``yes`` (it works), ``no`` (the upstream answered without it: a stream
without its usage chunk, say), ``ignored`` (accepted, not done: a schema dialect the upstream
took and did not enforce), ``refused`` (an error: the message says which), ``skipped``.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from orgate.neutral import Capabilities
from orgate.neutral.dialects import PROVIDER_DIALECTS, SchemaDialect

Verdict = Literal["yes", "no", "ignored", "refused", "skipped"]


@dataclass(slots=True)
class Finding:
    """What one tiny request showed."""

    name: str  # "streaming", "usage in streams", "tool calls", "dialect json_schema"…
    verdict: Verdict
    detail: str = ""
    seconds: float = 0.0

    @property
    def works(self) -> bool:
        return self.verdict == "yes"


def dialect_finding(dialect: SchemaDialect) -> str:
    return f"dialect {dialect}"


@dataclass(slots=True)
class ProbeReport:
    """Every finding of one probe of one configured model."""

    model: str
    provider: str
    base_url: str
    upstream_model: str
    server: str | None = None  # the server software, when the models list says which
    server_evidence: str = ""
    context_window: int | None = None
    context_evidence: str = ""
    findings: list[Finding] = field(default_factory=list)
    created_at: float = field(default_factory=time.time)

    def finding(self, name: str) -> Finding | None:
        return next((f for f in self.findings if f.name == name), None)

    def enforced_dialects(self, caps: Capabilities) -> list[SchemaDialect]:
        """The dialects the upstream enforced, in the order of ``caps``' ladder, then the
        provider's."""
        order = list(dict.fromkeys([*caps.schema_dialects, *PROVIDER_DIALECTS[self.provider]]))
        return [d for d in order if (f := self.finding(dialect_finding(d))) and f.works]

    def mode(self, caps: Capabilities) -> tuple[str, str]:
        """The mode a strict JSON schema is sent in with ``caps`` (what the refusal ladder
        ends in, from the findings), and why."""
        passed: list[str] = []
        if caps.json_schema:
            for dialect in caps.schema_dialects:
                found = self.finding(dialect_finding(dialect))
                if found is None or found.verdict == "skipped":
                    return dialect, "not probed: sent as configured"
                if found.works:
                    why = f"the upstream constrains its decoding to the schema ({dialect})"
                    return dialect, _after(passed, why)
                if found.verdict == "ignored":
                    why = (
                        f"the upstream takes {dialect} but does not enforce it: every answer is "
                        "still checked, but write the enforced dialects into the configuration"
                    )
                    return dialect, _after(passed, why)
                passed.append(f"{dialect} refused, learnt at the first request")
        json_object = self.finding("json_object")
        if caps.json_object and (json_object is None or json_object.verdict != "refused"):
            why = "no schema dialect works: JSON mode with the schema in the instructions"
            return "json_object_instructions", _after(passed, why)
        return "instructions", _after(passed, "the schema in the instructions only")

    def suggested(self, caps: Capabilities) -> dict[str, Any]:
        """The configuration keys the findings give (``[models.chat] server``, capabilities)."""
        keys: dict[str, Any] = {}
        if self.server is not None and self.provider == "openai-chat":
            keys["chat.server"] = self.server
        enforced = self.enforced_dialects(caps)
        keys["capabilities.schema_dialects"] = enforced
        json_object = self.finding("json_object")
        if json_object is not None and json_object.verdict != "skipped":
            keys["capabilities.json_object"] = json_object.works
        tools = self.finding("tool calls")
        if tools is not None and tools.verdict == "refused":
            keys["capabilities.tools"] = False
        usage = self.finding("usage in streams")
        if self.provider == "openai-chat" and usage is not None and usage.verdict == "refused":
            keys["chat.include_usage"] = False
        if self.context_window is not None:
            keys["capabilities.context_window"] = self.context_window
        return keys

    def with_suggestions(self, caps: Capabilities) -> Capabilities:
        """``caps`` as the suggested keys would make them (to say which mode that gives)."""
        keys = self.suggested(caps)
        dialects = tuple(keys["capabilities.schema_dialects"])
        return dataclasses.replace(
            caps,
            schema_dialects=dialects,
            json_object=keys.get("capabilities.json_object", caps.json_object),
        )

    def to_dict(self, caps: Capabilities) -> dict[str, Any]:
        mode, why = self.mode(caps)
        then, then_why = self.mode(self.with_suggestions(caps))
        return {
            "model": self.model,
            "provider": self.provider,
            "base_url": self.base_url,
            "upstream_model": self.upstream_model,
            "server": self.server,
            "server_evidence": self.server_evidence,
            "context_window": self.context_window,
            "context_evidence": self.context_evidence,
            "findings": [dataclasses.asdict(f) for f in self.findings],
            "mode": {"now": mode, "why": why, "written": then, "written_why": then_why},
            "suggested": self.suggested(caps),
            "created_at": self.created_at,
        }


def _after(passed: list[str], why: str) -> str:
    return "; ".join([*passed, why])
