// Embeddings through the official openai SDK (issue 26): embeddings.create with float and
// base64 vectors (and the SDK's default, which asks for base64 and decodes it), inputs as a
// string, strings and token ids, usage.prompt_tokens, the 400s naming dimensions and an
// over-long input, llama-server's /embedding shape, and the refusal of a model without
// pooling. Server: the shared qwen3-tiny-f16 (a decoder, random weights) with --pooling last,
// as Qwen3-Embedding is served; a second one without --pooling (qwen3's GGUF says none); a
// third on the BERT encoder tests/models/bert-tiny-f16.gguf (tools/gguf_bert.py), whose
// vectors must be llama-embedding's (tests/golden/bert-tiny-embed.jsonl) and which refuses
// generation with a 501; the same for nomic-bert-tiny-f16.gguf.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { models, startServer, stopServers } from "./server.mjs";

const MODEL = path.join(models, "qwen3-tiny-f16.gguf");
const SRC = process.env.UVLLM_SOURCE_DIR ?? path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const BERT = path.join(SRC, "tests", "models", "bert-tiny-f16.gguf");

let A, N, B; // { base, openai }

const start = (args) => startServer(["--model-alias", "m", ...args]);

function clients(port) {
  const base = `http://127.0.0.1:${port}`;
  return { base, openai: new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 }) };
}

before(async () => {
  const [a, n, b] = await Promise.all([
    start(["--model", MODEL, "--threads", "1", "--pooling", "last", "--ctx-size", "256"]),
    start(["--model", MODEL, "--threads", "1"]),
    start(["--model", BERT, "--threads", "1"]),
  ]);
  A = clients(a);
  N = clients(n);
  B = clients(b);
});

after(stopServers);

const norm2 = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const cos = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0) / (norm2(a) * norm2(b));

async function tokens(text) {
  const r = await fetch(`${A.base}/tokenize`, { method: "POST", body: JSON.stringify({ content: text, add_special: true }) });
  return (await r.json()).tokens;
}

test("embeddings.create float: a unit vector per input, usage counts the tokens", async () => {
  const text = "The quick brown fox jumps over the lazy dog";
  const r = await A.openai.embeddings.create({ model: "m", input: text, encoding_format: "float" });
  assert.equal(r.object, "list");
  assert.equal(r.data.length, 1);
  assert.equal(r.data[0].object, "embedding");
  assert.equal(r.data[0].index, 0);
  const v = r.data[0].embedding;
  assert.ok(Array.isArray(v) && v.length > 8, `a float vector (${v.length})`);
  assert.ok(Math.abs(norm2(v) - 1) < 1e-5, `L2-normalised: |v| = ${norm2(v)}`);
  const ids = await tokens(text);
  assert.equal(r.usage.prompt_tokens, ids.length);
  assert.equal(r.usage.total_tokens, ids.length);
});

test("embeddings.create base64 decodes to the float answer, bit for bit", async () => {
  const input = ["a first sentence", "and another one, longer than the first"];
  const f = await A.openai.embeddings.create({ model: "m", input, encoding_format: "float" });
  const b = await A.openai.embeddings.create({ model: "m", input, encoding_format: "base64" });
  assert.equal(b.data.length, 2);
  for (let i = 0; i < 2; i++) {
    assert.equal(typeof b.data[i].embedding, "string");
    const buf = Buffer.from(b.data[i].embedding, "base64");
    const dec = Array.from(new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4));
    assert.deepEqual(dec, f.data[i].embedding.map(Math.fround));
  }
  // the SDK's default asks for base64 and decodes it itself
  const d = await A.openai.embeddings.create({ model: "m", input });
  for (let i = 0; i < 2; i++) assert.deepEqual(d.data[i].embedding, f.data[i].embedding.map(Math.fround));
  assert.ok(cos(f.data[0].embedding, f.data[1].embedding) < 0.9999, "different inputs, different vectors");
});

test("token ids, strings and a batch give the vectors each input gets alone", async () => {
  const texts = ["one", "two words", "a third input of several tokens"];
  const ids = await Promise.all(texts.map(tokens));
  const batch = await A.openai.embeddings.create({ model: "m", input: texts, encoding_format: "float" });
  const byIds = await A.openai.embeddings.create({ model: "m", input: ids, encoding_format: "float" });
  const alone = await Promise.all(
    texts.map((t) => A.openai.embeddings.create({ model: "m", input: t, encoding_format: "float" })),
  );
  assert.deepEqual(batch.data.map((d) => d.index), [0, 1, 2]);
  for (let i = 0; i < 3; i++) {
    // batched with others in one step, the matmul tiles differ: not bit for bit
    assert.ok(cos(batch.data[i].embedding, alone[i].data[0].embedding) > 0.99999, `input ${i}`);
    assert.ok(cos(batch.data[i].embedding, byIds.data[i].embedding) > 0.99999, `ids ${i}`);
  }
  const one = await A.openai.embeddings.create({ model: "m", input: ids[2], encoding_format: "float" });
  assert.equal(one.data.length, 1, "an array of ids is one input");
  assert.equal(one.usage.prompt_tokens, ids[2].length);
});

test("dimensions, an over-long input and bad inputs are 400s naming the field", async () => {
  const bad = async (body, param) => {
    await assert.rejects(A.openai.embeddings.create({ model: "m", encoding_format: "float", ...body }), (e) => {
      assert.equal(e.status, 400, JSON.stringify(e.error));
      assert.equal(e.param, param);
      return true;
    });
  };
  await bad({ input: "hello", dimensions: 7 }, "dimensions");
  await bad({ input: Array(300).fill(100) }, "input");
  await bad({ input: ["ok", Array(300).fill(100)] }, "input[1]");
  await bad({ input: "" }, "input");
  await bad({ input: [] }, "input");
  await bad({ input: [[1, 2], [-1]] }, "input[1]");
  await bad({ input: "hello", encoding_format: "int8" }, "encoding_format");
});

test("llama-server's /embedding: [{index, embedding: [[...]]}], content or input", async () => {
  const r = await fetch(`${A.base}/embedding`, { method: "POST", body: JSON.stringify({ content: "hello there" }) });
  assert.equal(r.status, 200);
  const j = await r.json();
  assert.equal(j.length, 1);
  assert.equal(j[0].index, 0);
  assert.equal(j[0].embedding.length, 1, "one pooled row");
  const f = await A.openai.embeddings.create({ model: "m", input: "hello there", encoding_format: "float" });
  assert.ok(cos(j[0].embedding[0], f.data[0].embedding) > 0.99999);
});

test("a model without pooling refuses embeddings with a 400 that says --pooling", async () => {
  await assert.rejects(N.openai.embeddings.create({ model: "m", input: "hello", encoding_format: "float" }), (e) => {
    assert.equal(e.status, 400);
    assert.match(e.message, /--pooling/);
    return true;
  });
});

test("a BERT encoder serves llama-embedding's vectors for text, mean by default and cls", async () => {
  const golden = fs
    .readFileSync(path.join(SRC, "tests", "golden", "bert-tiny-embed.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  const mean = golden.filter((g) => g.pooling === "mean");
  assert.equal(mean.length, 4);
  // the GGUF's pooling_type is mean; text goes through our WordPiece tokenizer
  const r = await B.openai.embeddings.create({ model: "m", input: mean.map((g) => g.prompt), encoding_format: "float" });
  for (let i = 0; i < mean.length; i++) {
    const c = cos(r.data[i].embedding, mean[i].embedding);
    assert.ok(c >= 0.9999, `"${mean[i].prompt}": cos ${c} with llama-embedding`);
    assert.equal(r.data[i].embedding.length, 64);
  }
  assert.equal(r.usage.prompt_tokens, mean.reduce((n, g) => n + g.tokens.length, 0), "[CLS] ... [SEP] counted");
  // cls pooling through the token ids llama.cpp used (a server started with --pooling cls)
  const cls = golden.filter((g) => g.pooling === "cls");
  const port = await start(["--model", BERT, "--threads", "1", "--pooling", "cls"]);
  const C = clients(port);
  const rc = await C.openai.embeddings.create({ model: "m", input: cls.map((g) => g.tokens), encoding_format: "float" });
  for (let i = 0; i < cls.length; i++) {
    const c = cos(rc.data[i].embedding, cls[i].embedding);
    assert.ok(c >= 0.9999, `cls "${cls[i].prompt}": cos ${c}`);
  }
});

test("a nomic-bert encoder (RoPE, fused qkv, SwiGLU) serves llama-embedding's vectors", async () => {
  const golden = fs
    .readFileSync(path.join(SRC, "tests", "golden", "nomic-bert-tiny-embed.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l))
    .filter((g) => g.pooling === "mean");
  const port = await start(["--model", path.join(SRC, "tests", "models", "nomic-bert-tiny-f16.gguf"), "--threads", "1"]);
  const r = await clients(port).openai.embeddings.create({ model: "m", input: golden.map((g) => g.prompt), encoding_format: "float" });
  for (let i = 0; i < golden.length; i++) {
    const c = cos(r.data[i].embedding, golden[i].embedding);
    assert.ok(c >= 0.9999, `"${golden[i].prompt}": cos ${c} with llama-embedding`);
  }
});

test("a BERT encoder refuses generation with a 501 naming embeddings, and is ready", async () => {
  await assert.rejects(
    B.openai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
    (e) => {
      assert.equal(e.status, 501);
      assert.equal(e.code, "generation_not_supported");
      assert.match(e.message, /embedding/);
      return true;
    },
  );
  await assert.rejects(B.openai.completions.create({ model: "m", prompt: "hi", max_tokens: 4 }), (e) => e.status === 501);
  // a fresh one reports itself ready before any request: its readiness canary is an
  // embedding, not a generated token (which would fail: 503 "failing")
  const fresh = `http://127.0.0.1:${await start(["--model", BERT, "--threads", "1"])}`;
  let ready;
  for (let i = 0; i < 50; i++) {
    ready = await fetch(`${fresh}/health/ready`);
    if (ready.status === 200) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(ready.status, 200, `/health/ready: ${await ready.text()}`);
  // the server still embeds afterwards
  const r = await B.openai.embeddings.create({ model: "m", input: "hello", encoding_format: "float" });
  assert.equal(r.data[0].embedding.length, 64);
});
