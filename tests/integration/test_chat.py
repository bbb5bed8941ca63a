"""/v1/chat/completions and /apply-template: OpenAI's shapes (streamed and not), the chat
template applied as Python Jinja2 renders it, validation with error.param for every
violation (a table of invalid requests, the server healthy after each), and special tokens
only where the template wrote them."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Server, run, shared, sse_events, test  # noqa: E402



TEMPLATES = os.path.join(shared(), "chat-templates", "templates")
MODEL = os.path.join(shared(), "models", "aidreams260K.gguf")
QWEN = os.path.join(TEMPLATES, "Qwen-Qwen2.5-7B-Instruct.jinja")
NULL = None
CPU = None
QNULL = None


def null():
    global NULL
    if NULL is None:
        NULL = Server()
    return NULL


def cpu():
    """aidreams260K has no template (ChatML then) and a 128-token context."""
    global CPU
    if CPU is None:
        CPU = Server("--model", MODEL, "--threads", "2", backend="cpu")
    return CPU


def qwen():
    global QNULL
    if QNULL is None:
        QNULL = Server("--chat-template", QWEN)
    return QNULL


def chat(s, **body):
    return s.request("POST", "/v1/chat/completions", body=json.dumps(body))


U = [{"role": "user", "content": "Tell me about the sea."}]
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}

# (body, status, error.param)
INVALID = [
    ({}, 400, "messages"),
    ({"messages": None}, 400, "messages"),
    ({"messages": []}, 400, "messages"),
    ({"messages": "hi"}, 400, "messages"),
    ({"messages": {"role": "user"}}, 400, "messages"),
    ({"messages": [5]}, 400, "messages[0]"),
    ({"messages": ["hi"]}, 400, "messages[0]"),
    ({"messages": [{}]}, 400, "messages[0].role"),
    ({"messages": [{"role": 3, "content": "x"}]}, 400, "messages[0].role"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0].role"),
    ({"messages": [{"role": "user"}]}, 400, "messages[0].content"),
    ({"messages": [{"role": "system"}]}, 400, "messages[0].content"),
    ({"messages": [{"role": "user", "content": 5}]}, 400, "messages[0].content"),
    ({"messages": [{"role": "user", "content": {"text": "x"}}]}, 400, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     400, "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]},
     400, "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "file"}]}]},
     400, "messages[0].content[1].type"),
    ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, 400,
     "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "video"}]}]}, 400,
     "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": ["x"]}]}, 400, "messages[0].content[0].type"),
    ({"messages": U + [{"role": "tool", "content": "r"}]}, 400, "messages[1].tool_call_id"),
    ({"messages": U + [{"role": "assistant", "tool_calls": "x"}]}, 400, "messages[1].tool_calls"),
    ({"messages": U + [{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}]}, 400,
     "messages[1].tool_calls"),
    ({"messages": [{"role": "user", "content": "x", "name": 5}]}, 400, "messages[0].name"),
    ({"messages": U, "tools": {}}, 400, "tools"),
    ({"messages": U, "tools": [{"type": "retrieval"}]}, 400, "tools[0].type"),
    ({"messages": U, "tools": [{"type": "function", "function": {}}]}, 400,
     "tools[0].function.name"),
    ({"messages": U, "tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]},
     400, "tools[0].function.parameters"),
    ({"messages": U, "tool_choice": "required"}, 400, "tool_choice"),
    ({"messages": U, "tools": [TOOL], "tool_choice": "sometimes"}, 400, "tool_choice"),
    ({"messages": U, "tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "x"}}},
     400, "tool_choice"),
    ({"messages": U, "parallel_tool_calls": "yes"}, 400, "parallel_tool_calls"),
    ({"messages": U, "chat_template_kwargs": []}, 400, "chat_template_kwargs"),
    ({"messages": U, "temperature": -1}, 400, "temperature"),
    ({"messages": U, "top_p": 1.5}, 400, "top_p"),
    ({"messages": U, "n": 0}, 400, "n"),
    ({"messages": U, "max_tokens": 0}, 400, "max_tokens"),
    ({"messages": U, "max_completion_tokens": -5}, 400, "max_completion_tokens"),
    ({"messages": U, "logprobs": 1}, 400, "logprobs"),
    ({"messages": U, "top_logprobs": 3}, 400, "top_logprobs"),
    ({"messages": U, "logprobs": True, "top_logprobs": 25}, 400, "top_logprobs"),
    ({"messages": U, "stop": [1]}, 400, "stop"),
    ({"messages": U, "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
    ({"messages": U, "stream": "yes"}, 400, "stream"),
    ({"messages": U, "stream_options": {"include_usage": True}}, 400, "stream_options"),
    ({"messages": U, "response_format": {"type": "json_schema"}}, 400, "response_format"),
    ({"messages": U, "audio": {"voice": "x"}}, 400, "audio"),
    ({"messages": U, "modalities": ["text", "audio"]}, 400, "modalities"),
    ({"messages": U, "functions": [{"name": "f"}]}, 400, "functions"),
    ({"messages": U, "function_call": "auto"}, 400, "function_call"),
    ({"messages": U, "prediction": {"type": "content"}}, 400, "prediction"),
    ({"messages": U, "store": True}, 400, "store"),
    ({"messages": U, "reasoning_effort": "high"}, 400, "reasoning_effort"),
    ({"messages": U, "logit_bias": {"abc": 1}}, 400, "logit_bias"),
    ({"messages": U, "seed": "1"}, 400, "seed"),
    ({"messages": U, "model": "gpt-4o"}, 404, "model"),
    ({"messages": U, "max_tokens": 5000}, 400, "max_tokens"),
]


@test
def invalid_requests_name_their_param_and_leave_the_server_healthy():
    s = null()
    assert len(INVALID) >= 40
    for body, status, param in INVALID:
        r = chat(s, **body)
        assert r.status == status, (body, r.status, r.body)
        err = r.json()["error"]
        assert err["param"] == param, (body, err)
        assert err["message"] and err["type"], err
        assert s.health()[0] == 200
    r = s.request("POST", "/v1/chat/completions", body="{not json")
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_json"


@test
def non_stream_shape_and_usage():
    r = chat(null(), messages=U, max_tokens=5)
    assert r.status == 200, r.body
    j = r.json()
    assert j["object"] == "chat.completion" and j["id"].startswith("chatcmpl-")
    ch = j["choices"][0]
    assert ch["message"]["role"] == "assistant" and ch["finish_reason"] == "length"
    assert ch["message"]["content"].count("tok") == 5
    assert j["usage"]["completion_tokens"] == 5 and j["usage"]["prompt_tokens"] > 5


@test
def stream_role_first_then_content_then_finish_and_usage():
    r = chat(null(), messages=U, max_tokens=4, stream=True, n=2,
             stream_options={"include_usage": True})
    ev = sse_events(r.body)
    assert ev[-1] == "[DONE]"
    chunks = [json.loads(e) for e in ev[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    for i in (0, 1):
        mine = [c["choices"][0] for c in chunks if c["choices"] and c["choices"][0]["index"] == i]
        assert mine[0]["delta"] == {"role": "assistant", "content": ""}, mine[0]
        assert mine[-1]["finish_reason"] == "length" and mine[-1]["delta"] == {}
        assert "".join(m["delta"].get("content", "") for m in mine).count("tok") == 4
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 8


@test
def streamed_text_equals_non_streamed_greedy_text():
    body = dict(messages=U, max_tokens=24, temperature=0)
    j = chat(cpu(), **body).json()
    full = j["choices"][0]["message"]["content"]
    ev = sse_events(chat(cpu(), stream=True, **body).body)
    text = "".join(json.loads(e)["choices"][0]["delta"].get("content", "")
                   for e in ev[:-1] if json.loads(e)["choices"])
    assert text == full and len(full) > 0, (text, full)
    j3 = chat(cpu(), n=3, **body).json()
    assert [c["message"]["content"] for c in j3["choices"]] == [full] * 3


@test
def logprobs_in_chat_shape():
    j = chat(cpu(), messages=U, max_tokens=3, temperature=0, logprobs=True, top_logprobs=2).json()
    lp = j["choices"][0]["logprobs"]["content"]
    assert len(lp) == 3
    for e in lp:
        assert e["logprob"] <= 0 and bytes(e["bytes"]).decode("utf-8", "replace") == e["token"]
        assert len(e["top_logprobs"]) == 2 and e["top_logprobs"][0]["logprob"] == e["logprob"]


@test
def apply_template_renders_as_python_jinja2():
    sys.path.insert(0, os.path.join(shared(), "chat-templates"))
    try:
        import jinja2  # noqa: F401
    except ImportError:  # Debian's python3-jinja2 (scripts/deps.sh) when this python lacks it
        sys.path.append("/usr/lib/python3/dist-packages")
    import oracle  # noqa: E402
    src = open(QWEN).read()
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "A joke?"}]
    tool = json.loads(json.dumps(TOOL))
    tool["function"]["parameters"]["properties"]["days"] = {"type": "number", "minimum": 1.0}
    r = qwen().request("POST", "/apply-template", body=json.dumps({"messages": msgs, "tools": [tool]}))
    assert r.status == 200, r.body
    assert '"minimum": 1.0' in r.json()["prompt"], "a float stays a float, as in Python"
    ok, want = oracle.render(src, oracle.llamacpp_context(src, msgs, tools=[tool]))
    assert ok and r.json()["prompt"] == want, (r.json()["prompt"], want)


@test
def a_template_that_raises_is_a_400_with_its_message():
    gemma = os.path.join(TEMPLATES, "google-gemma-2-2b-it.jinja")
    with Server("--chat-template", gemma) as s:
        r = chat(s, messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
        assert r.status == 400, r.body
        err = r.json()["error"]
        assert "alternate" in err["message"] and err["param"] == "messages", err
        assert s.health()[0] == 200


@test
def tool_round_trip_is_accepted_and_rendered():
    msgs = U + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]
    r = qwen().request("POST", "/apply-template", body=json.dumps({"messages": msgs, "tools": [TOOL]}))
    p = r.json()["prompt"]
    assert '{"name": "get_weather", "arguments": {"city": "Paris"}}' in p, p
    assert "<tool_response>\n18 C\n</tool_response>" in p, p
    j = chat(qwen(), messages=msgs, tools=[TOOL], max_tokens=4, temperature=0).json()
    assert j["choices"][0]["finish_reason"] in ("length", "stop", "tool_calls"), j


@test
def kwargs_reach_the_template():
    qwen3 = os.path.join(TEMPLATES, "Qwen-Qwen3-0.6B.jinja")
    with Server("--chat-template", qwen3) as s:
        on = s.request("POST", "/apply-template", body=json.dumps({"messages": U})).json()["prompt"]
        off = s.request("POST", "/apply-template", body=json.dumps(
            {"messages": U, "chat_template_kwargs": {"enable_thinking": False}})).json()["prompt"]
        assert off.endswith("<think>\n\n</think>\n\n") and not on.endswith("</think>\n\n"), (on, off)


@test
def the_request_id_names_the_completion_and_is_escaped():
    rid = 'my "id" \\ 42'
    for path, body in (("/v1/chat/completions", {"messages": U, "max_tokens": 2}),
                       ("/v1/completions", {"prompt": "a", "max_tokens": 2})):
        r = null().request("POST", path, body=json.dumps(body), headers={"X-Request-Id": rid})
        assert r.status == 200 and r.header("x-request-id") == rid, r.headers
        j = r.json()  # valid JSON although the id holds a quote and a backslash
        assert j["id"].endswith(rid) and j["id"].split("-")[0] in ("chatcmpl", "cmpl"), j["id"]
        ev = sse_events(null().request("POST", path, body=json.dumps(dict(body, stream=True)),
                                       headers={"X-Request-Id": rid}).body)
        assert all(json.loads(e)["id"].endswith(rid) for e in ev[:-1])


TWO_CALLS = ('Sure.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
             '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>')


def scripted(reply, template=QWEN):
    """The null backend answering every request with `reply` (aidreams260K's vocabulary)."""
    return Server("--model", MODEL, "--null-reply", reply, "--chat-template", template)


def stream_deltas(s, body):
    ev = sse_events(chat(s, stream=True, **body).body)
    assert ev[-1] == "[DONE]"
    return [json.loads(e)["choices"][0] for e in ev[:-1]]


@test
def tool_calls_parsed_streamed_and_not():
    with scripted(TWO_CALLS) as s:
        body = {"messages": U, "tools": [TOOL]}
        j = chat(s, **body).json()["choices"][0]
        assert j["finish_reason"] == "tool_calls", j
        calls = j["message"]["tool_calls"]
        assert [c["function"]["name"] for c in calls] == ["get_weather", "get_weather"]
        assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Paris"},
                                                                          {"city": "Rome"}]
        assert all(c["id"].startswith("call_") and c["type"] == "function" for c in calls)
        assert j["message"]["content"].strip() == "Sure."
        d = stream_deltas(s, body)
        sc = [t for x in d for t in x["delta"].get("tool_calls", [])]
        # as OpenAI streams them: id and name in a call's first delta, then argument
        # fragments; a client joins them by index
        firsts = [t for t in sc if "id" in t]
        assert [t["index"] for t in firsts] == [0, 1], sc
        assert all(t["function"]["name"] == "get_weather" for t in firsts)
        args = ["", ""]
        for t in sc:
            args[t["index"]] += t["function"].get("arguments", "")
        assert [json.loads(a) for a in args] == [{"city": "Paris"}, {"city": "Rome"}]
        assert len(sc) > 2, "arguments in fragments"
        assert "".join(x["delta"].get("content", "") for x in d).strip() == "Sure."
        assert d[-1]["finish_reason"] == "tool_calls"
        one = chat(s, parallel_tool_calls=False, **body).json()["choices"][0]["message"]
        assert len(one["tool_calls"]) == 1, one
        none = chat(s, tool_choice="none", **body).json()["choices"][0]
        assert "tool_calls" not in none["message"] and "<tool_call>" in none["message"]["content"]
        assert none["finish_reason"] == "stop"
        plain = chat(s, messages=U).json()["choices"][0]  # no tools offered: stays text
        assert "tool_calls" not in plain["message"], plain


@test
def malformed_tool_call_output_stays_content():
    bad = 'x<tool_call>\n{"name": "get_weather", "arguments": {"city": </tool_call>'
    with scripted(bad) as s:
        j = chat(s, messages=U, tools=[TOOL]).json()["choices"][0]
        assert "tool_calls" not in j["message"] and j["finish_reason"] == "stop", j
        assert "<tool_call>" in j["message"]["content"]


@test
def qwen3_thinking_is_reasoning_content():
    qwen3 = os.path.join(TEMPLATES, "Qwen-Qwen3-0.6B.jinja")
    with scripted("<think>\nhmm, the sea\n</think>\n\nIt is blue.", qwen3) as s:
        m = chat(s, messages=U).json()["choices"][0]["message"]
        assert m["reasoning_content"] == "hmm, the sea" and m["content"] == "It is blue.", m
        d = stream_deltas(s, {"messages": U})
        assert "".join(x["delta"].get("reasoning_content", "") for x in d) == "hmm, the sea"
        assert "".join(x["delta"].get("content", "") for x in d) == "It is blue."


THINK = """{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
<think>
{% endif %}"""


@test
def thinking_output_is_reasoning_content_streamed_and_not():
    """A template whose generation prompt opens <think> (as DeepSeek-R1's does): the model's
    text is reasoning_content, and equals what /v1/completions makes of the same prompt."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as f:
        f.write(THINK)
    try:
        with Server("--model", MODEL, "--threads", "2", "--chat-template", f.name,
                    backend="cpu") as s:
            body = dict(messages=[{"role": "user", "content": "Hi"}], max_tokens=40,
                        temperature=0.8, seed=3)
            m = chat(s, **body).json()["choices"][0]["message"]
            prompt = s.request("POST", "/apply-template", body=json.dumps(body)).json()["prompt"]
            raw = s.complete(prompt=prompt, max_tokens=40, temperature=0.8, seed=3).json()
            assert m["content"] == "" and m["reasoning_content"] == raw["choices"][0]["text"].strip(), (m, raw)
            ev = [json.loads(e) for e in sse_events(chat(s, stream=True, **body).body)[:-1]]
            deltas = [e["choices"][0]["delta"] for e in ev]
            assert "".join(d.get("reasoning_content", "") for d in deltas) == m["reasoning_content"]
            assert not any(d.get("content") for d in deltas)
    finally:
        os.unlink(f.name)


@test
def a_named_tool_choice_offers_only_that_tool():
    other = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
    body = {"messages": U, "tools": [TOOL, other]}
    both = qwen().request("POST", "/apply-template", body=json.dumps(body)).json()["prompt"]
    assert "get_time" in both and "get_weather" in both
    body["tool_choice"] = {"type": "function", "function": {"name": "get_time"}}
    one = qwen().request("POST", "/apply-template", body=json.dumps(body)).json()["prompt"]
    assert "get_time" in one and "get_weather" not in one, one


if __name__ == "__main__":
    rc = run()
    for s in (NULL, CPU, QNULL):
        if s:
            s.stop()
    sys.exit(rc)
