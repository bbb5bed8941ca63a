"""make test-arm64: the arm64 `uvllm serve` (run through qemu-aarch64 by the UVLLM_BIN
wrapper tests/arm64/run.sh writes) answers a chat request on the cpu backend, with the
AArch64 kernels (its log names the ISA: neon, dotprod or i8mm, from QEMU_CPU). Greedy, so
the answer is the same on every run of one binary and CPU model."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import uvllm_harness as h  # noqa: E402

MODEL = os.path.join(h.shared(), "models", "aidreams260K.gguf")
WANT_ISA = os.environ.get("UVLLM_WANT_ISA", "")


@h.test
def chat_request_answered_with_arm_kernels():
    with h.Server("--model", MODEL, "--threads", "2", backend="cpu") as s:
        body = {"messages": [{"role": "user", "content": "Tell me about the sea."}],
                "max_tokens": 8, "temperature": 0}
        r = s.request("POST", "/v1/chat/completions", body=json.dumps(body), timeout=120)
        assert r.status == 200, r.body
        j = r.json()
        assert j["object"] == "chat.completion", j
        msg = j["choices"][0]["message"]
        assert msg["role"] == "assistant" and msg["content"], j
        assert j["usage"]["completion_tokens"] > 0, j
        again = s.request("POST", "/v1/chat/completions", body=json.dumps(body), timeout=120)
        assert again.json()["choices"][0]["message"]["content"] == msg["content"], "not greedy"
        log = "".join(s.log)
        assert WANT_ISA and f"{WANT_ISA} kernels" in log, \
            f"server log does not name the {WANT_ISA!r} kernels:\n{log[-2000:]}"
        print(f"  {WANT_ISA}: {msg['content']!r}", flush=True)


if __name__ == "__main__":
    sys.exit(h.run())
