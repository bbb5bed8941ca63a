#!/usr/bin/env python3
"""`uvllm info`: describes the shipped models, and on malformed files prints exactly one
line on stderr (`uvllm: FILE: reason`) and exits 1; a missing argument exits 2.
Env: UVLLM_BIN (the binary), UVLLM_SHARED or UVLLM_SOURCE_DIR (shared test data)."""
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import BIN, SHARED, check, failures  # noqa: E402


def run(*args):
    p = subprocess.run([BIN, "info", *args], capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def tiny_gguf(arch):
    """A one-tensor GGUF with the given architecture and nothing else."""
    kv = gguf_str("general.architecture") + struct.pack("<I", 8) + gguf_str(arch)
    ti = gguf_str("token_embd.weight") + struct.pack("<IQIQ", 1, 8, 0, 0)
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + kv + ti
    head += b"\0" * (-len(head) % 32)
    return head + struct.pack("<8f", *range(8))


def main():
    model = os.path.join(SHARED, "models", "aidreams260K.gguf")
    if not os.path.isfile(model):
        print(f"FAIL shared test data not found: {model} (set UVLLM_SHARED)")
        return 1
    if not os.access(BIN, os.X_OK):
        print(f"FAIL uvllm binary not found: {BIN} (set UVLLM_BIN)")
        return 1
    good = open(model, "rb").read()

    rc, out, err = run(model)
    check(rc == 0, f"info on aidreams260K exits 0 (got {rc}, stderr {err.strip()!r})")
    for want in ["llama", "n_embd           64", "n_layer          4", "n_head           4",
                 "n_ff             172", "n_ctx_train      128", "n_vocab          512",
                 "f32              39", "bos              1", "eos              2",
                 f"{len(good)} bytes", "separate output.weight"]:
        check(want in out, f"info output mentions {want!r}")

    rc, out, _ = run(os.path.join(SHARED, "models", "tiny-bpe-f16.gguf"))
    check(rc == 0 and "tied to token_embd" in out and "gpt2" in out,
          "tiny-bpe: tied output and gpt2 vocabulary reported")
    rc, out, _ = run(os.path.join(SHARED, "tokenizer", "ggml-vocab-falcon.gguf"))
    check(rc == 0 and "vocabulary only" in out and "65024" in out,
          "vocabulary-only file described (falcon, 65024 tokens)")

    rc, out, err = run()
    check(rc == 2 and "usage" in err, f"missing argument: usage and exit 2 (got {rc})")

    def corrupt(name, data, reason):
        with tempfile.NamedTemporaryFile(suffix=".gguf", delete=False) as f:
            f.write(data)
            path = f.name
        try:
            rc, out, err = run(path)
            lines = err.splitlines()
            check(rc == 1, f"{name}: exit 1 (got {rc})")
            check(len(lines) == 1, f"{name}: one stderr line (got {len(lines)}: {err!r})")
            check(bool(lines) and lines[0].startswith(f"uvllm: {path}: ") and reason in lines[0],
                  f"{name}: 'uvllm: FILE: ...{reason}...' (got {lines[:1]})")
        finally:
            os.unlink(path)

    n_kv_off = 16
    corrupt("bad magic", b"GGUX" + good[4:], "bad magic")
    corrupt("version 1", good[:4] + struct.pack("<I", 1) + good[8:], "version 1")
    corrupt("truncated metadata", good[:1000], "cannot fit in a file of 1000 bytes")
    corrupt("truncated data", good[:-1000], "past end of file")
    corrupt("huge n_kv", good[:n_kv_off] + struct.pack("<Q", 1 << 62) + good[n_kv_off + 8:],
            "n_kv")
    corrupt("empty file", b"", "empty file")
    corrupt("unsupported architecture", tiny_gguf("mamba"), "unsupported architecture 'mamba'")
    corrupt("newline in architecture", tiny_gguf("a\nb"), "unsupported architecture 'a?b'")
    rc, _, err = run("/nonexistent/model.gguf")
    check(rc == 1 and len(err.splitlines()) == 1 and "No such file" in err,
          f"missing file: exit 1 with one line (got {rc}: {err!r})")

    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
