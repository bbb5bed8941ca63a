"""Structured output on the wire and forced tool calls, on the real binary:
llama-server's "grammar" and "json_schema", vLLM's "structured_outputs" (regex, choice,
grammar, json) and guided_*, each honoured or a 400 naming what did not compile; more than
one is a 400; tool_choice "required" / named always yields a tool call whose arguments
validate (qwen2-tiny-f16, random weights: the grammar does all the work); a forced call with
a response_format is refused. Also issue 25's smaller points: a developer message reaches
the template as system, tools with no template that renders them get the Hermes fallback,
GET /v1/models/{id}, usage.prompt_tokens_details.cached_tokens, --null-reply needs the
null backend, and `uvllm chat-template` drops a leading BOS as the server does."""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Lazy, binary, main, shared, test  # noqa: E402

MODEL = os.path.join(shared(), "models", "qwen2-tiny-f16.gguf")
MSGS = [{"role": "user", "content": "Go."}]
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 6},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
           "required": ["city", "days"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "noop", "parameters": {"type": "object",
                                                                          "properties": {}}}}]


srv = Lazy("--model", MODEL, "--threads", "2", backend="cpu")


def post(path, body):
    return srv().post(path, body)


def chat(**body):
    r = post("/v1/chat/completions", dict({"messages": MSGS, "max_tokens": 60, "seed": 1}, **body))
    assert r.status == 200, r.body
    return r.json()["choices"][0]


def bad(path, body, param, words):
    r = post(path, body)
    assert r.status == 400, (body, r.body)
    err = r.json()["error"]
    assert err["param"] == param, r.body
    assert words in err["message"], (words, err["message"])


@test
def llama_server_grammar_and_json_schema_fields():
    c = chat(grammar='root ::= ("yes" | "no") "."', temperature=1)
    assert c["message"]["content"] in ("yes.", "no."), c
    assert c["finish_reason"] == "stop", c
    r = post("/v1/completions", {"prompt": "a", "max_tokens": 40, "seed": 2, "temperature": 1,
                                 "json_schema": {"type": "object", "properties": {
                                     "n": {"type": "integer", "minimum": 3, "maximum": 5}},
                                     "required": ["n"], "additionalProperties": False}})
    assert r.status == 200, r.body
    c = r.json()["choices"][0]
    if c["finish_reason"] == "stop":
        assert json.loads(c["text"])["n"] in (3, 4, 5), c


@test
def vllm_structured_outputs():
    c = chat(structured_outputs={"regex": "^[0-9]{3}-[a-z]{2}$"}, temperature=1)
    assert re.fullmatch(r"[0-9]{3}-[a-z]{2}", c["message"]["content"]), c
    c = chat(structured_outputs={"choice": ["sunny", "rainy", "snowy"]}, temperature=1)
    assert c["message"]["content"] in ("sunny", "rainy", "snowy"), c
    c = chat(structured_outputs={"grammar": 'root ::= [a-c]{4}'}, temperature=1)
    assert re.fullmatch(r"[a-c]{4}", c["message"]["content"]), c
    c = chat(guided_choice=["left", "right"], temperature=1)
    assert c["message"]["content"] in ("left", "right"), c
    c = chat(structured_outputs={"json": {"enum": ["a", 1, None]}}, temperature=1)
    assert json.loads(c["message"]["content"]) in ("a", 1, None), c


@test
def what_does_not_compile_is_a_400_naming_it():
    P = "/v1/chat/completions"
    base = {"messages": MSGS, "max_tokens": 4}
    bad(P, dict(base, grammar="root ::= valu"), "grammar", "undefined rule 'valu'")
    bad(P, dict(base, grammar="root ::= root \"a\" | \"b\""), "grammar", "left-recursive")
    bad(P, dict(base, structured_outputs={"regex": "(?=a)b"}), "structured_outputs",
        "lookaround")
    bad(P, dict(base, structured_outputs={"choice": []}), "structured_outputs", "non-empty")
    bad(P, dict(base, structured_outputs={"xml": 1}), "structured_outputs", "'xml'")
    bad(P, dict(base, json_schema={"type": "string", "format": "ipv9"}), "json_schema", "ipv9")
    bad(P, dict(base, grammar='root ::= "a"', response_format={"type": "json_object"}), "grammar",
        "cannot be combined")
    bad(P, dict(base, tools=TOOLS, tool_choice="required",
                response_format={"type": "json_object"}), "tool_choice", "cannot be combined")


@test
def forced_tool_calls_always_call_with_valid_arguments():
    for i, tc in enumerate(["required", {"type": "function", "function": {"name": "get_weather"}}]):
        for seed in range(1, 4):
            c = chat(tools=TOOLS, tool_choice=tc, parallel_tool_calls=False, temperature=1,
                     seed=seed, max_tokens=120)
            assert c["finish_reason"] == "tool_calls", c
            calls = c["message"]["tool_calls"]
            assert len(calls) == 1, c
            f = calls[0]["function"]
            if i == 1:
                assert f["name"] == "get_weather", c
            args = json.loads(f["arguments"])
            if f["name"] == "get_weather":
                assert set(args) == {"city", "days"} and len(args["city"]) <= 6, args
                assert isinstance(args["days"], int) and 1 <= args["days"] <= 7, args
            else:
                assert f["name"] == "noop" and args == {}, c
            assert c["message"]["content"] is None, c


@test
def developer_is_system_and_tools_get_the_hermes_fallback():
    r = post("/apply-template", {"messages": [{"role": "developer", "content": "Be terse."},
                                              {"role": "user", "content": "Hi"}], "tools": TOOLS})
    assert r.status == 200, r.body
    p = r.json()["prompt"]
    assert p.startswith("<|im_start|>system\nBe terse.\n\n# Tools\n<tools>"), p
    assert '"name": "get_weather"' in p and "<tool_call>" in p, p


@test
def a_model_by_its_id_and_cached_prompt_tokens():
    r = srv().request("GET", "/v1/models/qwen2-tiny-f16.gguf")
    assert r.status == 200, r.body
    m = r.json()
    assert m["id"] == "qwen2-tiny-f16.gguf" and m["object"] == "model", m
    assert srv().request("GET", "/v1/models/other").status == 404
    body = {"prompt": "lorem ipsum " * 40, "max_tokens": 2}
    r1, r2 = post("/v1/completions", body), post("/v1/completions", body)
    first, second = r1.json()["usage"], r2.json()["usage"]
    assert first["prompt_tokens_details"]["cached_tokens"] == 0, first
    cached = second["prompt_tokens_details"]["cached_tokens"]
    assert 0 < cached <= second["prompt_tokens"], second
    # the same number in a header, for proxies (docker/nginx logs it)
    assert r1.header("X-Uvllm-Cached-Tokens") == "0", r1.headers
    assert r2.header("X-Uvllm-Cached-Tokens") == str(cached), r2.headers


@test
def null_reply_needs_the_null_backend():
    p = subprocess.run([binary(), "serve", "--model", MODEL, "--null-reply", "x", "--port", "0"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "--null-reply needs the null backend" in p.stderr, p.stderr


@test
def chat_template_cli_drops_the_leading_bos_like_the_server():
    tmpl = os.path.join(shared(), "chat-templates", "templates")
    name = next(f for f in sorted(os.listdir(tmpl)) if "bos_token" in open(os.path.join(tmpl, f)).read())
    req = json.dumps({"messages": [{"role": "user", "content": "hi"}]})

    def cli(*extra):
        p = subprocess.run([binary(), "chat-template", "--template", os.path.join(tmpl, name),
                            "--bos", "<s>", *extra, "-"], input=req, capture_output=True,
                           text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        return p.stdout
    kept = cli("--keep-bos")
    assert kept.startswith("<s>"), (name, kept[:40])
    assert cli() == kept[3:], name


def jobs_total():
    m = re.search(r"^uvllm_jobs_total (\S+)$", srv().request("GET", "/metrics").body.decode(), re.M)
    return float(m.group(1))


@test
def small_structured_requests_compile_off_the_loop():
    # a 300-byte schema whose string maxLength of 400 compiles to thousands of states: the
    # request is a job (a pool thread) like a large body, so the loop keeps serving
    sch = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 400}},
           "required": ["note"], "additionalProperties": False}
    before = jobs_total()
    c = chat(response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": sch}},
             max_tokens=8)
    assert c["finish_reason"] in ("stop", "length"), c
    r = post("/v1/completions", {"prompt": "Go.", "max_tokens": 4, "json_schema": sch})
    assert r.status == 200, r.body
    assert jobs_total() == before + 2, (before, jobs_total())
    # a plain small request stays inline (a hop to the pool costs more than its work)
    chat(max_tokens=2)
    assert jobs_total() == before + 2


if __name__ == "__main__":
    main(srv)
