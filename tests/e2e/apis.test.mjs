// OpenAI's Responses API and Anthropic's Messages API through the official SDKs, as agents and
// apps call them: openai responses.create (plain, streamed, a forced function tool, a
// json_schema text.format, reasoning items), @anthropic-ai/sdk messages.create and
// messages.stream (text, a forced tool_use, thinking), countTokens and Anthropic's error
// shape (this SDK sends its key as a Bearer token; test_apis.py checks x-api-key), the Vercel
// AI SDK's default openai(model) provider and LangChain's useResponsesApi. Every stream is
// checked against the plain answer to the same request: the object the SDK (or, for
// Responses, whose SDK takes response.completed whole, a replica of its accumulator)
// assembles from the events equals the non-streamed one.
//
// Servers: aidreams260K on the CPU (trained; sampled with a seed, its output is deterministic;
// ChatML) with an API key; qwen2-tiny-f16 on the CPU (random weights: what it writes under a
// forced tool or a schema is the constraint's work, a logit bias towards closing tokens lets
// it finish); the null backend answering with a scripted thinking reply through Qwen3's
// template.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import { zodTextFormat } from "openai/helpers/zod";
import Anthropic from "@anthropic-ai/sdk";
import { z } from "zod";
import { generateText, streamText } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { ChatOpenAI } from "@langchain/openai";
import { models, startServer, stopServers, templates, tokenId } from "./server.mjs";

const KEY = "sk-e2e-apis";
const TINY = "qwen2-tiny-f16.gguf";
const THINK = "<think>\nhmm, the sea\n</think>\n\nIt is blue.";

let A, B, C; // { base, openai, anthropic }

// Every server here answers to the model name "m" too.
const start = (args) => startServer(["--model-alias", "m", ...args]);

function clients(port, apiKey = "unused") {
  const base = `http://127.0.0.1:${port}`;
  return {
    base,
    openai: new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0 }),
    anthropic: new Anthropic({ baseURL: base, apiKey, maxRetries: 0 }),
  };
}

let bias;

before(async () => {
  const [a, b, c] = await Promise.all([
    start(["--model", path.join(models, "aidreams260K.gguf"), "--threads", "1", "--api-key", KEY]),
    start(["--model", path.join(models, TINY), "--threads", "1"]),
    start(["--backend", "null", "--model", path.join(models, "aidreams260K.gguf"), "--chat-template",
      path.join(templates, "Qwen-Qwen3-0.6B.jinja"), "--null-reply", THINK]),
  ]);
  A = clients(a, KEY);
  B = clients(b);
  C = clients(c);
  bias = {};
  for (const [t, v] of [['"', 9], [",", 3], ["}", 4], ["]", 4], [".", 6]]) bias[await tokenId(B.base, t)] = v;
});

after(stopServers);

// ---- helpers ----------------------------------------------------------------------------

// Without what differs between two requests: ids (they carry the request id; call ids are
// random), times, and how much of the prompt the prefix cache served (the second of two equal
// requests hits it); and without what the SDKs' helpers add to the objects they return.
function norm(o) {
  if (Array.isArray(o)) return o.map(norm);
  if (!o || typeof o !== "object") return o;
  const out = {};
  const skip = ["id", "call_id", "created_at", "output_text", "_request_id", "parsed", "parsed_output", "parsed_arguments", "output_parsed"]; // SDK helpers add the parsed_*
  for (const [k, v] of Object.entries(o)) if (!skip.includes(k)) out[k] = norm(v);
  if (out.input_tokens_details) delete out.input_tokens_details.cached_tokens;
  if (out.cache_read_input_tokens !== undefined) {
    out.input_tokens += out.cache_read_input_tokens;
    delete out.cache_read_input_tokens;
  }
  return out;
}

// The Responses stream as the openai SDK's ResponseStream accumulates it, but without taking
// response.completed's object whole: the output is built from the item and delta events only.
function accumulate(events) {
  let snap;
  for (const e of events) {
    if (e.type === "response.created") snap = structuredClone(e.response);
    else if (e.type === "response.output_item.added") snap.output.push(structuredClone(e.item));
    else if (e.type === "response.content_part.added") {
      const o = snap.output[e.output_index];
      (o.content ??= []).push(structuredClone(e.part));
    } else if (e.type === "response.output_text.delta" || e.type === "response.reasoning_text.delta")
      snap.output[e.output_index].content[e.content_index].text += e.delta;
    else if (e.type === "response.function_call_arguments.delta") snap.output[e.output_index].arguments += e.delta;
    else if (e.type === "response.output_item.done") {
      const o = snap.output[e.output_index];
      if (o.status) o.status = e.item.status;
    }
  }
  return snap.output;
}

async function responseEvents(client, body) {
  const events = [];
  for await (const e of await client.responses.create({ ...body, stream: true })) events.push(e);
  return events;
}

// Every event numbered in order; the sequence OpenAI documents.
function checkSequence(events) {
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  assert.deepEqual(events.slice(0, 2).map((e) => e.type), ["response.created", "response.in_progress"]);
  const last = events.at(-1);
  assert.ok(["response.completed", "response.incomplete"].includes(last.type), last.type);
  let open = null;
  for (const e of events.slice(2, -1)) {
    if (e.type === "response.output_item.added") {
      assert.equal(open, null, "one item at a time");
      open = e.output_index;
    } else {
      assert.equal(e.output_index, open, `${e.type} belongs to the open item`);
      if (e.type === "response.output_item.done") open = null;
    }
  }
  assert.equal(open, null, "every item is done before the response");
  return last.response;
}

async function checkStreamMatches(client, body) {
  const plain = await client.responses.create(body);
  const events = await responseEvents(client, body);
  const final = checkSequence(events);
  assert.deepEqual(norm(final), norm(plain), "response.completed carries the plain answer");
  assert.deepEqual(norm(accumulate(events)), norm(plain.output), "the deltas add up to the plain output");
  // the SDK takes response.completed whole, but on response.incomplete keeps its own
  // snapshot, where items keep the status output_item.added gave them (it ignores .done)
  const sdk = await client.responses.stream(body).finalResponse();
  const noStatus = (out) => norm(out).map(({ status, ...o }) => o);
  assert.deepEqual(plain.status === "incomplete" ? noStatus(sdk.output) : norm(sdk.output),
    plain.status === "incomplete" ? noStatus(plain.output) : norm(plain.output));
  const textOf = (r) => r.output.filter((o) => o.type === "message").flatMap((o) => o.content.map((c) => c.text)).join("");
  assert.equal(textOf(sdk), plain.output_text);
  return { plain, events };
}

const weather = {
  type: "object",
  properties: { city: { type: "string", maxLength: 12 }, days: { type: "integer", minimum: 1, maximum: 7 } },
  required: ["city", "days"],
  additionalProperties: false,
};
const fitsWeather = (a) => typeof a.city === "string" && a.city.length <= 12 && Number.isInteger(a.days) && a.days >= 1 && a.days <= 7;

// ---- Responses ----------------------------------------------------------------------------

test("responses.create: plain text, the same words chat answers", async () => {
  const body = { model: "m", input: "Once upon a time", max_output_tokens: 12, temperature: 0.8, seed: 7 };
  const r = await A.openai.responses.create(body);
  assert.equal(r.object, "response");
  assert.ok(r.id.startsWith("resp_"));
  assert.equal(r.output.length, 1);
  assert.equal(r.output[0].type, "message");
  assert.equal(r.output[0].content[0].type, "output_text");
  assert.ok(r.output_text.length > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.ok(r.usage.output_tokens <= 12 && r.usage.output_tokens > 0);
  if (r.status === "incomplete") assert.equal(r.incomplete_details.reason, "max_output_tokens");
  else assert.equal(r.status, "completed");
  assert.equal(r.max_output_tokens, 12);
  const chat = await A.openai.chat.completions.create({
    model: "m", messages: [{ role: "user", content: body.input }], max_tokens: 12, temperature: 0.8, seed: 7,
  });
  assert.equal(r.output_text, chat.choices[0].message.content);
  assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
});

test("responses.create stream: OpenAI's event sequence, adding up to the plain answer", async () => {
  const { events } = await checkStreamMatches(A.openai, {
    model: "m", instructions: "Tell a story.", input: [{ role: "user", content: "A cat" }], max_output_tokens: 16, temperature: 0.8, seed: 7,
  });
  const types = events.map((e) => e.type);
  const first = types.indexOf("response.output_text.delta");
  assert.deepEqual(types.slice(2, first), ["response.output_item.added", "response.content_part.added"]);
  assert.deepEqual(types.slice(-4), ["response.output_text.done", "response.content_part.done",
    "response.output_item.done", events.at(-1).type]);
});

test("responses: cached prompt tokens in usage", async () => {
  const input = "The quick brown fox jumps over the lazy dog. ".repeat(2);
  await A.openai.responses.create({ model: "m", input, max_output_tokens: 2, temperature: 0.8, seed: 7 });
  const r = await A.openai.responses.create({ model: "m", input, max_output_tokens: 2, temperature: 0.8, seed: 7 });
  assert.ok(r.usage.input_tokens_details.cached_tokens >= 16, JSON.stringify(r.usage));
});

test("responses: a forced function tool gives a function_call with arguments fitting its schema", async () => {
  const body = {
    model: "m", input: "Weather in Paris?", max_output_tokens: 200, temperature: 1, seed: 3, logit_bias: bias,
    tools: [{ type: "function", name: "get_weather", description: "Weather", parameters: weather, strict: true }],
    tool_choice: { type: "function", name: "get_weather" }, parallel_tool_calls: false,
  };
  const { plain, events } = await checkStreamMatches(B.openai, body);
  const calls = plain.output.filter((o) => o.type === "function_call");
  assert.equal(calls.length, 1, JSON.stringify(plain.output));
  assert.equal(calls[0].name, "get_weather");
  assert.ok(calls[0].call_id.startsWith("call_"));
  assert.ok(fitsWeather(JSON.parse(calls[0].arguments)), calls[0].arguments);
  const frags = events.filter((e) => e.type === "response.function_call_arguments.delta");
  assert.ok(frags.length >= 3, `arguments arrive in fragments (${frags.length})`);
  const done = events.find((e) => e.type === "response.function_call_arguments.done");
  assert.equal(frags.map((e) => e.delta).join(""), done.arguments);
});

test("responses.parse: a json_schema text.format (zodTextFormat)", async () => {
  const person = z.object({ name: z.string().max(12), age: z.number().int().min(0).max(120) });
  let parsed;
  for (let seed = 1; !parsed && seed <= 4; seed++) {
    const r = await B.openai.responses.parse({
      model: "m", input: "A person.", max_output_tokens: 300, temperature: 1, seed, logit_bias: bias,
      text: { format: zodTextFormat(person, "person") },
    });
    if (r.status === "completed") parsed = r.output_parsed;
  }
  assert.ok(parsed, "a complete document");
  assert.ok(person.safeParse(parsed).success, JSON.stringify(parsed));
});

test("responses: thinking is a reasoning item, then the message", async () => {
  const { plain } = await checkStreamMatches(C.openai, { model: "m", input: "Why is the sea blue?" });
  assert.deepEqual(plain.output.map((o) => o.type), ["reasoning", "message"]);
  assert.equal(plain.output[0].content[0].text.trim(), "hmm, the sea");
  assert.equal(plain.output_text.trim(), "It is blue.");
  assert.ok(plain.usage.output_tokens_details.reasoning_tokens > 0);
});

test("responses: input items carry a function call round trip", async () => {
  const r = await C.openai.responses.create({
    model: "m", instructions: "Be brief.",
    input: [
      { role: "user", content: [{ type: "input_text", text: "Weather?" }] },
      { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
      { type: "function_call_output", call_id: "call_1", output: "18 C" },
    ],
    tools: [{ type: "function", name: "get_weather", parameters: weather }],
  });
  assert.equal(r.status, "completed");
  const prompt = await fetch(`${C.base}/apply-template`, {
    method: "POST",
    body: JSON.stringify({ messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Weather?" },
      { role: "assistant", tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "18 C" }], tools: [{ type: "function", function: { name: "get_weather", parameters: weather } }] }),
  }).then((x) => x.json());
  const n = await fetch(`${C.base}/tokenize`, { method: "POST", body: JSON.stringify({ content: prompt.prompt, add_special: true, parse_special: true }) })
    .then((x) => x.json());
  assert.equal(r.usage.input_tokens, n.tokens.length, "the items render as the chat messages they stand for");
});

test("responses: what a stateless server cannot do is a 400 naming the field", async () => {
  for (const [field, value] of [["store", true], ["previous_response_id", "resp_x"]]) {
    await assert.rejects(A.openai.responses.create({ model: "m", input: "x", [field]: value }),
      (e) => e.status === 400 && e.param === field, field);
  }
  await assert.rejects(A.openai.responses.create({ model: "m", input: [{ type: "input_image", image_url: "x" }] }),
    (e) => e.status === 400 && e.param === "input[0]");
});

// ---- Messages -----------------------------------------------------------------------------

const text = (m) => m.content.filter((b) => b.type === "text").map((b) => b.text).join("");

test("anthropic messages.create: text, as chat answers it (the SDK's key accepted)", async () => {
  const m = await A.anthropic.messages.create({
    model: "m", max_tokens: 12, temperature: 0.8, seed: 7, system: "Tell a story.", messages: [{ role: "user", content: "A cat" }],
  });
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.ok(m.id.startsWith("msg_"));
  assert.equal(m.content[0].type, "text");
  assert.ok(["end_turn", "max_tokens"].includes(m.stop_reason), m.stop_reason);
  assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= 12);
  const chat = await A.openai.chat.completions.create({
    model: "m", max_tokens: 12, temperature: 0.8, seed: 7,
    messages: [{ role: "system", content: "Tell a story." }, { role: "user", content: "A cat" }],
  });
  assert.equal(text(m), chat.choices[0].message.content);
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, chat.usage.prompt_tokens);
});

test("anthropic messages.stream: text; the SDK's final message is the plain one", async () => {
  const body = { model: "m", max_tokens: 16, temperature: 0.8, seed: 7, messages: [{ role: "user", content: [{ type: "text", text: "A dog" }] }] };
  const plain = await A.anthropic.messages.create(body);
  const stream = A.anthropic.messages.stream(body);
  const types = [];
  stream.on("streamEvent", (e) => types.push(e.type));
  const final = await stream.finalMessage();
  assert.deepEqual(norm(final), norm(plain));
  assert.deepEqual(types.slice(0, 3), ["message_start", "content_block_start", "content_block_delta"]);
  assert.deepEqual(types.slice(-3), ["content_block_stop", "message_delta", "message_stop"]);
});

test("anthropic: a forced tool_use, streamed and not", async () => {
  const body = {
    model: "m", max_tokens: 200, temperature: 1, seed: 3, logit_bias: bias,
    messages: [{ role: "user", content: "Weather in Paris?" }],
    tools: [{ name: "get_weather", description: "Weather", input_schema: weather }],
    tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
  };
  const plain = await B.anthropic.messages.create(body);
  assert.equal(plain.stop_reason, "tool_use");
  const uses = plain.content.filter((b) => b.type === "tool_use");
  assert.equal(uses.length, 1, JSON.stringify(plain.content));
  assert.equal(uses[0].name, "get_weather");
  assert.match(uses[0].id, /^toolu_[A-Za-z0-9]{24}$/, "Anthropic's id shape");
  assert.ok(fitsWeather(uses[0].input), JSON.stringify(uses[0].input));
  const stream = B.anthropic.messages.stream(body);
  let json = "";
  stream.on("inputJson", (d) => (json += d));
  const final = await stream.finalMessage();
  assert.deepEqual(norm(final), norm(plain));
  assert.deepEqual(JSON.parse(json), uses[0].input);
  assert.match(final.content.find((b) => b.type === "tool_use").id, /^toolu_/);
});

test("anthropic: thinking blocks, streamed and not", async () => {
  const body = { model: "m", max_tokens: 64, thinking: { type: "enabled", budget_tokens: 1024 },
    messages: [{ role: "user", content: "Why is the sea blue?" }] };
  const plain = await C.anthropic.messages.create(body);
  assert.deepEqual(plain.content.map((b) => b.type), ["thinking", "text"]);
  assert.equal(plain.content[0].thinking.trim(), "hmm, the sea");
  assert.equal(text(plain).trim(), "It is blue.");
  assert.equal(plain.stop_reason, "end_turn");
  const stream = C.anthropic.messages.stream(body);
  let thinking = "";
  stream.on("thinking", (d) => (thinking += d));
  const final = await stream.finalMessage();
  assert.deepEqual(norm(final), norm(plain));
  assert.equal(thinking, plain.content[0].thinking);
});

test("anthropic: stop_sequences end with stop_reason stop_sequence", async () => {
  const m = await C.anthropic.messages.create({
    model: "m", max_tokens: 64, stop_sequences: ["blue"], messages: [{ role: "user", content: "Sea?" }],
  });
  assert.equal(m.stop_reason, "stop_sequence");
  assert.equal(m.stop_sequence, "blue");
  assert.equal(text(m).trim(), "It is");
});

test("anthropic: a tool_result round trip renders as chat's tool messages", async () => {
  const m = await C.anthropic.messages.create({
    model: "m", max_tokens: 8, system: [{ type: "text", text: "Be brief." }],
    tools: [{ name: "get_weather", input_schema: weather }],
    messages: [
      { role: "user", content: "Weather?" },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "18 C" }] },
    ],
  });
  const count = await C.anthropic.messages.countTokens({
    model: "m", system: [{ type: "text", text: "Be brief." }], tools: [{ name: "get_weather", input_schema: weather }],
    messages: [
      { role: "user", content: "Weather?" },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "18 C" }] },
    ],
  });
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, count.input_tokens);
  const chat = await fetch(`${C.base}/v1/chat/completions`, {
    method: "POST",
    body: JSON.stringify({ max_tokens: 8, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Weather?" },
      { role: "assistant", tool_calls: [{ id: "toolu_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", tool_call_id: "toolu_1", content: "18 C" }], tools: [{ type: "function", function: { name: "get_weather", parameters: weather } }] }),
  }).then((x) => x.json());
  assert.equal(count.input_tokens, chat.usage.prompt_tokens);
});

test("anthropic countTokens: the prompt's tokens", async () => {
  const body = { model: "m", system: "Tell a story.", messages: [{ role: "user", content: "A cat" }] };
  const { input_tokens } = await A.anthropic.messages.countTokens(body);
  const m = await A.anthropic.messages.create({ ...body, max_tokens: 1 });
  assert.ok(input_tokens > 5);
  assert.equal(input_tokens, m.usage.input_tokens + m.usage.cache_read_input_tokens);
});

test("anthropic: errors in Anthropic's shape", async () => {
  await assert.rejects(A.anthropic.messages.create({ model: "m", messages: [{ role: "user", content: "x" }] }),
    (e) => e.status === 400 && e.error?.type === "error" && e.error.error.type === "invalid_request_error" &&
      /^max_tokens: /.test(e.error.error.message));
  await assert.rejects(A.anthropic.messages.create({ model: "m", max_tokens: 4, messages: [{ role: "robot", content: "x" }] }),
    (e) => e.status === 400 && /^messages\.0: /.test(e.error.error.message));
  const wrong = new Anthropic({ baseURL: A.base, apiKey: "sk-wrong", maxRetries: 0 });
  await assert.rejects(wrong.messages.create({ model: "m", max_tokens: 4, messages: [{ role: "user", content: "x" }] }),
    (e) => e.status === 401 && e.error.error.type === "authentication_error");
});

// ---- other SDKs on /v1/responses ------------------------------------------------------------

test("ai sdk: the default openai(model) provider (Responses), generateText and streamText", async () => {
  const provider = createOpenAI({ baseURL: `${A.base}/v1`, apiKey: KEY });
  // the provider does not send a seed to /v1/responses: greedy here
  const args = { model: provider("m"), prompt: "Once upon a time", maxOutputTokens: 12, temperature: 0, maxRetries: 0 };
  const { text: t, usage } = await generateText(args);
  const r = await A.openai.responses.create({ model: "m", input: "Once upon a time", max_output_tokens: 12, temperature: 0 });
  assert.equal(t, r.output_text);
  assert.equal(usage.outputTokens, r.usage.output_tokens);
  const s = streamText(args);
  let streamed = "";
  for await (const d of s.textStream) streamed += d;
  assert.equal(streamed, t);
});

test("langchain: ChatOpenAI with useResponsesApi", async () => {
  const llm = new ChatOpenAI({
    model: "m", apiKey: KEY, configuration: { baseURL: `${A.base}/v1` }, useResponsesApi: true,
    temperature: 0.8, maxTokens: 12, maxRetries: 0, modelKwargs: { seed: 7 },
  });
  const out = await llm.invoke("Once upon a time");
  const r = await A.openai.responses.create({ model: "m", input: "Once upon a time", max_output_tokens: 12, temperature: 0.8, seed: 7 });
  assert.equal(out.text, r.output_text);
});
