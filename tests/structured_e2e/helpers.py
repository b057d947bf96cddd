"""Helpers shared by the structured-output end-to-end tests."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


def structured_counts(api: httpx.Client, fmt: str) -> dict[str, float]:
    """The ``orgate_structured_*_total`` counters of format ``fmt``,
    keyed ``name{label=value,...}``."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(api.get("/metrics").text):
        if not family.name.startswith("orgate_structured_"):
            continue
        for sample in family.samples:
            if sample.name.endswith("_total") and sample.labels.get("format") == fmt:
                key = sample.name.removeprefix("orgate_structured_").removesuffix("_total")
                extra = [
                    f"{k}={v}"
                    for k, v in sorted(sample.labels.items())
                    if k not in ("model", "format")
                ]
                out[key + ("{" + ",".join(extra) + "}" if extra else "")] = sample.value
    return out
