#!/usr/bin/env python3
"""The CUDA backend is a module (libuvllm-cuda.so beside the binary) loaded on
`--backend cuda` only: the uvllm executable itself must not need the CUDA runtime or cuBLAS
(every CPU server and CLI tool would map ~200 MB of them again), a process on another
backend must not map them, the module must bind to the executable's engine/model/base code
rather than carry copies, and a missing or broken module must be one clear start-up error
with a non-zero exit."""

import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from uvllm_harness import binary, run, shared, test  # noqa: E402

MODEL = os.path.join(shared(), "models", "aidreams260K.gguf")
MODULE = "libuvllm-cuda.so"
CUDA_LIBS = ("libcudart", "libcublas", "libcuda.")


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True,
                         check=True).stdout
    return [ln.split("[", 1)[1].rstrip("]") for ln in out.splitlines() if "(NEEDED)" in ln]


def dynsyms(path, undefined):
    out = subprocess.run(["nm", "-D", "--defined-only" if not undefined else "--undefined-only",
                          path], capture_output=True, text=True, check=True).stdout
    return {ln.split()[-1].split("@")[0] for ln in out.splitlines() if ln.strip()}


def module_path():
    return os.path.join(os.path.dirname(os.path.realpath(binary())), MODULE)


def start_cuda(env=None, exe=None):
    return subprocess.run([exe or binary(), "serve", "--backend", "cuda", "--model", MODEL,
                           "--port", "0"], capture_output=True, text=True, timeout=60,
                          env=env, stdin=subprocess.DEVNULL)


def cuda_line(p):
    lines = [ln for ln in p.stderr.splitlines() if "cuda backend" in ln]
    assert lines, p.stderr
    return lines[0]


@test
def executable_does_not_link_cuda():
    libs = needed(binary())
    bad = [lib for lib in libs if lib.startswith(CUDA_LIBS)]
    assert not bad, "uvllm links %s (NEEDED: %s)" % (bad, libs)
    assert os.path.exists(module_path()), "%s missing beside the binary" % module_path()
    mlibs = needed(module_path())  # the module is where they went
    assert any(lib.startswith("libcudart") for lib in mlibs), mlibs
    assert any(lib.startswith("libcublas") for lib in mlibs), mlibs


@test
def module_binds_to_the_executables_code():
    """One copy of the engine/model/base code: the module exports only its entry point and
    every ul_* symbol it uses is one the executable exports."""
    exported = dynsyms(module_path(), undefined=False)
    assert exported == {"ul_gpu_backend_create"}, sorted(exported)[:20]
    wants = {s for s in dynsyms(module_path(), undefined=True) if s.startswith("ul_")}
    assert wants, "the module uses no ul_* symbol of the executable: it carries copies"
    missing = wants - dynsyms(binary(), undefined=False)
    assert not missing, "the executable does not export %s" % sorted(missing)


@test
def other_backends_do_not_map_cuda():
    p = subprocess.Popen([binary(), "serve", "--backend", "null", "--port", "0"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        maps = ""
        while time.monotonic() < deadline and p.poll() is None:
            with open("/proc/%d/maps" % p.pid) as f:
                maps = f.read()
            if "libuv" in maps:  # past the dynamic loader
                break
            time.sleep(0.05)
        assert p.poll() is None, p.stderr.read()
        mapped = {ln.split()[-1] for ln in maps.splitlines() if "/lib" in ln}
        bad = [m for m in mapped if os.path.basename(m).startswith(CUDA_LIBS + (MODULE,))]
        assert not bad, bad
    finally:
        p.terminate()
        p.wait(30)


@test
def missing_module_is_a_clear_start_up_error():
    env = dict(os.environ, UVLLM_CUDA_MODULE="/nonexistent/dir/" + MODULE)
    p = start_cuda(env)
    assert p.returncode != 0, p.stderr
    line = cuda_line(p)
    assert "CUDA module /nonexistent/dir/%s was not found" % MODULE in line, p.stderr
    assert "Segmentation" not in p.stderr, p.stderr
    # an install without the module beside the binary (and no override) names where it looked
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "uvllm")
        shutil.copy(binary(), exe)
        env = {k: v for k, v in os.environ.items() if k != "UVLLM_CUDA_MODULE"}
        p = start_cuda(env, exe)
        assert p.returncode != 0, p.stderr
        line = cuda_line(p)
        assert ("CUDA module %s was not found next to the binary: %s" %
                (MODULE, os.path.join(d, MODULE))) in line, p.stderr


@test
def broken_module_reports_the_loader_error():
    with tempfile.NamedTemporaryFile(suffix=".so") as f:
        f.write(b"not an ELF file\n")
        f.flush()
        p = start_cuda(dict(os.environ, UVLLM_CUDA_MODULE=f.name))
        assert p.returncode != 0, p.stderr
        line = cuda_line(p)
        assert "cannot load the CUDA module %s: " % f.name in line, p.stderr


@test
def module_missing_a_library_names_it():
    """As on a machine without the CUDA runtime: the module is there, a library it needs
    is not; the error names both."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler to build the stand-in module (set CC)"
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "dep.c"), "w") as f:
            f.write("int uvllm_test_dep(void) { return 1; }\n")
        with open(os.path.join(d, "mod.c"), "w") as f:
            f.write("int uvllm_test_dep(void);\nint f(void) { return uvllm_test_dep(); }\n")
        subprocess.run([cc, "-shared", "-fPIC", "-o", os.path.join(d, "libuvllmtestdep.so"),
                        os.path.join(d, "dep.c")], check=True)
        mod = os.path.join(d, MODULE)
        subprocess.run([cc, "-shared", "-fPIC", "-o", mod, os.path.join(d, "mod.c"),
                        "-L" + d, "-luvllmtestdep"], check=True)
        os.remove(os.path.join(d, "libuvllmtestdep.so"))
        p = start_cuda(dict(os.environ, UVLLM_CUDA_MODULE=mod))
        assert p.returncode != 0, p.stderr
        line = cuda_line(p)
        assert "cannot load the CUDA module %s: " % mod in line, p.stderr
        assert "libuvllmtestdep.so: cannot open shared object file" in line, p.stderr


@test
def cpu_only_commands_run_without_the_module():
    """A CLI tool on a binary whose module is gone still works: nothing loads it."""
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "uvllm")
        shutil.copy(binary(), exe)
        p = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert "serve" in p.stdout + p.stderr


if __name__ == "__main__":
    sys.exit(run())
