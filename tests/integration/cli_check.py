"""Shared setup of the integration tests that drive `uvllm` sub-commands one process at a
time (test_synth.py, test_synth_arch.py, test_quantize_mix.py): where the binary and the shared data are, a
check() that prints ok/FAIL lines and collects failures, report(), scratch_dir(), run(), a GGUF reader for what the
C code wrote, and the "does it generate" check.

Env: UVLLM_BIN, UVLLM_SHARED or UVLLM_SOURCE_DIR. Python 3 standard library only."""
import contextlib
import math
import os
import shutil
import struct
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("UVLLM_SOURCE_DIR", os.path.join(HERE, "..", ".."))
SHARED = os.environ.get("UVLLM_SHARED") or os.path.join(SRC, "..", "shared")
BIN = os.environ.get("UVLLM_BIN", os.path.join(SRC, "build", "uvllm"))
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def report():
    """Prints the failure count; the exit status of the test (1 when a check failed)."""
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


@contextlib.contextmanager
def scratch_dir(prefix="uvllm-"):
    """A fresh directory for the test's files, removed with them afterwards."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp)


def run(*args):
    """(exit status, stdout, stderr) of `uvllm ARGS...`."""
    p = subprocess.run([BIN, *args], capture_output=True, timeout=600)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def generates(path, what):
    """The model at path runs through `uvllm generate` and prints text."""
    rc, text, err = run("generate", "--model", path, "--prompt", "Hello world", "--max-tokens",
                        "4", "--threads", "2")
    check(rc == 0 and text, f"{what}: generate runs ({err.strip()[-200:]})")


SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Gguf:
    """Just enough of a GGUF reader to check what the C code wrote: kv (key -> value; arrays
    of numbers are skipped as None), kv_raw (key -> its type and value bytes) and t (tensor
    name -> (shape, ggml type id, data offset))."""

    def __init__(self, path):
        self.b = open(path, "rb").read()
        self.pos = 8
        n_t, n_kv = self.u("<QQ")
        self.kv_raw, self.kv = {}, {}
        for _ in range(n_kv):
            key = self.s()
            start = self.pos
            t, = self.u("<I")
            self.kv[key] = self.value(t)
            self.kv_raw[key] = self.b[start:self.pos]
        self.t = {}
        for _ in range(n_t):
            name = self.s()
            nd, = self.u("<I")
            ne = self.u("<" + "Q" * nd)
            typ, off = self.u("<IQ")
            self.t[name] = (ne, typ, off)
        align = self.kv.get("general.alignment", 32)
        self.data = (self.pos + align - 1) // align * align

    def u(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def s(self):
        n, = self.u("<Q")
        self.pos += n
        return self.b[self.pos - n:self.pos].decode()

    def value(self, t):
        if t == 8:
            return self.s()
        if t == 9:
            et, n = self.u("<IQ")
            if et in SCALAR:
                return self.skip(SCALAR[et] * n)
            return [self.value(et) for _ in range(n)]
        fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q", 11: "q",
               12: "d"}[t]
        return self.u("<" + fmt)[0]

    def skip(self, n):
        self.pos += n
        return None

    def types(self):
        """tensor name -> ggml type id"""
        return {name: typ for name, (_, typ, _) in self.t.items()}

    def floats(self, name):
        ne, typ, off = self.t[name]
        n = math.prod(ne)
        p = self.data + off
        if typ == 0:
            return list(struct.unpack_from(f"<{n}f", self.b, p))
        if typ == 1:
            return list(struct.unpack_from(f"<{n}e", self.b, p))
        if typ == 8:  # q8_0: f16 scale + 32 int8
            out = []
            for blk in range(n // 32):
                d, = struct.unpack_from("<e", self.b, p + 34 * blk)
                out += [d * q for q in struct.unpack_from("<32b", self.b, p + 34 * blk + 2)]
            return out
        raise ValueError(f"type {typ}")
