"""Structured output over a corpus of JSON Schemas as the SDKs write them
(tests/e2e/corpus: zod through the OpenAI SDK's zodResponseFormat, and pydantic v2's
shape, see tests/e2e/make_corpus.mjs): every answer that ends by itself must validate
against its schema with an independent validator, python's jsonschema with its format
checker (which formats it checks depends on the optional packages installed; the test
prints them).

The model is qwen2-tiny-f16 (random weights, the GPT-2 vocabulary): it knows nothing, so
what it writes is whatever the grammar allows. A logit bias towards the tokens that close
strings, members and containers lets documents finish within max_tokens."""

import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Server, run, shared, test  # noqa: E402

import jsonschema  # noqa: E402
from jsonschema.validators import validator_for  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = sorted(glob.glob(os.path.join(HERE, "..", "e2e", "corpus", "*.json")))
MODEL = os.path.join(shared(), "models", "qwen2-tiny-f16.gguf")


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), keys
    return dict(pairs)


@test
def the_corpus_has_zod_and_pydantic_schemas():
    names = [os.path.basename(p) for p in CORPUS]
    assert len(names) >= 50, len(names)
    assert sum(n.startswith("zod-") for n in names) >= 30, names
    assert sum(n.startswith("pydantic-") for n in names) >= 15, names


@test
def the_validator_checks_formats():
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    print("format checks:", sorted(checker.checkers))
    v = validator_for({})({"type": "string", "format": "email"}, format_checker=checker)
    assert not v.is_valid("no-at-sign")
    v = validator_for({})({"type": "string", "format": "date"}, format_checker=checker)
    assert not v.is_valid("2024-02-30")


@test
def every_finished_output_validates():
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    with Server("--model", MODEL, "--threads", "2", backend="cpu") as s:
        bias = {}
        for text, b in [('"', 8), (",", 3), ("}", 4), ("]", 4), ("@", 2), (".", 2)]:
            bias[str(s.token_id(text))] = b
        finished = failed_schemas = 0
        unfinished = []
        for path in CORPUS:
            schema = json.load(open(path))
            name = os.path.basename(path)
            body = {"messages": [{"role": "user", "content": "Fill it in."}], "max_tokens": 400,
                    "temperature": 1, "seed": 7, "n": 2, "logit_bias": bias,
                    "response_format": {"type": "json_schema",
                                        "json_schema": {"name": "x", "schema": schema,
                                                        "strict": True}}}
            # long documents on a loaded machine: more than the harness's 10 s
            r = s.request("POST", "/v1/chat/completions", body=json.dumps(body), timeout=180)
            assert r.status == 200, (name, r.body[:400])
            v = validator_for(schema)(schema, format_checker=checker)
            done = 0
            for c in r.json()["choices"]:
                text = c["message"]["content"]
                if c["finish_reason"] != "stop":
                    continue
                doc = json.loads(text, object_pairs_hook=no_duplicates)
                errors = [e.message for e in v.iter_errors(doc)]
                assert not errors, (name, text, errors)
                done += 1
            finished += done
            if not done:
                unfinished.append(name)
        print(f"{len(CORPUS)} schemas, {finished} finished outputs validated; "
              f"none finished for {unfinished}")
        assert len(unfinished) <= len(CORPUS) // 10, unfinished
        assert not failed_schemas


if __name__ == "__main__":
    sys.exit(run())
