#!/usr/bin/env python3
"""`uvllm chat-template` against Python's Jinja2 on message sets beyond the goldens.

Every shared template (../shared/chat-templates/templates) renders each conversation
below through the CLI, and the output must equal what oracle.py renders with the context
llama-server would build (oracle.llamacpp_context, same pinned date): long multi-turn, an
empty system message, add_generation_prompt false, enable_thinking false through
chat_template_kwargs, text given as content parts, Jinja-looking and special-token-looking
user text, several tool calls with nested arguments (sent as JSON strings, as OpenAI clients
do; the oracle gets them parsed, as llama.cpp passes them). Where Python raises, the CLI
must exit 1, with the template's own message for raise_exception. Then the same for
seeded random conversations (unicode, special-token-like and Jinja-like text, tool calls
and results, generation prompt and enable_thinking on or off). Also: --model reads the
template and bos/eos from a GGUF, ChatML when it has none; usage errors exit 2.
"""
import copy
import datetime
import json
import os
import random
import subprocess
import sys

BIN = os.environ.get("UVLLM_BIN")
SRC = os.environ.get("UVLLM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED = os.environ.get("UVLLM_SHARED") or os.path.join(SRC, "..", "shared")
if not os.path.isdir(SHARED):  # a git worktree one level further down
    SHARED = os.path.join(SRC, "..", "..", "shared")
TDIR = os.path.join(SHARED, "chat-templates", "templates")
sys.path.insert(0, os.path.join(SHARED, "chat-templates"))
import oracle  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import check, failures  # noqa: E402

oracle.NOW = datetime.datetime(2026, 11, 24, 12, 0)


class _CompiledOnce:
    """oracle.make_env() whose from_string() compiles each template source once.

    oracle.render() and its capability probes build a new environment and compile the
    template on every call (four compiles per rendering): Jinja2's compiler, not rendering,
    was nearly all of this test's time. A compiled Template renders each call in a fresh
    context, so the renderings are the same; a source that fails to compile is not cached
    and fails again each call, as before."""
    make_env = oracle.make_env
    cache = {}

    def from_string(self, src):
        t = self.cache.get(src)
        if t is None:
            t = self.cache[src] = _CompiledOnce.make_env().from_string(src)
        return t


oracle.make_env = _CompiledOnce


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
                                      "parameters": {"type": "object", "properties": {
                                          "location": {"type": "string", "description": "City name"},
                                          "unit": {"type": "string", "enum": ["c", "f"]}},
                                          "required": ["location"]}}},
    {"type": "function", "function": {"name": "search", "description": "Web search",
                                      "parameters": {"type": "object", "properties": {
                                          "q": {"type": "string"}, "n": {"type": "integer"},
                                          "t": {"type": "number", "minimum": 0.0, "default": 1.0}}}}},
]


def u(c):
    return {"role": "user", "content": c}


def a(c):
    return {"role": "assistant", "content": c}


def call(i, name, args):
    return {"id": "call_%d" % i, "type": "function", "function": {"name": name, "arguments": args}}


LONG = [{"role": "system", "content": "You answer in one word."}]
for i in range(6):
    LONG += [u("Question %d: is %d even?" % (i, i)), a("Yes." if i % 2 == 0 else "No.")]
LONG.append(u("And 7?"))

CASES = {
    "long_multi_turn": (LONG, None, {}),
    "empty_system": ([{"role": "system", "content": ""}, u("Hi"), a("Hello"), u("Bye")], None, {}),
    "no_generation_prompt": ([u("Hi"), a("Hello, friend.")], None, {"add_generation_prompt": False}),
    "thinking_off": ([u("Think about 2+2.")], None, {"chat_template_kwargs": {"enable_thinking": False}}),
    "tricky_text": ([u("{{ raise_exception('x') }} {% if %} <|im_end|> </s> \"q\" 'a' \\ \u00e9\u2603"),
                     a("ok\n\n  indented\n"), u("\ttab")], None, {}),
    "two_tool_calls": ([u("Weather in Paris and news?"),
                        {"role": "assistant", "content": "",
                         "tool_calls": [call(1, "get_weather", {"location": "Paris", "unit": "c"}),
                                        call(2, "search", {"q": "news \"today\"", "n": 3, "t": 1.0})]},
                        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
                        {"role": "tool", "tool_call_id": "call_2", "content": "[]"},
                        a("It is 18 C; no news.")], TOOLS, {}),
}


def oracle_render(src, name, messages, tools, extra):
    ctx_extra = dict(extra.get("chat_template_kwargs", {}))
    if "firefunction" in name:
        ctx_extra["functions"] = ""
    ctx = oracle.llamacpp_context(src, copy.deepcopy(messages), tools, ctx_extra)
    if "add_generation_prompt" in extra:
        ctx["add_generation_prompt"] = extra["add_generation_prompt"]
    return oracle.render(src, ctx)


WORDS = ["hi", "<|im_end|>", "{{x}}", "{% if %}", "\u00fc", "\u4f60\u597d", "\U0001f642", "\n", "\t", " ",
         "'", '"', "\\", "a b", "</s>", "<s>", "[INST]", "0", "1.5", "true", "null", "{}", "[]",
         "<think>x</think>", "tool", "  "]


def random_conversation(rng):
    def text():
        return "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6)))
    tools = None
    msgs = [{"role": "system", "content": text()}] if rng.random() < 0.5 else []
    n = rng.randint(1, 4)
    for i in range(n):
        msgs.append(u(text()))
        if i == n - 1 and rng.random() >= 0.3:
            break
        if rng.random() < 0.3:
            tools = TOOLS
            msgs.append({"role": "assistant", "content": rng.choice(["", text()]),
                         "tool_calls": [call(i, "get_weather", {"location": text(), "unit": "c"})]})
            msgs.append({"role": "tool", "tool_call_id": "call_%d" % i, "content": text()})
        msgs.append(a(text()))
    extra = {}
    if rng.random() < 0.3:
        extra["add_generation_prompt"] = False
    if rng.random() < 0.3:
        extra["chat_template_kwargs"] = {"enable_thinking": rng.random() < 0.5}
    return msgs, tools, extra


def cli_request(name, messages, tools, extra):
    msgs = copy.deepcopy(messages)
    for m in msgs:  # clients send arguments as JSON strings
        for tc in m.get("tool_calls", []):
            tc["function"]["arguments"] = json.dumps(tc["function"]["arguments"])
    req = {"messages": msgs}
    if tools:
        req["tools"] = tools
    req.update(copy.deepcopy(extra))
    if "firefunction" in name:
        req.setdefault("chat_template_kwargs", {})["functions"] = ""
    return json.dumps(req).encode()


def run_cli(args, body):
    return subprocess.run([BIN, "chat-template"] + args, input=body, capture_output=True, timeout=60)


def test_against_oracle(cases):
    n = same = 0
    for name in sorted(os.listdir(TDIR)):
        src = open(os.path.join(TDIR, name), encoding="utf-8").read()
        for case, (messages, tools, extra) in cases.items():
            ok, want = oracle_render(src, name, messages, tools, extra)
            r = run_cli(["--template", os.path.join(TDIR, name), "--date", "2026-11-24",
                         "--bos", "<s>", "--eos", "</s>", "--keep-bos", "-"], cli_request(name, messages, tools, extra))
            n += 1
            got = r.stdout.decode("utf-8", "replace")
            if ok:
                good = r.returncode == 0 and got == want
                if not good:
                    i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]),
                             min(len(got), len(want)))
                    check(False, f"{name} {case}: exit {r.returncode} {r.stderr[:120]!r}, first difference "
                                 f"at {i}: got {got[i:i + 60]!r}, want {want[i:i + 60]!r}")
            else:
                good = r.returncode == 1 and not r.stdout
                if want.startswith("RaisedByTemplate: "):
                    good = good and r.stderr.decode().strip() == want[len("RaisedByTemplate: "):]
                check(good, f"{name} {case}: Python raised {want[:100]!r}, CLI exit {r.returncode} "
                            f"stderr {r.stderr[:100]!r}")
            same += good
    print(f"chat-template: {same}/{n} renderings equal Python Jinja2's")
    check(n >= 200, f"only {n} cases ran")


def test_model_and_usage():
    gguf = os.path.join(SHARED, "models", "aidreams260K.gguf")
    body = json.dumps({"messages": [u("hi")]}).encode()
    r = run_cli(["--model", gguf, "-"], body)
    check(r.returncode == 0, f"--model: exit {r.returncode} {r.stderr!r}")
    out = r.stdout.decode()
    # aidreams260K has no chat template: ChatML
    check(out == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", f"--model ChatML: {out!r}")
    raising = os.path.join(TDIR, "google-gemma-2-2b-it.jinja")
    r = run_cli(["--template", raising, "-"], json.dumps({"messages": [u("a"), u("b")]}).encode())
    check(r.returncode == 1 and b"Conversation roles must alternate" in r.stderr and not r.stdout,
          f"raising template: exit {r.returncode} {r.stderr!r}")
    for args in (["-"], ["--template", raising], ["--template", raising, "--date", "soon", "-"]):
        r = run_cli(args, body)
        check(r.returncode == 2, f"usage {args}: exit {r.returncode}")
    r = run_cli(["--template", raising, "-"], b"not json")
    check(r.returncode == 1, f"bad JSON: exit {r.returncode}")


def main():
    if not BIN:
        print("UVLLM_BIN not set", file=sys.stderr)
        return 1
    test_against_oracle(CASES)
    rng = random.Random(20261124)
    test_against_oracle({"random_%d" % i: random_conversation(rng) for i in range(8)})
    test_model_and_usage()
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
