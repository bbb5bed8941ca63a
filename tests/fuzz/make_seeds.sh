#!/usr/bin/env bash
# Writes the fuzz seed corpora, one directory per harness (fuzz_NAME reads OUT_DIR/NAME):
# OUT_DIR/gguf: the first 64 KiB of every shared model and vocabulary file (header,
# metadata and tensor infos, where the parser's work is) and the small complete
# aidreams260K.gguf (a whole valid file, so mutations also reach tensor placement and the
# model loader).
# OUT_DIR/chat_output: copied from seeds/chat_output (see the end).
# OUT_DIR/http: valid and edge-case HTTP requests for fuzz_http. Each file starts with one
# control byte: bit 0 set = the client keeps its write side open (so answers to complete
# requests are read before the server's idle timeout closes), bits 1-7 choose where the
# input is split into two writes.
# OUT_DIR/jinja: the shared chat templates (../shared/chat-templates/templates) and the
# hand-written ones in seeds/jinja for fuzz_jinja.
# OUT_DIR/chat: the chat requests in seeds/chat for fuzz_chat.
# usage: make_seeds.sh OUT_DIR        (shared data: $UVLLM_SHARED, else <repo>/../shared)
set -euo pipefail
out=${1:?usage: make_seeds.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
shared=${UVLLM_SHARED:-$here/../../../shared}
if [ ! -d "$shared/models" ]; then
    echo "make_seeds.sh: shared test data not found at $shared (set UVLLM_SHARED)" >&2
    exit 1
fi
mkdir -p "$out/gguf" "$out/http"
n=0
for f in "$shared"/models/*.gguf "$shared"/tokenizer/*.gguf; do
    [ -f "$f" ] || continue
    head -c 65536 "$f" >"$out/gguf/head-$(basename "$f")"
    n=$((n + 1))
done
cp "$shared/models/aidreams260K.gguf" "$out/gguf/full-aidreams260K.gguf"
echo "make_seeds.sh: $((n + 1)) GGUF seeds in $out/gguf" >&2

# seed NAME SPLIT_BYTE: the request comes on stdin (printf escapes already applied).
seed() { { printf "\\x$2"; cat; } >"$out/http/$1"; }
body='{"model":"null","prompt":"hello world","max_tokens":4}'
sbody='{"model":"null","prompt":"a b c","max_tokens":3,"stream":true,"stop":["x"],"temperature":0.5,"top_p":0.9,"seed":7,"n":1}'
printf 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n' | seed get-health 01
printf 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n' | seed get-metrics 40
printf 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n' | seed get-models 00
printf 'HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n' | seed head-health 00
printf 'GET /nope?x=1 HTTP/1.1\r\nHost: x\r\n\r\n' | seed get-404 00
printf 'DELETE /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n' | seed delete-405 00
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' ${#body} "$body" | seed post-completion 81
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' ${#sbody} "$sbody" | seed post-stream a1
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{"model":' | seed post-bad-json 00
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{"prompt":"a"' | seed post-short-body 00
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n{}' | seed post-too-large 00
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n' ${#body} "$body" | seed post-chunked 61
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"p\r\n5;ext=1\r\nrompt\r\nZZ\r\n' | seed post-chunked-bad 00
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n%s' ${#body} "$body" | seed post-expect 91
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\nContent-Length: 2\r\n\r\n{}' | seed post-expect-bad 00
printf 'POST /v1/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s' ${#sbody} "$sbody" | seed post-http10-stream 01
printf 'GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n' | seed get-http10-keepalive 00
tbody='{"content":"a b </s>","add_special":true,"with_pieces":true}'
printf 'POST /tokenize HTTP/1.1\r\nHost: x\r\nX-Request-Id: seed-1\r\nContent-Length: %d\r\n\r\n%s' ${#tbody} "$tbody" | seed post-tokenize 00
dbody='{"tokens":[1,2,31999]}'
printf 'POST /detokenize HTTP/1.1\r\nHost: x\r\nOrigin: https://ui.example\r\nContent-Length: %d\r\n\r\n%s' ${#dbody} "$dbody" | seed post-detokenize 00
printf 'OPTIONS /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: https://ui.example\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\n\r\n' | seed options-preflight 00
# chat: the server renders messages with its chat template (ChatML on the null backend)
cbody='{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":3}'
printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s' ${#cbody} "$cbody" | seed post-chat 01
tcbody='{"messages":[{"role":"user","content":"weather?"}],"stream":true,"max_tokens":4,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}'
printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s' ${#tcbody} "$tcbody" | seed post-chat-tools-stream 21
printf 'POST /apply-template HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s' ${#cbody} "$cbody" | seed post-apply-template 00
printf 'GET /health HTTP/1.1\r\nHost: x\r\n\r\nPOST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%sGET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' ${#body} "$body" | seed pipelined 31
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%sPOST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s' ${#sbody} "$sbody" ${#body} "$body" | seed pipelined-stream ff
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n' | seed smuggle-cl-te 00
printf 'POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}' | seed double-cl 00
{ printf 'GET /health HTTP/1.1\r\nHost: x\r\nX-Big: '; head -c 20000 /dev/zero | tr '\0' a; printf '\r\n\r\n'; } | seed oversize-header 00
printf 'GET /health HTTP/1.1\r\nHost: x\r\n' | seed incomplete-header 00
printf 'GARBAGE\r\n\r\n' | seed garbage 00
# hostile clients (issue 23): trailers, folding, codings, a NUL and invalid UTF-8, credentials
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\nAuthorization: Bearer k\r\nX-T: 1\r\n\r\n' ${#body} "$body" | seed post-trailers 21
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n %d\r\n\r\n%s' ${#body} "$body" | seed post-folded-cl 00
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n' | seed post-te-gzip 00
nbody='{"prompt":"a\u0000b","stop":["\u0000"],"user":"x\ny"}'
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s' ${#nbody} "$nbody" | seed post-nul 00
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n{"prompt":"a\xff\xe4b"}' | seed post-bad-utf8 00
printf 'GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer fuzz-key\r\nExpect: 100-continue\r\n\r\n' | seed get-metrics-key 00
echo "make_seeds.sh: $(ls "$out/http" | wc -l) HTTP seeds in $out/http" >&2

mkdir -p "$out/jinja"
cp "$here"/seeds/jinja/*.jinja "$out/jinja/"
for f in "$shared"/chat-templates/templates/*.jinja; do
    [ -f "$f" ] && cp "$f" "$out/jinja/shared-$(basename "$f")"
done
echo "make_seeds.sh: $(ls "$out/jinja" | wc -l) Jinja seeds in $out/jinja" >&2
mkdir -p "$out/chat"
cp "$here"/seeds/chat/*.json "$out/chat/"

# OUT_DIR/grammar: GBNF text, a NUL byte, a document, for fuzz_grammar (seeds/grammar).
mkdir -p "$out/grammar"
cp "$here"/seeds/grammar/* "$out/grammar/"
# OUT_DIR/json_schema: a schema, a NUL byte, a document, for fuzz_json_schema.
mkdir -p "$out/json_schema"
cp "$here"/seeds/json_schema/* "$out/json_schema/"

# OUT_DIR/chat_output: model outputs in every tool-call format (fuzz_chat_output's layout:
# syntax byte, flags byte, split-seed byte, text), kept in the repository.
mkdir -p "$out/chat_output"
cp "$here"/seeds/chat_output/* "$out/chat_output/"
echo "make_seeds.sh: $(ls "$out/chat_output" | wc -l) chat output seeds in $out/chat_output" >&2

# OUT_DIR/chat_req: chat request bodies for fuzz_chat_req (first byte: which template).
mkdir -p "$out/chat_req"
creq() { { printf "\\x$1"; cat; } >"$out/chat_req/$2"; }
echo '{"messages":[{"role":"user","content":"Hi"}]}' | creq 00 user
echo '{"messages":[{"role":"system","content":"S"},{"role":"user","content":"Hi"},{"role":"assistant","content":"Yo"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"n":2,"logprobs":true,"top_logprobs":2}' | creq 01 multi
echo '{"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"18 C"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"tool_choice":"auto"}' | creq 02 tools
echo '{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":false},"stop":["a"],"logit_bias":{"5":-100}}' | creq 04 kwargs
echo '{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}' | creq 05 raises
echo '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}' | creq 03 image
# first byte 0x1N: /v1/responses bodies; 0x2N: /v1/messages bodies
echo '{"input":"Hi","instructions":"Be brief.","max_output_tokens":8,"text":{"format":{"type":"json_object"}}}' | creq 10 resp_plain
echo '{"input":[{"role":"user","content":[{"type":"input_text","text":"W?"}]},{"type":"reasoning","summary":[{"type":"summary_text","text":"hm"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":"auto","reasoning":{"effort":"low"}}' | creq 13 resp_items
echo '{"max_tokens":8,"system":[{"type":"text","text":"S"}],"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"a"},{"type":"tool_use","id":"t1","name":"f","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"}],"is_error":true},{"type":"text","text":"go"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":1024},"stop_sequences":["x"]}' | creq 23 msg_blocks
echo "make_seeds.sh: $(ls "$out/chat_req" | wc -l) chat request seeds in $out/chat_req" >&2
