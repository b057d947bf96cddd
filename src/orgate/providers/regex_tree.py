"""A regular expression as a tree, for generating strings that match it (``schema_example``).

JSON Schema's ``pattern`` is an ECMA-262 regular expression; the gate accepts the subset a
linear-time engine runs (``gate/patterns.py``: no lookaround, no backreference). This parser
reads that subset (and a little more: Python's own spellings) into nodes ``(op, arg)``:

- ``("LITERAL", codepoint)``, ``("ANY", None)``, ``("AT", name)`` (an anchor, emits nothing),
  ``("ASSERT", subtree)`` (a lookaround, emits nothing), ``("GROUPREF", number)``;
- ``("IN", items)``: a character class; items are ``("NEGATE", None)``, ``("LITERAL", cp)``,
  ``("RANGE", (low, high))`` and ``("CATEGORY", name)`` (``DIGIT``, ``WORD``, ``SPACE`` and
  their ``NOT_`` forms);
- ``("REPEAT", (low, high, subtree))`` with ``high`` None when unbounded;
- ``("GROUP", (number, subtree))`` (number None when not capturing);
- ``("BRANCH", [subtree, ...])``.

A subtree is a list of nodes. What it cannot read raises ``PatternSyntaxError``; whatever it
reads, the generator's strings are checked against the real pattern before use, so a reading
that is too loose costs a candidate, never a wrong value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Node = tuple[str, object]
Tree = list[Node]

_CLASS_ESCAPES = {
    "d": "DIGIT",
    "D": "NOT_DIGIT",
    "w": "WORD",
    "W": "NOT_WORD",
    "s": "SPACE",
    "S": "NOT_SPACE",
}
_CONTROL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}
_ANCHOR_ESCAPES = {"b", "B", "A", "Z", "z", "G"}
_MAX_COUNT = 100_000  # a larger {n} is not generated (nor accepted by the gate's bounds)


class PatternSyntaxError(ValueError):
    """A pattern this parser does not read."""


@dataclass(slots=True)
class _Reader:
    text: str
    pos: int = 0
    groups: int = 0
    depth: int = field(default=0)

    def peek(self, ahead: int = 0) -> str:
        at = self.pos + ahead
        return self.text[at] if at < len(self.text) else ""

    def take(self) -> str:
        char = self.peek()
        if not char:
            raise PatternSyntaxError("unexpected end of pattern")
        self.pos += 1
        return char

    def startswith(self, prefix: str) -> bool:
        return self.text.startswith(prefix, self.pos)


def parse(pattern: str) -> Tree:
    """The tree of ``pattern``; ``PatternSyntaxError`` when it is not read."""
    reader = _Reader(pattern)
    tree = _alternation(reader)
    if reader.pos != len(pattern):
        raise PatternSyntaxError(f"unbalanced ')' at {reader.pos}")
    return tree


def _alternation(reader: _Reader) -> Tree:
    reader.depth += 1
    if reader.depth > 200:
        raise PatternSyntaxError("nested too deeply")
    branches = [_sequence(reader)]
    while reader.peek() == "|":
        reader.take()
        branches.append(_sequence(reader))
    reader.depth -= 1
    return branches[0] if len(branches) == 1 else [("BRANCH", branches)]


def _sequence(reader: _Reader) -> Tree:
    nodes: Tree = []
    while reader.peek() not in ("", "|", ")"):
        node = _atom(reader)
        nodes.append(_quantified(reader, node))
    return nodes


def _atom(reader: _Reader) -> Node:
    char = reader.take()
    if char == "(":
        return _group(reader)
    if char == "[":
        return ("IN", _class(reader))
    if char == ".":
        return ("ANY", None)
    if char in "^$":
        return ("AT", char)
    if char == "\\":
        return _escape(reader)
    if char in "*+?":
        raise PatternSyntaxError(f"nothing to repeat at {reader.pos - 1}")
    return ("LITERAL", ord(char))


def _group(reader: _Reader) -> Node:
    if reader.startswith("?"):
        reader.take()
        kind = reader.take()
        if kind == ":" or kind == ">":
            return _close(reader, ("GROUP", (None, _alternation(reader))))
        if kind in "=!":
            return _close(reader, ("ASSERT", _alternation(reader)))
        if kind == "<" and reader.peek() in "=!":
            reader.take()
            return _close(reader, ("ASSERT", _alternation(reader)))
        if kind == "P" and reader.peek() == "<":
            reader.take()
            kind = "<"
        if kind != "<":
            raise PatternSyntaxError(f"unsupported group (?{kind} at {reader.pos}")
        while reader.take() != ">":
            pass
    reader.groups += 1
    number = reader.groups
    return _close(reader, ("GROUP", (number, _alternation(reader))))


def _close(reader: _Reader, node: Node) -> Node:
    if reader.take() != ")":
        raise PatternSyntaxError(f"missing ')' at {reader.pos}")
    return node


def _escape(reader: _Reader) -> Node:
    char = reader.take()
    if char in _CLASS_ESCAPES:
        return ("IN", [("CATEGORY", _CLASS_ESCAPES[char])])
    if char in _ANCHOR_ESCAPES:
        return ("AT", "\\" + char)
    if char.isdigit() and char != "0":
        return ("GROUPREF", int(char))
    return ("LITERAL", _escaped_codepoint(reader, char))


def _escaped_codepoint(reader: _Reader, char: str) -> int:
    """The character of an escape other than a class or an anchor (``\\n``, ``\\x41``…)."""
    if char in _CONTROL_ESCAPES:
        return ord(_CONTROL_ESCAPES[char])
    if char == "x":
        return _hex(reader, 2)
    if char == "u":
        if reader.peek() == "{":
            reader.take()
            end = reader.text.find("}", reader.pos)
            if end < 0:
                raise PatternSyntaxError("unclosed \\u{")
            digits, reader.pos = reader.text[reader.pos : end], end + 1
            return _codepoint(digits)
        return _hex(reader, 4)
    if char == "c":
        return ord(reader.take()) % 32
    if char in "pPk":
        raise PatternSyntaxError(f"unsupported escape \\{char}")
    return ord(char)


def _hex(reader: _Reader, width: int) -> int:
    digits = reader.text[reader.pos : reader.pos + width]
    reader.pos += width
    return _codepoint(digits)


def _codepoint(digits: str) -> int:
    try:
        value = int(digits, 16)
    except ValueError:
        raise PatternSyntaxError(f"bad hexadecimal escape {digits!r}") from None
    if value > 0x10FFFF:
        raise PatternSyntaxError(f"code point out of range: {digits!r}")
    return value


def _class(reader: _Reader) -> list[Node]:
    items: list[Node] = []
    if reader.peek() == "^":
        reader.take()
        items.append(("NEGATE", None))
    first = True
    while first or reader.peek() != "]":
        first = False
        item = _class_item(reader)
        if item[0] == "LITERAL" and reader.peek() == "-" and reader.peek(1) not in ("]", ""):
            reader.take()
            end = _class_item(reader)
            if end[0] != "LITERAL":
                raise PatternSyntaxError(f"bad range at {reader.pos}")
            low, high = item[1], end[1]
            assert isinstance(low, int) and isinstance(high, int)
            if low > high:
                raise PatternSyntaxError(f"bad range at {reader.pos}")
            items.append(("RANGE", (low, high)))
        else:
            items.append(item)
    reader.take()
    return items


def _class_item(reader: _Reader) -> Node:
    char = reader.take()
    if char != "\\":
        return ("LITERAL", ord(char))
    char = reader.take()
    if char in _CLASS_ESCAPES:
        return ("CATEGORY", _CLASS_ESCAPES[char])
    if char == "b":
        return ("LITERAL", 8)  # backspace inside a class
    return ("LITERAL", _escaped_codepoint(reader, char))


def _quantified(reader: _Reader, node: Node) -> Node:
    bounds = _quantifier(reader)
    if bounds is None:
        return node
    if node[0] in ("AT", "ASSERT"):
        raise PatternSyntaxError(f"nothing to repeat at {reader.pos}")
    if reader.peek() in ("?", "+"):
        reader.take()  # lazy or possessive: the same strings match
    low, high = bounds
    return ("REPEAT", (low, high, [node]))


def _quantifier(reader: _Reader) -> tuple[int, int | None] | None:
    char = reader.peek()
    if char == "*":
        reader.take()
        return 0, None
    if char == "+":
        reader.take()
        return 1, None
    if char == "?":
        reader.take()
        return 0, 1
    if char == "{":
        return _braces(reader)
    return None


def _braces(reader: _Reader) -> tuple[int, int | None] | None:
    """``{n}``, ``{n,}``, ``{n,m}``; a ``{`` that starts none of them is a literal."""
    end = reader.text.find("}", reader.pos)
    body = reader.text[reader.pos + 1 : end] if end > 0 else ""
    low_text, comma, high_text = body.partition(",")
    if not low_text.isdigit() or (high_text and not high_text.isdigit()):
        return None
    low = int(low_text)
    high = low if not comma else (int(high_text) if high_text else None)
    if low > _MAX_COUNT or (high is not None and (high > _MAX_COUNT or high < low)):
        raise PatternSyntaxError(f"bad repeat count {{{body}}}")
    reader.pos = end + 1
    return low, high
