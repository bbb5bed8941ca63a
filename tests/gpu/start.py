#!/usr/bin/env python3
"""`uvllm serve --backend cuda` starts or refuses clearly: without a device it must exit
non-zero within seconds with one line naming the reason ("no CUDA device available (...)"),
never hang or crash; with a device it must serve a greedy completion and exit 0 on SIGTERM.
--device past the last device is refused with the device count."""

import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from uvllm_harness import Server, binary, run, shared, test  # noqa: E402

MODEL = os.path.join(shared(), "models", "aidreams260K.gguf")


def try_start(*extra):
    p = subprocess.run([binary(), "serve", "--backend", "cuda", "--model", MODEL, "--port", "0",
                        *extra], capture_output=True, text=True, timeout=60,
                       input="")
    return p


def has_device():
    p = subprocess.Popen([binary(), "serve", "--backend", "cuda", "--model", MODEL, "--port", "0"],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        _, err = p.communicate(timeout=20)
        return False, err
    except subprocess.TimeoutExpired:  # still running: it started
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)
        return True, ""


@test
def cuda_backend_starts_or_refuses_clearly():
    dev, err = has_device()
    if not dev:
        lines = [ln for ln in err.splitlines() if "cuda backend" in ln]
        assert lines and "no CUDA device available (" in lines[0], err
        assert "Segmentation" not in err and "AddressSanitizer" not in err, err
        return
    with Server("--model", MODEL, "--kv-mem", "16M", backend="cuda") as srv:
        r = srv.request("POST", "/v1/completions",
                        body='{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}')
        assert r.status == 200, (r.status, r.body)
        srv.signal(signal.SIGTERM)
        assert srv.wait(30) == 0


@test
def device_out_of_range_is_refused():
    p = try_start("--device", "1023")
    assert p.returncode != 0
    assert "cuda backend" in p.stderr and ("--device 1023" in p.stderr or
                                           "no CUDA device" in p.stderr), p.stderr


@test
def unsupported_architecture_is_refused_before_the_device():
    """The model check runs before any CUDA call, so the refusal names the architecture
    with or without a device."""
    src = os.environ.get("UVLLM_SOURCE_DIR",
                         os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    for arch in ("gemma3", "phi3", "qwen3moe"):
        model = os.path.join(src, "tests", "models", arch + "-tiny-f16.gguf")
        p = subprocess.run([binary(), "serve", "--backend", "cuda", "--model", model,
                            "--port", "0"], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0, p.stderr
        line = [ln for ln in p.stderr.splitlines() if "cuda backend" in ln]
        assert line and ("architecture %s is not supported" % arch) in line[0], p.stderr


if __name__ == "__main__":
    sys.exit(run())
