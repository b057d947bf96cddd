"""Make a JSON value that satisfies a JSON Schema (used by the built-in test model).

Deterministic: the same schema and seed text give the same value. Covers the
keywords tools and response formats use in practice (``type``, ``properties``,
``required``, ``items``, ``enum``, ``const``, ``anyOf``/``oneOf``/``allOf``,
``$ref``/``$defs``, numeric and length bounds, ``pattern`` for simple cases).
The caller validates the result; an unsatisfiable schema gives ``None``.
"""

from __future__ import annotations

import re
from typing import Any

_MAX_DEPTH = 12


def example_for(schema: Any, text: str = "example") -> Any:
    """A value for ``schema``; strings are drawn from ``text``."""
    return _Maker(schema, text).make(schema, 0)


class _Maker:
    def __init__(self, root: Any, text: str) -> None:
        self.root = root
        self.text = text.strip() or "example"

    def resolve(self, schema: dict[str, Any]) -> Any:
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#"):
            return schema
        node: Any = self.root
        for part in ref[1:].split("/"):
            if not part:
                continue
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return {}
        merged = dict(node) if isinstance(node, dict) else {}
        merged.update({k: v for k, v in schema.items() if k != "$ref"})
        return merged

    def make(self, schema: Any, depth: int) -> Any:
        if schema is True or schema is None:
            return {} if depth == 0 else "example"
        if schema is False or not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return None
        if "$ref" in schema:
            return self.make(self.resolve(schema), depth + 1)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return schema["enum"][0]
        if isinstance(schema.get("allOf"), list):
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for sub in schema["allOf"]:
                sub = self.resolve(sub) if isinstance(sub, dict) else {}
                for key, value in sub.items():
                    if key == "properties" and isinstance(merged.get("properties"), dict):
                        merged["properties"] = {**merged["properties"], **value}
                    elif key == "required" and isinstance(merged.get("required"), list):
                        merged["required"] = [*merged["required"], *value]
                    else:
                        merged.setdefault(key, value)
            return self.make(merged, depth + 1)
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                non_null = [
                    o for o in options if not (isinstance(o, dict) and o.get("type") == "null")
                ]
                return self.make((non_null or options)[0], depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"] or kind
            kind = kinds[0] if kinds else None
        if kind is None:
            if "properties" in schema or "required" in schema:
                kind = "object"
            elif "items" in schema:
                kind = "array"
            else:
                kind = "string" if depth else "object"
        return getattr(self, f"_{kind}", self._string)(schema, depth)

    def _object(self, schema: dict[str, Any], depth: int) -> Any:
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = [r for r in schema.get("required", []) if isinstance(r, str)]
        value: dict[str, Any] = {}
        for name, sub in properties.items():
            value[name] = self.make(sub, depth + 1)
        for name in required:
            if name not in value:
                extra = schema.get("additionalProperties")
                value[name] = self.make(
                    extra if isinstance(extra, dict) else {"type": "string"}, depth + 1
                )
        minimum = schema.get("minProperties")
        if (
            isinstance(minimum, int)
            and len(value) < minimum
            and schema.get("additionalProperties") is not False
        ):
            extra = schema.get("additionalProperties")
            for i in range(minimum - len(value)):
                value[f"key{i}"] = self.make(
                    extra if isinstance(extra, dict) else {"type": "string"}, depth + 1
                )
        return value

    def _array(self, schema: dict[str, Any], depth: int) -> Any:
        prefix = schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else []
        items = schema.get("items", {})
        count = max(int(schema.get("minItems", 1) or 0), len(prefix), 1)
        maximum = schema.get("maxItems")
        if isinstance(maximum, int):
            count = min(count, maximum)
        values = []
        for i in range(count):
            sub = prefix[i] if i < len(prefix) else items
            values.append(self.make(sub if sub is not None else {}, depth + 1))
        if schema.get("uniqueItems") and len(values) > 1:
            values = values[:1]
        return values

    def _string(self, schema: dict[str, Any], depth: int) -> Any:
        fmt = schema.get("format")
        formats = {
            "date-time": "2026-01-01T00:00:00Z",
            "date": "2026-01-01",
            "time": "00:00:00Z",
            "email": "user@example.com",
            "uri": "https://example.com/",
            "url": "https://example.com/",
            "uuid": "00000000-0000-4000-8000-000000000000",
            "ipv4": "192.0.2.1",
            "ipv6": "2001:db8::1",
            "hostname": "example.com",
        }
        text = formats.get(fmt, self.text) if isinstance(fmt, str) else self.text
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            text = _match_pattern(pattern, text)
        minimum = schema.get("minLength")
        maximum = schema.get("maxLength")
        if isinstance(minimum, int) and len(text) < minimum:
            text = (text + " " + "x" * minimum)[: max(minimum, len(text))]
            text = text.ljust(minimum, "x")
        if isinstance(maximum, int) and len(text) > maximum:
            text = text[:maximum]
        return text

    def _integer(self, schema: dict[str, Any], depth: int) -> Any:
        return int(self._number(schema, depth, integer=True))

    def _number(self, schema: dict[str, Any], depth: int, integer: bool = False) -> Any:
        low = schema.get("minimum")
        high = schema.get("maximum")
        ex_low = schema.get("exclusiveMinimum")
        ex_high = schema.get("exclusiveMaximum")
        value: float = 1
        if isinstance(low, int | float):
            value = max(value, low)
        if isinstance(ex_low, int | float) and value <= ex_low:
            value = ex_low + 1
        if isinstance(high, int | float) and value > high:
            value = high
        if isinstance(ex_high, int | float) and value >= ex_high:
            value = (
                ex_high - 1
                if integer
                or ex_high - 1
                > (ex_low if isinstance(ex_low, int | float) else low or float("-inf"))
                else (ex_high + (ex_low or 0)) / 2
            )
        step = schema.get("multipleOf")
        if isinstance(step, int | float) and step > 0:
            value = step * max(1, round(value / step))
        if integer:
            value = int(value) if float(value).is_integer() else int(value) + 1
        return value

    def _boolean(self, schema: dict[str, Any], depth: int) -> Any:
        return True

    def _null(self, schema: dict[str, Any], depth: int) -> Any:
        return None


def _match_pattern(pattern: str, text: str) -> str:
    """Return ``text`` if it matches, else a simple candidate that does, else ``text``."""
    try:
        compiled = re.compile(pattern)
    except re.error:
        return text
    candidates = [
        text,
        "example",
        "a",
        "A",
        "0",
        "abc",
        "ABC",
        "a1",
        "x-1",
        "2026-01-01",
        "user@example.com",
    ]
    for candidate in candidates:
        if compiled.search(candidate):
            return candidate
    return text
