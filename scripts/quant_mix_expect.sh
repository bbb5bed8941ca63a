#!/usr/bin/env bash
# Records which type llama-quantize gives every tensor of a model for each recipe uvllm
# implements (Q4_K_M, Q5_K_M, Q6_K, IQ4_NL, IQ4_XS; no importance matrix), as the
# expectation tests/unit/model/test_quant_mix.c holds `uvllm quantize`'s mix to.
# Uses `llama-quantize --dry-run` (types only, nothing written). For models under 64 MB it
# also quantizes for real and appends the output's SHA-256 to OUT_DIR/llama-quantize.sha256
# ("hash  model  recipe"): `uvllm quantize` writes the same bytes
# (tests/integration/test_quantize_mix.py).
#
#   scripts/quant_mix_expect.sh LLAMA_BIN_DIR OUT_DIR MODEL.gguf...
#
# Writes OUT_DIR/<model basename>.tsv: "# key value" lines with the hyperparameters the
# rules read (arch, block_count, expert_count, head_count, head_count_kv), then one line
# per tensor in llama-quantize's order: name, n_dims, ne0, its input type, then the type
# per recipe (ggml names, lower case; a tensor left alone shows its input type).
set -euo pipefail
BIN="$1"
OUT="$2"
shift 2
RECIPES=(Q4_K_M Q5_K_M Q6_K IQ4_NL IQ4_XS)
mkdir -p "$OUT"
SUMS="$OUT/llama-quantize.sha256"
: >"$SUMS"
for model in "$@"; do
    base="$(basename "$model" .gguf)"
    tmp="$(mktemp -d)"
    for r in "${RECIPES[@]}"; do
        "$BIN/llama-quantize" --dry-run "$model" "$r" >"$tmp/$r.log" 2>&1 ||
            { echo "llama-quantize failed on $model $r" >&2; cat "$tmp/$r.log" >&2; exit 1; }
    done
    python3 - "$tmp" "$OUT/$base.tsv" "$model" "${RECIPES[@]}" <<'EOF'
import re, sys, os
tmp, out, model, recipes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
kv_re = re.compile(r"- kv +\d+: +(\S+) +\S+ += (.*)$")
row_re = re.compile(r"^\[ *\d+/ *\d+\] (\S+) +- \[([ \d,]+)\], type = +(\S+),.*?(?:\((\w+)\))?$")
hp, rows = {}, {}
order = []
for r in recipes:
    for line in open(os.path.join(tmp, r + ".log")):
        line = line.rstrip("\n")
        m = kv_re.search(line)
        if m and r == recipes[0]:
            k, v = m.group(1), m.group(2).strip()
            if k == "general.architecture":
                hp["arch"] = v
            for key in ("block_count", "expert_count", "attention.head_count",
                        "attention.head_count_kv"):
                if k.endswith("." + key):
                    hp[key] = v
            continue
        m = row_re.match(line)
        if not m:
            continue
        name, dims, tin, tout = m.group(1), m.group(2), m.group(3), m.group(4)
        ne = [int(x) for x in dims.split(",")]
        n_dims = max([i + 1 for i, x in enumerate(ne) if x > 1] or [1])
        if name not in rows:
            order.append(name)
            rows[name] = [str(n_dims), str(ne[0]), tin.lower()]
        rows[name].append((tout or tin).lower())
with open(out, "w") as f:
    f.write("# written by scripts/quant_mix_expect.sh from llama-quantize --dry-run\n")
    f.write("# model %s\n" % os.path.basename(model))
    for k in ("arch", "block_count", "expert_count", "attention.head_count",
              "attention.head_count_kv"):
        f.write("# %s %s\n" % (k, hp.get(k, "0")))
    f.write("# name\tn_dims\tne0\tinput\t%s\n" % "\t".join(x.lower() for x in recipes))
    for n in order:
        if len(rows[n]) != 3 + len(recipes):
            sys.exit("tensor %s missing from a recipe's log" % n)
        f.write("%s\t%s\n" % (n, "\t".join(rows[n])))
EOF
    if [ "$(stat -c %s "$model")" -lt $((64 << 20)) ]; then
        for r in "${RECIPES[@]}"; do
            "$BIN/llama-quantize" "$model" "$tmp/out.gguf" "$r" 1 >"$tmp/q.log" 2>&1 ||
                { cat "$tmp/q.log" >&2; exit 1; }
            echo "$(sha256sum <"$tmp/out.gguf" | cut -d' ' -f1)  $(basename "$model")  ${r,,}" >>"$SUMS"
        done
    fi
    rm -rf "$tmp"
    echo "wrote $OUT/$base.tsv" >&2
done
