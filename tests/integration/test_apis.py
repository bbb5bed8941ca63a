"""/v1/responses, /v1/messages and /v1/messages/count_tokens on the wire: the named SSE
events both streams carry (the SDKs dispatch on them; tests/e2e/apis.test.mjs checks what the
SDKs make of them), tool calls parsed from the model's text into each API's items and blocks,
and a table of invalid requests, each a 400 naming the field in the endpoint's own error
shape, the server healthy after each."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Server, run, shared, test  # noqa: E402

MODEL = os.path.join(shared(), "models", "aidreams260K.gguf")
QWEN = os.path.join(shared(), "chat-templates", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
TWO_CALLS = ('Sure.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
             '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>')
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
SERVER = None


def server():
    global SERVER
    if SERVER is None:
        SERVER = Server("--model", MODEL, "--null-reply", TWO_CALLS, "--chat-template", QWEN)
    return SERVER


def post(path, body):
    return server().post(path, body)


def named_events(body):
    """(event name, data object) of each SSE block; every block must have both."""
    out = []
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        assert lines[0].startswith("event: ") and lines[1].startswith("data: "), block
        out.append((lines[0][7:], json.loads(lines[1][6:])))
    return out


@test
def responses_stream_events_are_named_and_numbered():
    r = post("/v1/responses", {"input": "Hi", "stream": True})
    assert r.status == 200 and "text/event-stream" in r.header("content-type"), r.status
    ev = named_events(r.body)
    assert all(name == d["type"] for name, d in ev), [n for n, _ in ev]
    assert [d["sequence_number"] for _, d in ev] == list(range(len(ev)))
    assert ev[0][0] == "response.created" and ev[-1][0] == "response.completed"
    assert b"[DONE]" not in r.body


@test
def messages_stream_events_are_named():
    r = post("/v1/messages", {"max_tokens": 999, "stream": True,
                              "messages": [{"role": "user", "content": "Hi"}]})
    assert r.status == 200, r.status
    ev = named_events(r.body)
    names = [n for n, _ in ev]
    assert all(name == d["type"] for name, d in ev), names
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    assert ev[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert b"[DONE]" not in r.body


@test
def tool_calls_become_function_call_items_and_tool_use_blocks():
    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER}]
    r = post("/v1/responses", {"input": "Weather?", "tools": tools}).json()
    assert [o["type"] for o in r["output"]] == ["message", "function_call", "function_call"], r
    assert [json.loads(o["arguments"]) for o in r["output"][1:]] == [{"city": "Paris"},
                                                                     {"city": "Rome"}]
    assert all(o["call_id"].startswith("call_") for o in r["output"][1:])
    one = post("/v1/responses", {"input": "Weather?", "tools": tools,
                                 "parallel_tool_calls": False}).json()
    assert [o["type"] for o in one["output"]] == ["message", "function_call"], one
    m = post("/v1/messages", {"max_tokens": 999, "messages": [{"role": "user", "content": "W?"}],
                              "tools": [{"name": "get_weather", "input_schema": WEATHER}]}).json()
    assert m["stop_reason"] == "tool_use", m
    assert [b["type"] for b in m["content"]] == ["text", "tool_use", "tool_use"], m
    assert [b["input"] for b in m["content"][1:]] == [{"city": "Paris"}, {"city": "Rome"}]
    none = post("/v1/messages", {"max_tokens": 999, "messages": [{"role": "user", "content": "W?"}],
                                 "tools": [{"name": "get_weather", "input_schema": WEATHER}],
                                 "tool_choice": {"type": "none"}}).json()
    assert none["stop_reason"] == "end_turn" and len(none["content"]) == 1, none


@test
def count_tokens_counts_what_messages_renders():
    body = {"system": "Be brief.", "messages": [{"role": "user", "content": "Hello there"}]}
    n = post("/v1/messages/count_tokens", body).json()["input_tokens"]
    chat = post("/apply-template", {"messages": [{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": "Hello there"}]})
    ids = server().request("POST", "/tokenize", body=json.dumps(
        {"content": chat.json()["prompt"], "add_special": True, "parse_special": True})).json()
    assert n == len(ids["tokens"]), (n, ids)


U = [{"role": "user", "content": "x"}]
BAD_RESPONSES = [
    ({}, "input"),
    ({"input": 3}, "input"),
    ({"input": []}, "input"),
    ({"input": "x", "store": True}, "store"),
    ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
    ({"input": "x", "background": True}, "background"),
    ({"input": "x", "instructions": 5}, "instructions"),
    ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0]"),
    ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
    ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]}, "input[0].content[0]"),
    ({"input": [{"type": "function_call", "name": "f"}]}, "input[0]"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0]"),
    ({"input": "x", "tool_choice": {"type": "function"}}, "tool_choice"),
    ({"input": "x", "text": {"format": {"type": "json_schema"}}}, "text.format.schema"),
    ({"input": "x", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
    ({"input": "x", "reasoning": {"effort": "huge"}}, "reasoning.effort"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "x", "temperature": 9}, "temperature"),
]

BAD_MESSAGES = [
    ({"messages": U}, "max_tokens"),
    ({"max_tokens": 0, "messages": U}, "max_tokens"),
    ({"max_tokens": 4}, "messages"),
    ({"max_tokens": 4, "messages": [{"role": "system", "content": "x"}]}, "messages.0"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image"}]}]},
     "messages.0.content.0"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]},
     "messages.0.content.0"),
    ({"max_tokens": 4, "messages": U, "system": 7}, "system"),
    ({"max_tokens": 4, "messages": U, "tools": [{"name": "f"}]}, "tools.0"),
    ({"max_tokens": 4, "messages": U, "tool_choice": {"type": "tool"}}, "tool_choice"),
    ({"max_tokens": 4, "messages": U, "stop_sequences": ["a"] * 5}, "stop_sequences"),
    ({"max_tokens": 4, "messages": U, "thinking": {"type": "on"}}, "thinking.type"),
    ({"max_tokens": 4, "messages": U, "temperature": 7}, "temperature"),
]


@test
def invalid_responses_requests_name_the_field():
    for body, param in BAD_RESPONSES:
        r = post("/v1/responses", body)
        assert r.status == 400, (body, r.status, r.body)
        err = r.json()["error"]
        assert err["param"] == param and err["type"] == "invalid_request_error", (body, err)
    assert server().health()[0] == 200


@test
def invalid_messages_requests_answer_in_anthropics_shape():
    for body, param in BAD_MESSAGES:
        r = post("/v1/messages", body)
        assert r.status == 400, (body, r.status, r.body)
        j = r.json()
        assert j["type"] == "error" and j["error"]["type"] == "invalid_request_error", (body, j)
        assert j["error"]["message"].startswith(param + ": "), (body, j)
    r = server().request("POST", "/v1/messages", body="{nope")
    assert r.status == 400 and r.json()["type"] == "error", r.body
    assert server().health()[0] == 200


@test
def x_api_key_is_accepted_like_bearer():
    with Server("--model", MODEL, "--null-reply", "Hi", "--api-key", "k1") as s:
        body = json.dumps({"max_tokens": 2, "messages": U})
        assert s.request("POST", "/v1/messages", body=body, headers={"x-api-key": "k1"}).status == 200
        assert s.request("POST", "/v1/responses", body=json.dumps({"input": "x"}),
                         headers={"x-api-key": "k1"}).status == 200
        bad = s.request("POST", "/v1/messages", body=body, headers={"x-api-key": "k2"})
        assert bad.status == 401 and bad.json()["error"]["type"] == "authentication_error", bad.body
        assert s.request("POST", "/v1/messages", body=body).status == 401


if __name__ == "__main__":
    rc = run()
    if SERVER is not None:
        SERVER.stop()
    sys.exit(rc)
