"""What the parts of a client's JSON Schema are, and where its local references point.

Shared by the static bounds (``bounds.py``) and the cost model (``cost.py``): which
members of a schema object hold subschemas, names or data (``role_of``), where a
``$ref`` / ``$dynamicRef`` leads inside the same document (``Targets``: JSON pointers,
``$anchor`` / ``$dynamicAnchor`` names and ``$id`` values; nothing is ever fetched), and
the path of a part found by identity (``path_to``), to word a refusal.
"""

from __future__ import annotations

from typing import Any

#: Keywords whose value is data, not a subschema.
DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
#: Keywords whose value maps names to subschemas (its keys are names, never keywords).
NAME_MAPS = frozenset(
    {"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"}
)
#: Definitions: evaluated only where a reference reaches them.
DEFINITIONS = frozenset({"$defs", "definitions"})
#: The keywords that point elsewhere in the document.
REFS = frozenset({"$ref", "$dynamicRef"})

# What a container is: a schema (or a list of schemas), a map of names to schemas, or data.
SCHEMA, NAMES, DATA = 0, 1, 2


def role_of(key: str) -> int:
    """The role of a schema object's member ``key``'s value."""
    return DATA if key in DATA_KEYWORDS else NAMES if key in NAME_MAPS else SCHEMA


def path_to(root: Any, target: Any) -> tuple[str | int, ...]:
    """The path of ``target`` (by identity) inside ``root``; only run to word a refusal."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        items = (
            node.items() if type(node) is dict else enumerate(node) if type(node) is list else ()
        )
        for key, value in items:
            if type(value) is dict or type(value) is list:
                stack.append((value, (*path, key)))
    return ()


class Targets:
    """Where a schema's references point: local JSON pointers, ``$anchor``/``$dynamicAnchor``
    names and ``$id`` values. A reference none of these resolves counts as the whole schema
    where a bound must assume the worst (``bounds.py``), as nothing where the cost model may."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.named: dict[str, Any] = {}
        self.total = 0
        stack = [root]
        while stack:
            node = stack.pop()
            self.total += 1
            if type(node) is dict:
                for anchor_key in ("$anchor", "$dynamicAnchor"):
                    if isinstance(node.get(anchor_key), str):
                        self.named["#" + node[anchor_key]] = node
                if isinstance(node.get("$id"), str):
                    self.named[node["$id"].rstrip("#")] = node
                stack.extend(v for v in node.values() if type(v) is dict or type(v) is list)
            elif type(node) is list:
                stack.extend(v for v in node if type(v) is dict or type(v) is list)

    def children(self, node: Any, role: int) -> tuple[list[tuple[Any, int]], int]:
        """(the containers a validator evaluates from ``node``, with their roles; the number of
        its references left unresolved). Definitions count only where referenced;
        data not at all."""
        if role == DATA:
            return [], 0
        if type(node) is list:
            return [(v, role) for v in node if type(v) is dict or type(v) is list], 0
        if role == NAMES:
            return [(v, SCHEMA) for v in node.values() if type(v) is dict or type(v) is list], 0
        out = [
            (v, role_of(k))
            for k, v in node.items()
            if (type(v) is dict or type(v) is list)
            and k not in DATA_KEYWORDS
            and k not in DEFINITIONS
        ]
        unresolved = 0
        for ref_key in REFS:
            ref = node.get(ref_key)
            if isinstance(ref, str):
                target = self.resolve(ref)
                if target is None:
                    unresolved += 1
                elif type(target) is dict or type(target) is list:
                    out.append((target, SCHEMA))
        return out, unresolved

    def resolve(self, ref: str) -> Any:
        """The part of the document ``ref`` points to, or None."""
        if ref in self.named:
            return self.named[ref]
        base, _, pointer = ref.partition("#")
        node = self.named.get(base) if base else self.root
        if node is None or (pointer and not pointer.startswith("/")):
            return None
        for part in pointer.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if type(node) is dict and part in node:
                node = node[part]
            elif type(node) is list and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node
