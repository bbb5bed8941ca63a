"""JSON mode (response_format {"type": "json_object"}) on the real trained model
(aidreams260K.gguf, cpu backend): every answer that ends by itself is one JSON object, the
same request without it is prose, streaming gives the same text, both endpoints honour it,
and what it cannot do is refused by name.

The model was never trained on JSON, so left alone it writes prose inside the first key;
a logit bias towards '"', ':' and '}' (ids of this vocabulary) lets it finish objects, which
is what shows that the end-of-generation token is allowed exactly when the object closes."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import (Lazy, expect_error, expect_needs_vocabulary, main,  # noqa: E402
                           shared, test)

MODEL = os.path.join(shared(), "models", "aidreams260K.gguf")
JSON = {"type": "json_object"}
MSGS = [{"role": "user", "content": "Hi"}]


srv = Lazy("--model", MODEL, "--threads", "2", backend="cpu")


def token_id(text):
    return srv().token_id(text)


def bias():
    return {str(token_id('"')): 6, str(token_id(":")): 4, str(token_id("}")): 1}


def chat(**body):
    return srv().chat(dict({"messages": MSGS, "max_tokens": 80}, **body))


@test
def every_finished_answer_is_one_json_object():
    b = bias()
    finished, with_keys = 0, 0
    for seed in range(1, 9):
        j = chat(temperature=1, seed=seed, logit_bias=b, response_format=JSON, n=2)
        for c in j["choices"]:
            text = c["message"]["content"]
            assert text.startswith("{"), (seed, text)
            if c["finish_reason"] == "stop":
                obj = json.loads(text)
                assert isinstance(obj, dict), (seed, text)
                finished += 1
                with_keys += len(obj) > 0
            else:
                assert c["finish_reason"] == "length", c
                assert j["usage"]["completion_tokens"] >= 80, j["usage"]
    assert finished >= 4, finished
    assert with_keys >= 1, "no finished object with a key"


@test
def without_json_mode_the_same_request_is_not_json():
    b = bias()
    prose = 0
    for seed in range(1, 5):
        text = chat(temperature=1, seed=seed, logit_bias=b)["choices"][0]["message"]["content"]
        try:
            json.loads(text)
        except ValueError:
            prose += 1
    assert prose == 4, "the constraint is what makes the output JSON"


@test
def greedy_json_mode_starts_the_object():
    j = chat(temperature=0, response_format=JSON, max_tokens=20)
    text = j["choices"][0]["message"]["content"]
    assert text.startswith('{ "') or text.startswith('{"'), text
    plain = chat(temperature=0, max_tokens=20)["choices"][0]["message"]["content"]
    assert not plain.startswith("{"), plain


@test
def streaming_gives_the_same_text():
    body = {"temperature": 1, "seed": 3, "logit_bias": bias(), "response_format": JSON}
    whole = chat(**body)["choices"][0]["message"]["content"]
    text = srv().chat_stream_text(dict({"messages": MSGS, "max_tokens": 80}, **body))
    assert text == whole, (text, whole)


@test
def completions_endpoint_honours_it():
    b = bias()
    done = 0
    for seed in range(1, 7):
        c = srv().first_completion({"prompt": "Once upon a time", "max_tokens": 80,
                                    "temperature": 1, "seed": seed, "logit_bias": b,
                                    "response_format": JSON})
        assert c["text"].startswith("{"), c
        if c["finish_reason"] == "stop":
            assert isinstance(json.loads(c["text"]), dict), c["text"]
            done += 1
    assert done >= 2, done


@test
def what_json_mode_cannot_do_is_refused_by_name():
    for body, param in [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
         "response_format"),
        ({"response_format": {"type": "yaml"}}, "response_format"),
        ({"response_format": JSON, "ignore_eos": True}, "ignore_eos"),
    ]:
        expect_error(srv(), "/v1/chat/completions",
                     dict({"messages": MSGS, "max_tokens": 4}, **body), param)


@test
def json_mode_needs_a_vocabulary():
    expect_needs_vocabulary(JSON)


if __name__ == "__main__":
    main(srv)
