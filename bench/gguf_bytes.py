"""Weight bytes a decode step reads from a GGUF model, for bench/engine.sh.

usage: gguf_bytes.py MODEL.gguf [EXPERTS_USED] -> prints "TOTAL_TENSOR_BYTES DECODE_BYTES"
Decode reads every weight once per token except the token embedding, of
which it reads one row (unless the output is tied to it, in which case the
logits read all of it), and a mixture of experts' stacked expert tensors
(names with "_exps", experts in the last dimension), of which it reads the
EXPERTS_USED experts a token is routed to. Parses only the GGUF header and
tensor table.
"""
import struct
import sys

# ggml type id -> (block elements, block bytes)
TYPES = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
         8: (32, 34), 12: (256, 144), 13: (256, 176), 14: (256, 210), 10: (256, 84),
         11: (256, 110), 20: (32, 18), 23: (256, 136)}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, f):
        self.f = f

    def u32(self):
        return struct.unpack("<I", self.f.read(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.f.read(8))[0]

    def string(self):
        return self.f.read(self.u64())

    def skip_value(self, t):
        if t in SCALAR:
            self.f.read(SCALAR[t])
        elif t == 8:
            self.string()
        elif t == 9:
            et, n = self.u32(), self.u64()
            if et in SCALAR:
                self.f.read(SCALAR[et] * n)
            else:
                for _ in range(n):
                    self.skip_value(et)
        else:
            raise ValueError(f"unknown GGUF value type {t}")


def main():
    with open(sys.argv[1], "rb") as f:
        r = Reader(f)
        if f.read(4) != b"GGUF":
            sys.exit("not a GGUF file")
        r.u32()  # version
        n_tensors, n_kv = r.u64(), r.u64()
        for _ in range(n_kv):
            r.string()
            r.skip_value(r.u32())
        sizes = {}
        for _ in range(n_tensors):
            name = r.string().decode()
            dims = [r.u64() for _ in range(r.u32())]
            t = r.u32()
            r.u64()  # offset
            n = 1
            for d in dims:
                n *= d
            be, bb = TYPES[t]
            sizes[name] = (n // be * bb, dims)
    total = sum(s for s, _ in sizes.values())
    decode = total
    if "output.weight" in sizes and "token_embd.weight" in sizes:
        s, dims = sizes["token_embd.weight"]
        decode -= s - s // dims[-1]
    used = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    for name, (s, dims) in sizes.items():
        if used and "_exps" in name:
            decode -= s - s // dims[-1] * used
    print(total, decode)


main()
