"""Reads back the files of lib.sh's peer_rounds: per-round llama-bench and uvllm generate
JSON in one directory. Imported by the Python summaries of bench/moe.sh and
bench/engine_qwen.sh (sys.path gets bench/ first)."""
import json
import statistics


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def runs(d, n):
    """Lists over the n rounds in directory d (a round whose file is missing or broken
    adds nothing): llama_pp, llama_tg (llama-bench avg_ts), prefill and decode_after
    (uvllm-p: prefill_tokens_per_s, decode_tokens_per_s after the prompt), decode
    (uvllm-d: decode_tokens_per_s from an empty context)."""
    out = {k: [] for k in ("llama_pp", "llama_tg", "prefill", "decode_after", "decode")}
    out["membw"] = []  # (GB/s before the round's decode run, that run's t/s), when measured
    for r in range(1, n + 1):
        for e in _load(f"{d}/llama-{r}.json") or []:
            if e.get("n_prompt") and not e.get("n_gen"):
                out["llama_pp"].append(e["avg_ts"])
            if e.get("n_gen") and not e.get("n_prompt"):
                out["llama_tg"].append(e["avg_ts"])
        u = _load(f"{d}/uvllm-p-{r}.json")
        if u:
            out["prefill"].append(u["prefill_tokens_per_s"])
            out["decode_after"].append(u["decode_tokens_per_s"])
        u = _load(f"{d}/uvllm-d-{r}.json")
        if u:
            out["decode"].append(u["decode_tokens_per_s"])
            try:
                with open(f"{d}/membw-{r}.txt") as f:
                    out["membw"].append((float(f.read().split()[0]), u["decode_tokens_per_s"]))
            except (OSError, ValueError, IndexError):
                pass
    return out


def median(v):
    return statistics.median(v) if v else None


def ratio(a, b):
    return None if a is None or not b else a / b
