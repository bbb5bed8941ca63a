// uvllm through the official OpenAI client SDK (node), as a user's application talks to it:
// chat and completions, streamed and not, include_usage, n, logprobs, JSON mode, a tool-call round
// trip, and the SDK's typed errors. The server is the real binary on 127.0.0.1 with the
// trained aidreams260K model (no chat template of its own: ChatML), so greedy output is
// deterministic and streamed text must equal non-streamed text.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import { models, startServer, stopServers, templates } from "./server.mjs";

const model = path.join(models, "aidreams260K.gguf");

let client;
let tools;

const scripted_client = () => tools;
const clientOf = (port) => new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 });

before(async () => {
  const a = startServer(["--model", model, "--threads", "2"]);
  // The null backend answering with a Hermes tool call, through Qwen2.5's template.
  const b = startServer(["--backend", "null", "--model", model, "--chat-template",
    path.join(templates, "Qwen-Qwen2.5-7B-Instruct.jinja"),
    "--null-reply", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>']);
  client = clientOf(await a);
  tools = clientOf(await b);
});

after(stopServers);

const MODEL = "aidreams260K.gguf";
const messages = [{ role: "user", content: "Tell me about a dream." }];

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

test("chat: streamed text equals non-streamed greedy text", async () => {
  const full = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 24, temperature: 0 });
  assert.equal(full.object, "chat.completion");
  assert.equal(full.choices[0].message.role, "assistant");
  const text = full.choices[0].message.content;
  assert.ok(text.length > 0);
  const chunks = await collect(
    await client.chat.completions.create({
      model: MODEL, messages, max_tokens: 24, temperature: 0, stream: true,
      stream_options: { include_usage: true },
    }),
  );
  assert.equal(chunks[0].choices[0].delta.role, "assistant");
  const streamed = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
  assert.equal(streamed, text);
  const usage = chunks.at(-1).usage;
  assert.equal(usage.completion_tokens, full.usage.completion_tokens);
  assert.equal(usage.prompt_tokens, full.usage.prompt_tokens);
});

test("chat: n choices and logprobs", async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 6, temperature: 0, n: 3, logprobs: true, top_logprobs: 3,
  });
  assert.equal(r.choices.length, 3);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  assert.equal(new Set(r.choices.map((c) => c.message.content)).size, 1, "greedy: all equal");
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 6);
  for (const e of lp) {
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 3);
    assert.equal(e.top_logprobs[0].logprob, e.logprob);
  }
});

test("chat: a tool-call round trip is accepted", async () => {
  const tools = [{
    type: "function",
    function: { name: "get_weather", description: "Weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
  }];
  // the scripted server: its Qwen2.5 template renders the tools (aidreams260K's 128-token
  // context cannot hold them, and tools are never dropped)
  const r = await scripted_client().chat.completions.create({
    model: MODEL, max_tokens: 4, temperature: 0, tools,
    messages: [
      ...messages,
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "18 C" },
    ],
  });
  assert.ok(["stop", "length", "tool_calls"].includes(r.choices[0].finish_reason));
});

test("chat: the model's tool call arrives as tool_calls, streamed and not", async () => {
  const defs = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
  const r = await tools.chat.completions.create({ model: MODEL, messages, tools: defs });
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, "get_weather");
  assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });
  // the SDK's own accumulation of streamed tool_call deltas
  const stream = tools.chat.completions.stream({ model: MODEL, messages, tools: defs });
  const final = await stream.finalChatCompletion();
  const sc = final.choices[0].message.tool_calls[0];
  assert.equal(sc.function.name, "get_weather");
  assert.deepEqual(JSON.parse(sc.function.arguments), { city: "Paris" });
  assert.equal(final.choices[0].finish_reason, "tool_calls");
});

test("completions: streamed equals non-streamed, n and logprobs", async () => {
  const full = await client.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 20, temperature: 0 });
  assert.equal(full.object, "text_completion");
  const chunks = await collect(
    await client.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 20, temperature: 0, stream: true }),
  );
  assert.equal(chunks.map((c) => c.choices[0]?.text ?? "").join(""), full.choices[0].text);
  const r = await client.completions.create({ model: MODEL, prompt: ["Once upon a time", "I dreamed"], max_tokens: 3, temperature: 0, n: 2, logprobs: 2 });
  assert.equal(r.choices.length, 4);
  assert.equal(r.choices[0].text, full.choices[0].text.slice(0, r.choices[0].text.length));
  assert.equal(r.choices[0].logprobs.tokens.length, 3);
  assert.equal(r.choices[0].logprobs.top_logprobs[0] && Object.keys(r.choices[0].logprobs.top_logprobs[0]).length > 0, true);
});

test("errors arrive as the SDK's typed errors with param", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: MODEL, messages: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "messages",
  );
  await assert.rejects(
    client.chat.completions.create({ model: "gpt-4o", messages }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === "model_not_found",
  );
  await assert.rejects(
    client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "http://x/y.png" } }] }] }),
    (e) => e instanceof OpenAI.BadRequestError && /text only/.test(e.message),
  );
});

test("chat: JSON mode answers parse as objects", async () => {
  // Ids of '"', ':' and '}' in this vocabulary: a bias lets the prose model close objects.
  const id = async (t) => (await (await fetch(client.baseURL.replace(/\/v1$/, "/tokenize"), {
    method: "POST", body: JSON.stringify({ content: t, add_special: false }),
  })).json()).tokens.at(-1);
  const logit_bias = { [await id('"')]: 6, [await id(":")]: 4, [await id("}")]: 1 };
  let finished = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 80, temperature: 1, seed, logit_bias,
      response_format: { type: "json_object" },
    });
    const c = r.choices[0];
    assert.ok(c.message.content.startsWith("{"), c.message.content);
    if (c.finish_reason === "stop") {
      assert.equal(typeof JSON.parse(c.message.content), "object");
      finished++;
    }
  }
  assert.ok(finished >= 2, `finished objects: ${finished}`);
});

test("chat: json_schema answers parse and validate", async () => {
  const id = async (t) => (await (await fetch(client.baseURL.replace(/\/v1$/, "/tokenize"), {
    method: "POST", body: JSON.stringify({ content: t, add_special: false }),
  })).json()).tokens.at(-1);
  const logit_bias = {
    [await id('"')]: 6, [await id(":")]: 4, [await id("}")]: 1, [await id("]")]: 2, [await id(",")]: 2,
  };
  const schema = {
    type: "object",
    properties: {
      mood: { enum: ["happy", "sad"] },
      n: { type: "integer" },
      tags: { type: "array", items: { type: "string", maxLength: 3 }, minItems: 1, maxItems: 2 },
      pet: { type: "object", properties: { kind: { const: "cat" } }, required: ["kind"], additionalProperties: false },
    },
    required: ["mood", "tags", "pet"],
    additionalProperties: false,
  };
  let finished = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 86, temperature: 1, seed: seed * 10, logit_bias,
      response_format: { type: "json_schema", json_schema: { name: "pet", schema, strict: true } },
    });
    const c = r.choices[0];
    if (c.finish_reason !== "stop") continue;
    const v = JSON.parse(c.message.content);
    assert.deepEqual(Object.keys(v).filter((k) => !(k in schema.properties)), [], c.message.content);
    assert.ok(["happy", "sad"].includes(v.mood), c.message.content);
    assert.ok(v.n === undefined || Number.isInteger(v.n), c.message.content);
    assert.ok(Array.isArray(v.tags) && v.tags.length >= 1 && v.tags.length <= 2, c.message.content);
    assert.ok(v.tags.every((t) => typeof t === "string" && [...t].length <= 3), c.message.content);
    assert.deepEqual(v.pet, { kind: "cat" });
    finished++;
  }
  assert.ok(finished >= 3, `finished documents: ${finished}`);
  await assert.rejects(
    client.chat.completions.create({
      model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 4,
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "^(?!a)" } } },
    }),
    (e) => e instanceof OpenAI.BadRequestError && /lookaround/.test(e.message),
  );
});

test("models lists the served model", async () => {
  const list = await client.models.list();
  assert.ok(list.data.some((m) => m.id === MODEL));
});
