"""`uvllm serve` options from the three sources of its one table (src/server/options.c): a
config file (--config FILE or UVLLM_CONFIG), UVLLM_* environment variables and the command
line, with precedence defaults < file < environment < command line, lists adding up; a
bad value from any source is exit 2 with a message naming the option, where it came from
and its bounds."""

import json
import os
import subprocess
import sys
import tempfile

from uvllm_harness import Server, binary, run, test


class Env:
    """Sets environment variables for the servers started inside the block."""

    def __init__(self, **kv):
        self.kv, self.old = kv, {}

    def __enter__(self):
        for k, v in self.kv.items():
            self.old[k] = os.environ.get(k)
            os.environ[k] = v
        return self

    def __exit__(self, *exc):
        for k, v in self.old.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def config_file(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    f.write(text)
    f.close()
    return f.name


def default_tokens(srv):
    r = srv.request("POST", "/v1/completions", body=json.dumps({"prompt": "a b"}))
    assert r.status == 200, (r.status, r.body)
    return r.json()["usage"]["completion_tokens"]


def model_ids(srv):
    r = srv.request("GET", "/v1/models")
    assert r.status == 200, r.status
    return {m["id"] for m in r.json()["data"]}


@test
def file_then_environment_then_command_line():
    path = config_file("# defaults for this host\nmax-tokens-default = 3\n"
                       "model-alias from-file\ntruncate-max-tokens\n")
    try:
        with Server("--config", path) as srv:
            assert default_tokens(srv) == 3, "the file over the default (16)"
        with Env(UVLLM_MAX_TOKENS_DEFAULT="5", UVLLM_MODEL_ALIAS="from-env"):
            with Server("--config", path) as srv:
                assert default_tokens(srv) == 5, "the environment over the file"
                assert {"from-file", "from-env"} <= model_ids(srv), "lists add up"
            with Server("--config", path, "--max-tokens-default", "7") as srv:
                assert default_tokens(srv) == 7, "the command line over the environment"
        with Env(UVLLM_CONFIG=path):
            with Server() as srv:
                assert default_tokens(srv) == 3, "UVLLM_CONFIG names the file"
    finally:
        os.unlink(path)


def start_fails(*args):
    p = subprocess.run([binary(), "serve", "--port", "0", *args], capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stderr


@test
def bad_values_name_their_source_and_bounds():
    with Env(UVLLM_MAX_SEQS="0"):
        rc, err = start_fails()
    assert rc == 2 and "UVLLM_MAX_SEQS (--max-seqs)" in err and "1..1048576" in err, (rc, err)
    path = config_file("port 8080\nmax-batch-tokenz 5\n")
    try:
        rc, err = start_fails("--config", path)
        assert rc == 2 and f"{path}:2: unknown option 'max-batch-tokenz'" in err, (rc, err)
    finally:
        os.unlink(path)
    rc, err = start_fails("--config", "/nonexistent/uvllm.conf")
    assert rc == 2 and "/nonexistent/uvllm.conf" in err, (rc, err)
    rc, err = start_fails("--header-timeout", "0")
    assert rc == 2 and "--header-timeout" in err and "over 0" in err, (rc, err)


@test
def help_names_every_variable():
    p = subprocess.run([binary(), "serve", "--help"], capture_output=True, timeout=20)
    out = p.stdout.decode()
    assert p.returncode == 0
    for word in ("UVLLM_MAX_BATCH_TOKENS", "UVLLM_MODEL", "UVLLM_CONFIG", "--config FILE",
                 "defaults < config file < environment < command line"):
        assert word in out, word


if __name__ == "__main__":
    sys.exit(run())
