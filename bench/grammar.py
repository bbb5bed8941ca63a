"""Structured output's cost per token (issue 25), in one run, rounds interleaved, medians:

1. The mask (bench/grammar_mask.c): a document tokenized with the vocabulary's tokenizer is
   replayed through B matchers sharing one compiled grammar, and every step of every
   sequence builds the full allowed-token mask (the worst case: the sampler needs it only
   when the model's own choice is refused). Vocabularies: Qwen2's 151k (the
   Qwen2.5-1.5B-shaped model's) and GPT-2's 50k; grammars: a JSON Schema (person) and a
   GBNF grammar (a todo list); batch 1 and 16. "warm": the grammar's per-state token sets
   already built (a later request with the same schema: the server caches grammars by text);
   "cold": a freshly compiled grammar, its token sets built as states are first met.
2. The decode step it is compared with: `uvllm generate` on the Qwen2.5-1.5B-shaped Q4_K_M
   (random weights, the 151k vocabulary), 1 and 16 sequences (`--parallel`), 2 threads.
3. End to end against the peer on the same model and schema: llama-server's
   /completion with "json_schema" against without, and uvllm's /v1/completions with a
   json_schema response_format against without; per generated token, from each server's
   own timings (llama-server: timings.predicted_per_token_ms; uvllm: Server-Timing decode).

usage: python3 bench/grammar.py MODEL.gguf QWEN_VOCAB.gguf GPT2_VOCAB.gguf LLAMA_BIN ROUNDS OUT.md
"""
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from uvllm_harness import Server  # noqa: E402

model, vq, vg, llama_bin, rounds, out = sys.argv[1:7]
rounds = int(rounds)
uvllm = os.environ.get("UVLLM_BIN", os.path.join(HERE, "..", "build", "uvllm"))
mask_bin = os.path.join(HERE, "work", "grammar_mask")
G = os.path.join(HERE, "grammar")
GRAMMARS = {"JSON Schema (person)": ("person.schema.json", "person.json"),
            "GBNF (todo list)": ("todo.gbnf", "todo.txt")}
VOCABS = {"Qwen2 151k": vq, "GPT-2 50k": vg}
BATCHES = [1, 16]
N_GEN = 32


def mask_run(vocab, gram, doc, batch):
    p = subprocess.run([mask_bin, vocab, os.path.join(G, gram), os.path.join(G, doc), str(batch)],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    return {x.get("pass", "info"): x for x in lines}


def decode_step_ms(parallel):
    p = subprocess.run([uvllm, "generate", "--model", model, "--prompt", "hello", "--max-tokens",
                        str(N_GEN), "--threads", "2", "--parallel", str(parallel), "--json"],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout.strip().splitlines()[-1])
    return 1000.0 * parallel / j["decode_tokens_per_s"]


SCHEMA = json.load(open(os.path.join(G, "person.schema.json")))


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return r.headers, json.loads(r.read())


def llama_per_token(port, grammar, seed):
    body = {"prompt": "Describe a person:", "n_predict": N_GEN, "temperature": 1, "seed": seed,
            "ignore_eos": True}
    if grammar:
        body["json_schema"] = SCHEMA
    _, j = post(port, "/completion", body)
    return j["timings"]["predicted_per_token_ms"], j["timings"]["predicted_n"]


def uvllm_per_token(srv, grammar, seed):
    body = {"prompt": "Describe a person:", "max_tokens": N_GEN, "temperature": 1, "seed": seed}
    if grammar:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "p", "schema": SCHEMA}}
    else:
        body["ignore_eos"] = True
    r = srv.request("POST", "/v1/completions", body=json.dumps(body))
    assert r.status == 200, r.body
    n = r.json()["usage"]["completion_tokens"]
    timing = dict(part.split(";dur=") for part in r.header("server-timing").replace(" ", "").split(","))
    return float(timing["decode"]) / max(1, n - 1), n


def start_llama():
    port = 18000 + os.getpid() % 1000
    p = subprocess.Popen([os.path.join(llama_bin, "llama-server"), "-m", model, "--port", str(port),
                          "-t", "2", "-np", "1", "-c", "2048", "--log-disable"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return p, port
        except Exception:
            time.sleep(0.5)
    p.kill()
    raise SystemExit("llama-server did not start")


res = {}
dec = {1: [], 16: []}
e2e = {"llama": [], "llama_g": [], "uvllm": [], "uvllm_g": []}
load0 = os.getloadavg()
for r in range(rounds):
    for b in BATCHES:
        dec[b].append(decode_step_ms(b))
    for vn, v in VOCABS.items():
        for gn, (gram, doc) in GRAMMARS.items():
            for b in BATCHES:
                x = mask_run(v, gram, doc, b)
                res.setdefault((vn, gn, b), []).append(x)
    lp, lport = start_llama()
    try:
        for k in range(2):
            e2e["llama"].append(llama_per_token(lport, False, r * 10 + k)[0])
            e2e["llama_g"].append(llama_per_token(lport, True, r * 10 + k)[0])
    finally:
        lp.terminate()
        lp.wait(30)
    with Server("--model", model, "--threads", "2", backend="cpu") as s:
        for k in range(2):
            e2e["uvllm"].append(uvllm_per_token(s, False, r * 10 + k)[0])
            e2e["uvllm_g"].append(uvllm_per_token(s, True, r * 10 + k)[0])
    print(f"round {r + 1}/{rounds} done, load {os.getloadavg()}", file=sys.stderr)

med = statistics.median
D1, D16 = med(dec[1]), med(dec[16])
cpu = subprocess.run("lscpu | sed -n 's/^Model name:[[:space:]]*//p'", shell=True,
                     capture_output=True, text=True).stdout.strip()
lines = []
w = lines.append
w("## Structured output: the mask's cost per token (issue 25; bench/grammar.sh)")
w("")
flags = open("/proc/cpuinfo").read()
isa = os.environ.get("UVLLM_ISA") or ("avx512" if " avx512f" in flags else "avx2" if " avx2" in flags
                                      else "scalar")
w(f"- machine: {cpu}, {os.cpu_count()} cores, uvllm ISA {isa}; load average at "
  f"start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, at the end "
  f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} (a shared machine); {rounds} rounds, "
  "interleaved, medians")
w(f"- model: `{os.path.basename(model)}`: `uvllm synth --arch qwen2 --shape qwen2.5-1.5b "
  "--vocab ggml-vocab-qwen2.gguf --type q4_k_m` (random weights, Qwen2's 151,665-token "
  "vocabulary converted by tests/tokenizer/fetch_hf_vocabs.sh)")
w(f"- decode step (the 100% below): `uvllm generate --model M --prompt hello --max-tokens {N_GEN} "
  f"--threads 2 --parallel B --json`, step = B / decode_tokens_per_s: **{D1:.1f} ms** at "
  f"batch 1 ({', '.join(f'{x:.1f}' for x in dec[1])}), **{D16:.1f} ms** at batch 16 "
  f"({', '.join(f'{x:.1f}' for x in dec[16])})")
w("- mask: `bench/work/grammar_mask VOCAB GRAMMAR DOC B` (bench/grammar_mask.c): the document "
  "(bench/grammar/person.json, todo.txt) tokenized by the vocabulary and replayed through B "
  "matchers of one grammar, a full mask built at every step of every sequence on one thread "
  "(the server builds one only when the sampled token is refused, on the sampling threads: "
  "this is the worst case). Per step = the B masks of one decode step; % = of the decode step "
  "at that batch.")
w("")
w("| vocabulary | grammar | batch | steps | warm: mask per step, mean (median) | % of decode step | "
  "cold: mask per step, mean | % of decode step | compile ms | vocabulary index ms |")
w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for (vn, gn, b), xs in res.items():
    warm = med([x["warm"]["step_us_mean"] for x in xs])
    warm_med = med([x["warm"]["step_us_median"] for x in xs])
    cold = med([x["cold"]["step_us_mean"] for x in xs])
    comp = med([x["info"]["compile_ms"] for x in xs])
    vidx = med([x["info"]["vocab_index_ms"] for x in xs])
    d = D1 if b == 1 else D16
    w(f"| {vn} | {gn} | {b} | {xs[0]['warm']['steps']} | {warm:.1f} us ({warm_med:.1f}) | "
      f"{100 * warm / 1000 / d:.3f}% | {cold:.0f} us | {100 * cold / 1000 / d:.1f}% | "
      f"{comp:.1f} | {vidx:.0f} |")
w("")
L, LG, U, UG = (med(e2e[k]) for k in ("llama", "llama_g", "uvllm", "uvllm_g"))
w(f"End to end, same model, same JSON Schema, {N_GEN} tokens per request, temperature 1, "
  f"2 requests per server per round (ms per generated token; llama-server: "
  f"timings.predicted_per_token_ms of /completion with and without \"json_schema\"; uvllm: "
  f"Server-Timing decode / (tokens - 1) of /v1/completions with and without a json_schema "
  f"response_format; the schema's answers stop at the schema's end, the plain ones run with "
  f"ignore_eos):")
w("")
w("| server | no grammar | JSON Schema | grammar's cost per token |")
w("| --- | ---: | ---: | ---: |")
w(f"| llama-server ({os.path.basename(os.path.dirname(os.path.dirname(llama_bin)))}) | "
  f"{L:.1f} | {LG:.1f} | {LG - L:+.1f} ms ({100 * (LG - L) / L:+.1f}%) |")
w(f"| uvllm | {U:.1f} | {UG:.1f} | {UG - U:+.1f} ms ({100 * (UG - U) / U:+.1f}%) |")
w("")
w(f"- all values: llama {[round(x, 1) for x in e2e['llama']]}, llama+schema "
  f"{[round(x, 1) for x in e2e['llama_g']]}, uvllm {[round(x, 1) for x in e2e['uvllm']]}, "
  f"uvllm+schema {[round(x, 1) for x in e2e['uvllm_g']]}")
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
