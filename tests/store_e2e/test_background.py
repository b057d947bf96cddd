"""Background responses over HTTP: queued → completed by polling, cancel, stream + disconnect,
store=false."""

from __future__ import annotations

import time

import httpx

from tests.fakes.openai_chat_upstream import FakeOpenAIChat, Script
from tests.store_e2e.helpers import assert_error, calls_in_flight, create, poll, text_of
from tests.support.spec import check_sse, validate
from tests.support.waiting import wait_until


def test_background_returns_at_once_and_completes(a: httpx.Client) -> None:
    created = create(a, input="orgate:delay=300 one two three four five", background=True)
    # The model needs ~2 s: a body that is not finished proves the POST did not wait for it.
    assert created["status"] in ("queued", "in_progress") and created["background"] is True
    assert created["output"] == [] and created["completed_at"] is None
    done = poll(a, created["id"])
    assert done["status"] == "completed"
    assert text_of(done) == "orgate:delay=300 one two three four five"
    assert done["id"] == created["id"] and done["background"] is True


def test_cancel_stops_the_builtin_model(a: httpx.Client) -> None:
    words = " ".join(f"w{i}" for i in range(40))
    created = create(a, input=f"orgate:delay=300 {words}", background=True)
    poll(a, created["id"], until=("in_progress",))
    r = a.post(f"/v1/responses/{created['id']}/cancel")
    assert r.status_code == 200, r.text
    validate("ResponseResource", r.json())
    assert r.json()["status"] == "cancelled"
    first = a.get(f"/v1/responses/{created['id']}").json()
    assert wait_until(lambda: not calls_in_flight(a, "orgate/echo"))  # the model stopped
    time.sleep(1.0)  # a window for a change a cancel must not let through (3 words' time)
    later = a.get(f"/v1/responses/{created['id']}").json()
    assert later["status"] == "cancelled" and later == first, "nothing may change after a cancel"
    assert len(text_of(later).split()) < 40  # stopped before its end (12 s of words)


def test_cancel_stops_the_upstream_call(a: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(Script(content=" ".join(f"t{i}" for i in range(60)), delay=0.1))
    created = create(a, model="fake-chat", input="slow upstream", background=True)
    poll(a, created["id"], until=("in_progress",))
    assert wait_until(lambda: fake.requests)  # the upstream call is under way (6 s of words)
    r = a.post(f"/v1/responses/{created['id']}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
    assert wait_until(lambda: fake.requests[-1].disconnected or fake.requests[-1].completed)
    assert fake.requests[-1].disconnected and not fake.requests[-1].completed, (
        "the upstream call must be aborted"
    )


def test_cancel_of_a_finished_or_foreground_response(a: httpx.Client) -> None:
    done = create(a, input="quick", background=True)
    finished = poll(a, done["id"])
    r = a.post(f"/v1/responses/{done['id']}/cancel")
    assert r.status_code == 200 and r.json() == finished, (
        "cancelling a finished response changes nothing"
    )
    foreground = create(a, input="foreground")
    assert_error(a.post(f"/v1/responses/{foreground['id']}/cancel"), 400)
    assert_error(a.post("/v1/responses/resp_unknown/cancel"), 404, "not_found")


def test_background_stream_survives_a_client_disconnect(a: httpx.Client) -> None:
    words = "orgate:delay=60 " + " ".join(f"b{i}" for i in range(20))
    seen: list[str] = []
    rid = None
    with a.stream(
        "POST",
        "/v1/responses",
        json={"model": "orgate/echo", "input": words, "stream": True, "background": True},
    ) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data:"):
                seen.append(line)
                if rid is None and '"response"' in line:
                    rid = line.split('"id":"', 1)[1].split('"', 1)[0]
            if len(seen) >= 5:
                break  # leave mid-stream
    assert rid is not None and rid.startswith("resp_")
    done = poll(a, rid)
    assert done["status"] == "completed" and text_of(done) == words
    replay = a.get(f"/v1/responses/{rid}", params={"stream": "true"})
    assert replay.status_code == 200, replay.text
    events = check_sse(replay.content)
    assert events[-1]["type"] == "response.completed" and events[-1]["response"] == done


def test_background_with_store_false_is_400(a: httpx.Client) -> None:
    r = a.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": "x", "background": True, "store": False},
    )
    assert_error(r, 400, param="background")


def test_a_deleted_running_background_response_stays_deleted(a: httpx.Client) -> None:
    created = create(
        a, input="orgate:delay=100 " + " ".join(f"d{i}" for i in range(10)), background=True
    )
    poll(a, created["id"], until=("in_progress",))
    r = a.delete(f"/v1/responses/{created['id']}")
    assert r.status_code == 200 and r.json()["deleted"] is True, r.text
    assert wait_until(lambda: not calls_in_flight(a, "orgate/echo"))  # the model has finished
    time.sleep(0.5)  # a window for the runner's last save, which a delete must not let through
    r = a.get(f"/v1/responses/{created['id']}")
    assert_error(r, 404, "not_found")


def test_stream_of_a_running_background_response_resumes_live(a: httpx.Client) -> None:
    words = "orgate:delay=100 " + " ".join(f"r{i}" for i in range(12))
    created = create(a, input=words, background=True, stream=False)
    poll(a, created["id"], until=("in_progress",))
    r = a.get(f"/v1/responses/{created['id']}", params={"stream": "true"})
    assert r.status_code == 200, (
        f"a running background response should stream (live), not: {r.text}"
    )
    events = check_sse(r.content)
    assert events[-1]["type"] == "response.completed" and text_of(events[-1]["response"]) == words
