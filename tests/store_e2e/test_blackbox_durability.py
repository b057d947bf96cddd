"""Black-box regressions of stored responses: stream replay after a client left,
``starting_after`` resume."""

from __future__ import annotations

import httpx
import orjson

from tests.server_process import OrgateServer
from tests.store_e2e.helpers import assert_error, poll
from tests.support.spec import check_sse, parse_sse, validate


def _sequence_numbers(raw: bytes) -> list[int]:
    return [orjson.loads(data)["sequence_number"] for _, data in parse_sse(raw) if data != "[DONE]"]


def test_replay_of_a_stream_whose_client_left_ends_like_the_stored_response(
    gw: OrgateServer,
) -> None:
    """A client that leaves mid-stream: the response is stored failed (client_disconnected), and
    ``GET ?stream=true`` replays a grammatical stream ending in error + response.failed with that
    body
    (it used to stop at the last delta: an open item and no terminal event)."""
    words = " ".join(f"w{i}" for i in range(30))
    with httpx.Client(base_url=gw.url, headers={"Authorization": "Bearer key-a"}, timeout=30) as c:
        response_id = None
        with c.stream(
            "POST",
            "/v1/responses",
            json={"model": "orgate/echo", "input": f"orgate:delay=60 {words}", "stream": True},
        ) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    event = orjson.loads(line[6:])
                    response_id = response_id or event["response"]["id"]
                    if event["type"] == "response.output_text.delta":
                        break  # leave mid-stream
        assert response_id is not None
        stored = poll(c, response_id, until=("failed",))
        assert stored["error"]["code"] == "client_disconnected"
        replay = c.get(f"/v1/responses/{response_id}", params={"stream": "true"})
        assert replay.status_code == 200, replay.text
        events = check_sse(replay.content)
        assert events[-1]["type"] == "response.failed"
        assert events[-1]["response"] == stored


def test_stream_replay_resumes_after_starting_after(a: httpx.Client) -> None:
    """``GET ?stream=true&starting_after=N`` sends only the events after sequence number N
    (it was ignored)."""
    r = a.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": "resume me from the middle please", "stream": True},
    )
    full = check_sse(r.content)
    response_id = full[0]["response"]["id"]
    numbers = [e["sequence_number"] for e in full]
    for after in (0, 3, numbers[-2]):
        replay = a.get(
            f"/v1/responses/{response_id}", params={"stream": "true", "starting_after": after}
        )
        assert replay.status_code == 200, replay.text
        assert replay.content.endswith(b"data: [DONE]\n\n")
        assert _sequence_numbers(replay.content) == [n for n in numbers if n > after]
        for _, data in parse_sse(replay.content)[:-1]:
            event = orjson.loads(data)
            assert event == full[numbers.index(event["sequence_number"])]
    past_the_end = a.get(
        f"/v1/responses/{response_id}", params={"stream": "true", "starting_after": numbers[-1]}
    )
    assert past_the_end.status_code == 200 and _sequence_numbers(past_the_end.content) == []
    assert past_the_end.content.endswith(b"data: [DONE]\n\n")
    for bad in ("-1", "x", "1.5"):
        assert_error(
            a.get(f"/v1/responses/{response_id}", params={"stream": "true", "starting_after": bad}),
            400,
            param="starting_after",
        )


def test_live_background_stream_resumes_after_starting_after(a: httpx.Client) -> None:
    """A background response still running: the live follow honours ``starting_after`` too."""
    words = " ".join(f"w{i}" for i in range(12))
    created = a.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": f"orgate:delay=200 {words}", "background": True},
    ).json()
    validate("ResponseResource", created)
    poll(a, created["id"], until=("in_progress",))  # running (for 2.4 s): the follow is live
    live = a.get(f"/v1/responses/{created['id']}", params={"stream": "true", "starting_after": 4})
    assert live.status_code == 200, live.text
    numbers = _sequence_numbers(live.content)
    assert numbers and numbers[0] == 5 and numbers == sorted(numbers)
    assert live.content.endswith(b"data: [DONE]\n\n")
    full = check_sse(a.get(f"/v1/responses/{created['id']}", params={"stream": "true"}).content)
    assert numbers == [e["sequence_number"] for e in full if e["sequence_number"] > 4]
