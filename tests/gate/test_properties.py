"""Property-based tests: check() never raises on any JSON value; diff(x, x) is ok; pairing."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orgate.gate import CODES, Code, check, check_pairing, diff, load_tools

from .conftest import SALES_TOOLS

TOOLS = load_tools(
    [
        *SALES_TOOLS,
        {"type": "function", "name": "now", "parameters": None},
        {
            "type": "function",
            "name": "search",
            "parameters": {
                "type": "object",
                "$defs": {"q": {"type": "string", "minLength": 1}},
                "properties": {"q": {"$ref": "#/$defs/q"}, "k": {"type": "integer"}},
                "required": ["q"],
            },
        },
    ]
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
types = (
    st.sampled_from(
        [
            "function_call",
            "function_call_output",
            "message",
            "openai:web_search_call",
            "reasoning",
            "",
        ]
    )
    | json_values
)
names = st.sampled_from(["get_latest_sales_report", "now", "search", "nope"]) | json_values
statuses = st.sampled_from(["completed", "in_progress", "incomplete"]) | json_values
arguments = (
    json_values.map(
        lambda v: orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS).decode() if _dumpable(v) else "x"
    )
    | st.text(max_size=30)
    | json_values
)


def _dumpable(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True


items = st.fixed_dictionaries(
    {},
    optional={
        "type": types,
        "name": names,
        "status": statuses,
        "arguments": arguments,
        "call_id": st.sampled_from(["a", "b", "c"]) | json_values,
        "id": json_values,
        "role": json_values,
    },
)
anything = json_values | items


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(anything)
def test_check_never_raises_and_returns_a_code(value: Any) -> None:
    for tools in (None, TOOLS):
        verdict = check(value, tools)
        assert verdict.code in CODES
        assert isinstance(verdict.message, str)
        assert (verdict.code is Code.ARGUMENTS_SCHEMA) == bool(verdict.errors)
        assert verdict.call_id is None or isinstance(verdict.call_id, str)


@settings(max_examples=150)
@given(st.lists(anything, max_size=8))
def test_diff_with_itself_is_ok(trajectory: list[Any]) -> None:
    result = diff(trajectory, trajectory)
    assert result.verdict == "ok"
    assert result.differences == ()


@settings(max_examples=150)
@given(st.lists(anything, max_size=10))
def test_pairing_never_raises_and_every_issue_is_an_output_or_call(trajectory: list[Any]) -> None:
    result = check_pairing(trajectory, TOOLS)
    for issue in result.issues:
        assert trajectory[issue.index]["type"] in (
            "function_call",
            "function_call_output",
            "custom_tool_call",
            "custom_tool_call_output",
        )
        assert issue.param == f"input[{issue.index}].call_id"


@settings(max_examples=100)
@given(st.lists(st.sampled_from(["a", "b", "c"]), max_size=6), st.randoms(use_true_random=False))
def test_pairing_of_ok_calls_each_answered_once_is_ok(call_ids: list[str], rnd: Any) -> None:
    unique = list(dict.fromkeys(call_ids))
    trajectory: list[dict[str, Any]] = []
    for cid in unique:
        trajectory.append(
            {
                "type": "function_call",
                "call_id": cid,
                "name": "now",
                "arguments": "{}",
                "status": "completed",
            }
        )
    outputs = [{"type": "function_call_output", "call_id": cid, "output": "x"} for cid in unique]
    rnd.shuffle(outputs)
    result = check_pairing(trajectory + outputs, TOOLS)
    assert result.ok, result.issues
    # answering one twice is always caught
    if unique:
        result = check_pairing(trajectory + outputs + outputs[:1], TOOLS)
        assert [i.kind for i in result.issues] == ["duplicate_output"]
