"""GGUF v3 writing shared by the tools (gguf_bert.py, gguf_llama3.py, vocab_mistral.py): the
key/value encodings and the file layout. A file is "GGUF", u32 version, u64 tensor count, u64
key count, the keys (string key, u32 type, value), the tensor infos (string name, u32 n_dims,
u64 ne[n_dims], u32 type, u64 offset), padding to `align`, then the tensor data, each tensor
at an offset that is a multiple of `align`. Strings are u64 length + bytes. Pure Python."""
import struct


def gguf_str(x):
    e = x.encode()
    return struct.pack("<Q", len(e)) + e


def kv_u32(k, v):
    return gguf_str(k) + struct.pack("<II", 4, v)


def kv_f32(k, v):
    return gguf_str(k) + struct.pack("<If", 6, v)


def kv_bool(k, v):
    return gguf_str(k) + struct.pack("<IB", 7, 1 if v else 0)


def kv_str(k, v):
    return gguf_str(k) + struct.pack("<I", 8) + gguf_str(v)


def kv_arr(k, et, items):
    """An array of strings (et 8), i32 (5) or f32 (6)."""
    head = gguf_str(k) + struct.pack("<IIQ", 9, et, len(items))
    if et == 8:
        return head + b"".join(gguf_str(x) for x in items)
    fmt = {5: "i", 6: "f"}[et]
    return head + struct.pack(f"<{len(items)}{fmt}", *items)


def pad_to(n, align):
    return (n + align - 1) // align * align - n


def write_gguf(path, kvs, tensors, align=32, version=3):
    """kvs: encoded keys (kv_* above); tensors: (name, shape ne0.., ggml type, data bytes)."""
    infos, blobs, pos = [], [], 0
    for name, shape, typ, data in tensors:
        pad = pad_to(pos, align)
        blobs.append(b"\0" * pad)
        pos += pad
        infos.append(gguf_str(name) + struct.pack("<I", len(shape)) +
                     struct.pack(f"<{len(shape)}Q", *shape) + struct.pack("<IQ", typ, pos))
        blobs.append(data)
        pos += len(data)
    head = struct.pack("<4sIQQ", b"GGUF", version, len(tensors), len(kvs))
    head += b"".join(kvs) + b"".join(infos)
    head += b"\0" * pad_to(len(head), align)
    with open(path, "wb") as f:
        f.write(head + b"".join(blobs))
