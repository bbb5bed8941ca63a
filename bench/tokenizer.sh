#!/usr/bin/env bash
# Tokenizer throughput (issue 3): MB/s of `uvllm tokenize --no-bos -` vs
# llama.cpp's llama-tokenize on the same vocabulary file and the same ~4 MiB
# of mixed text (the tokenizer test strings of /work/shared/tokenizer plus the
# shared design docs, repeated), for SPM (llama-spm) and byte-level BPE
# (gpt-2). Each tool's start-up (process, vocabulary load) is measured on an
# empty input and subtracted; runs interleaved, medians. Also checks that
# both tools produce the same ids. Then the model open time: `uvllm info` on
# the ~1.2 GB TinyLlama-shaped q8_0 file (target < 50 ms).
# Writes the "tokenizer" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_dir "tokenizer" keep
need_shared tokenizer/ggml-vocab-llama-spm.gguf
need_shared tokenizer/ggml-vocab-gpt-2.gguf
TARGET_BYTES=$((4 * 1024 * 1024))
# TOK_CORPUS=repeated (default): a ~15 KB unit repeated, so per-call word
# caches hit often. TOK_CORPUS=distinct: 4 MiB of non-repeating text (the
# peer's own docs and sources), where they hit far less. Separate sections.
CORPUS="${TOK_CORPUS:-repeated}"

# The text: test strings (many scripts, whitespace runs, digits, emoji) plus
# prose, repeated up to 4 MiB. Same bytes for both tools.
python3 - "$SHARED" "$D/input.txt" "$TARGET_BYTES" "$CORPUS" "$WORK/llama.cpp" <<'PY'
import glob, sys
shared, out, target, corpus, llama = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
parts = open(f"{shared}/tokenizer/ggml-vocab-llama-spm.gguf.inp", "rb").read().split(b"\n__ggml_vocab_test__\n")
parts += [open(p, "rb").read() for p in sorted(glob.glob(f"{shared}/*.md"))]
if corpus == "distinct":
    files = []
    for g in ("docs/**/*.md", "src/*.cpp", "common/*.cpp", "tools/**/*.cpp", "ggml/src/*.c*"):
        files += sorted(glob.glob(f"{llama}/{g}", recursive=True))
    seen, parts = set(), []
    for p in files:
        b = open(p, "rb").read()
        if b not in seen:
            seen.add(b); parts.append(b)
unit = b"\n".join(parts)
if corpus == "distinct" and len(unit) < target:
    sys.exit(f"distinct corpus has only {len(unit)} bytes")
data = (unit * (target // len(unit) + 1))[:target]
data = data.decode("utf-8", "ignore").encode()  # cut on a code point boundary
open(out, "wb").write(data)
PY
: >"$D/empty.txt"
BYTES=$(stat -c %s "$D/input.txt")

have_uv=0; have_ll=0
uvllm_has tokenize && have_uv=1
[ -x "$LLAMA_BIN/llama-tokenize" ] && have_ll=1
LL_ARGS=(--stdin --ids --no-bos --log-disable --no-escape --no-parse-special)
spec="$D/spec.json"
python3 - "$spec" "$D" "$UVLLM_BIN" "$LLAMA_BIN/llama-tokenize" "$SHARED/tokenizer" "$have_uv" "$have_ll" "${LL_ARGS[@]}" <<'PY'
import json, sys
spec, d, uv, ll, tokdir, have_uv, have_ll = sys.argv[1:8]
ll_args = sys.argv[8:]
cmds = []
for v in ("llama-spm", "gpt-2"):
    vocab = f"{tokdir}/ggml-vocab-{v}.gguf"
    for inp in ("empty", "input"):
        if have_uv == "1":
            cmds.append({"name": f"uvllm/{v}/{inp}", "argv": [uv, "tokenize", "--model", vocab, "--no-bos", "-"],
                         "stdin": f"{d}/{inp}.txt", "stdout": f"{d}/uvllm-{v}-{inp}.out"})
        if have_ll == "1":
            cmds.append({"name": f"llama/{v}/{inp}", "argv": [ll, "-m", vocab] + ll_args,
                         "stdin": f"{d}/{inp}.txt", "stdout": f"{d}/llama-{v}-{inp}.out"})
json.dump(cmds, open(spec, "w"))
PY
if [ "$have_uv" = 1 ] || [ "$have_ll" = 1 ]; then
    python3 "$BENCH_DIR/timeit.py" "$RUNS" "$spec" >"$D/times.json"
else
    echo '{}' >"$D/times.json"
fi

# Model open time: `uvllm info` on the q8_0 TinyLlama-shaped file (~1.2 GB).
OPEN_NOTE=""
if ensure_models && uvllm_has info; then
    M="$(model_path q8_0)"
    echo "[{\"name\":\"info\",\"argv\":[\"$UVLLM_BIN\",\"info\",\"$M\"],\"stdout\":\"$D/info.out\"}]" >"$D/open.json"
    python3 "$BENCH_DIR/timeit.py" "$RUNS" "$D/open.json" >"$D/open-times.json" || echo '{}' >"$D/open-times.json"
    OPEN_NOTE="file $(basename "$M"), $(stat -c %s "$M") bytes"
else
    [ -n "$MODELS_NOTE" ] || MODELS_NOTE="\`uvllm info\` is not implemented in the benchmarked binary (repo HEAD $(uvllm_commit))"
    echo '{}' >"$D/open-times.json"
fi

sec="$D/section.md"
{
    echo "## Tokenizer throughput ($CORPUS text) and model open time"
    echo
    echo "- machine: $(machine_line)"
    echo "- uvllm: $(uvllm_commit); peer llama.cpp $(peer_commit)"
    if [ "$CORPUS" = distinct ]; then
        echo "- input: $BYTES bytes of non-repeating text (llama.cpp's docs/**/*.md, src/, common/, tools/ and ggml/src/ sources in that order, cut at 4 MiB); bench/work/tokenizer/input.txt"
    else
        echo "- input: $BYTES bytes of mixed text (llama.cpp tokenizer test strings + shared docs, a ~15 KB unit repeated); bench/work/tokenizer/input.txt. uvllm's tokenizer caches merged words per call, which repetition favours: see the distinct-text section (\`TOK_CORPUS=distinct bench/tokenizer.sh\`)."
    fi
    echo "- commands: \`uvllm tokenize --model VOCAB --no-bos - < input.txt\` and \`llama-tokenize -m VOCAB ${LL_ARGS[*]} < input.txt\`; start-up measured with the same command on an empty input and subtracted; $RUNS interleaved runs after one warm-up; medians."
    echo
    python3 - "$D" "$BYTES" "$have_uv" "$have_ll" "$(uvllm_commit)" <<'PY'
import json, statistics, sys
d, nbytes, have_uv, have_ll, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
t = json.load(open(f"{d}/times.json"))
def med(k):
    v = [x for x in t.get(k, []) if x is not None]
    return statistics.median(v) if v else None
def ids(path, fmt):
    try:
        s = open(path).read()
    except OSError:
        return None
    return s.replace("[", " ").replace("]", " ").replace(",", " ").split()
print("| vocabulary | tool | full input s (median) | empty input s (start-up) | tokens | MB/s (1e6 B, start-up subtracted) |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
rates = {}
for v in ("llama-spm", "gpt-2"):
    for tool, have in (("uvllm", have_uv), ("llama", have_ll)):
        name = "llama-tokenize" if tool == "llama" else "uvllm tokenize"
        if have != "1":
            why = f"not ready: `uvllm tokenize` is not implemented in the benchmarked binary (repo HEAD {commit})" if tool == "uvllm" else "llama-tokenize not built"
            print(f"| {v} | {name} | — | — | — | {why} |"); continue
        full, empty = med(f"{tool}/{v}/input"), med(f"{tool}/{v}/empty")
        toks = ids(f"{d}/{tool}-{v}-input.out", tool)
        if full is None or empty is None:
            print(f"| {v} | {name} | failed (see stderr of the run) | | | |"); continue
        rate = nbytes / 1e6 / (full - empty) if full > empty else float("nan")
        rates[(v, tool)] = rate
        print(f"| {v} | {name} | {full:.3f} | {empty:.3f} | {len(toks) if toks is not None else '?'} | {rate:.2f} |")
print()
for v in ("llama-spm", "gpt-2"):
    a, b = rates.get((v, "uvllm")), rates.get((v, "llama"))
    same = ""
    if a is not None and b is not None:
        x, y = ids(f"{d}/uvllm-{v}-input.out", "uvllm"), ids(f"{d}/llama-{v}-input.out", "llama")
        same = "identical ids" if x == y else f"**ids differ** ({len(x)} vs {len(y)} tokens)"
        print(f"- {v}: ratio uvllm / llama.cpp throughput **{a / b:.2f}**; {same}")
    else:
        print(f"- {v}: ratio not measured (one side not ready)")
PY
    echo
    ot=$(python3 -c 'import json,statistics,sys; v=[x for x in json.load(open(sys.argv[1])).get("info",[]) if x is not None]; print(f"{statistics.median(v)*1000:.1f}" if v else "")' "$D/open-times.json")
    if [ -n "$ot" ]; then
        echo "- model open: \`uvllm info $(model_path q8_0 | sed "s|$ROOT/||")\` ($OPEN_NOTE; models $MODELS_SRC), whole process, warm page cache, median of $RUNS: **$ot ms** (target < 50 ms: $(awk -v t="$ot" 'BEGIN{print (t+0 < 50) ? "met" : "MISSED"}'))"
    else
        echo "- model open time: not measured (${MODELS_NOTE:-uvllm info failed})"
    fi
} >"$sec"
results_section "tokenizer-$CORPUS" "$sec"
cat "$sec"
