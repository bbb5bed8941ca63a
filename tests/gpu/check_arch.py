#!/usr/bin/env python3
"""Checks that a CUDA library (static .a, object or shared module) holds device code (SASS
ELF) for every target architecture, and says which ones each object (each fat binary of a
shared module) has.

    check_arch.py LIBRARY sm_80 sm_89 sm_90

With cuobjdump on the PATH it is asked (`cuobjdump --list-elf`); without it (the toolkit
on this project's machines ships nvcc but not cuobjdump) the .nv_fatbin section of each
object is read directly: a fat binary header (magic 0xBA55ED50, u16 version, u16 header
size, u64 size of the entries) followed by entries (u16 kind: 1 PTX, 2 ELF; u16; u32 header
size; u64 payload size; ...; u32 sm arch at byte 28), each payload an ELF for kind 2.
Exit 1 when an architecture is missing from any object that carries device code."""
import os
import re
import shutil
import struct
import subprocess
import sys


def ar_members(data):
    """(name, bytes) of each member of a System V / GNU ar archive."""
    if not data.startswith(b"!<arch>\n"):
        yield ("", data)
        return
    off, longnames = 8, b""
    while off + 60 <= len(data):
        hdr = data[off:off + 60]
        name, size = hdr[:16].decode().strip(), int(hdr[48:58].decode().strip())
        body = data[off + 60:off + 60 + size]
        if name == "//":
            longnames = body
        elif name.startswith("/") and name[1:].isdigit():
            i = int(name[1:])
            name = longnames[i:longnames.index(b"/\n", i)].decode()
        if name not in ("/", "//"):
            yield (name.rstrip("/"), body)
        off += 60 + size + (size & 1)


def elf_section(obj, wanted):
    if obj[:4] != b"\x7fELF" or obj[4] != 2:
        return None
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", obj, 0x3A)
    def sh(i):
        return struct.unpack_from("<IIQQQQ", obj, shoff + i * shentsize)
    stroff = sh(shstrndx)[4]
    for i in range(shnum):
        name, _, _, _, off, size = sh(i)
        end = obj.index(b"\0", stroff + name)
        if obj[stroff + name:end].decode() == wanted:
            return obj[off:off + size]
    return None


def fatbin_archs(fb):
    return set().union(*fatbins(fb))


def fatbins(fb):
    """The architectures of each fat binary in a section: one per object, several in a
    linked shared object (its .nv_fatbin is the objects' sections end to end)."""
    out, off = [], 0
    while off + 16 <= len(fb):
        archs = set()
        magic, _, hsz, fsz = struct.unpack_from("<IHHQ", fb, off)
        if magic != 0xBA55ED50:
            break
        p, end = off + hsz, off + hsz + fsz
        while p + 32 <= end:
            kind, _, ehsz, size = struct.unpack_from("<HHIQ", fb, p)
            arch, = struct.unpack_from("<I", fb, p + 28)
            if kind == 2 and fb[p + ehsz:p + ehsz + 4] == b"\x7fELF":
                archs.add("sm_%d" % arch)
            p += ehsz + size
        out.append(archs)
        off = end
    return out


def by_object_parsed(path):
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    for name, obj in ar_members(data):
        fb = elf_section(obj, ".nv_fatbin")
        if fb is None:
            continue
        if name:  # an archive's object
            out[name] = fatbin_archs(fb)
        else:  # an object or a shared library: each fat binary on its own
            fbs = fatbins(fb)
            for i, archs in enumerate(fbs):
                out["%s#%d" % (os.path.basename(path), i) if len(fbs) > 1 else
                    os.path.basename(path)] = archs
    return out


def by_object_cuobjdump(tool, path):
    text = subprocess.run([tool, "--list-elf", path], capture_output=True, text=True,
                          check=True).stdout
    out = {}
    for line in text.splitlines():
        m = re.search(r"(\S+?)\.\S*?(sm_\d+)\S*\.cubin", line)
        if m:
            out.setdefault(m.group(1), set()).add(m.group(2))
    return out


def main():
    path, want = sys.argv[1], set(sys.argv[2:])
    tool = shutil.which("cuobjdump")
    objs = by_object_cuobjdump(tool, path) if tool else by_object_parsed(path)
    how = "cuobjdump --list-elf" if tool else "the .nv_fatbin sections"
    if not objs:
        print("%s: no device code found (read through %s)" % (path, how))
        return 1
    bad = 0
    for name in sorted(objs):
        missing = want - objs[name]
        print("%-28s %s%s" % (name, " ".join(sorted(objs[name])),
                              "  MISSING " + " ".join(sorted(missing)) if missing else ""))
        bad += bool(missing)
    print("%d objects with device code, read through %s; %s" %
          (len(objs), how, "%d missing an architecture" % bad if bad else
           "every one has " + " ".join(sorted(want))))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
