// Structured output and tool calls through the SDKs as their users call them: the OpenAI SDK
// (zodResponseFormat + parse for each zod feature the SDK writes as JSON Schema, runTools with
// tool_choice "required", a streamed tool call), the Vercel AI SDK (generateObject) and
// LangChain (withStructuredOutput, json_schema and function calling). The server is the real
// binary with qwen2-tiny-f16 (random weights, GPT-2 vocabulary): what it writes is whatever
// the grammar lets through, so every answer below is the constraint's work. A logit bias
// towards the tokens that close strings and containers lets documents finish in max_tokens
// (every SDK passes it through).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";
import { generateObject } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { ChatOpenAI } from "@langchain/openai";
import { models, startServer, stopServers, tokenId } from "./server.mjs";

const MODEL = "qwen2-tiny-f16.gguf";

let base, client, bias;

before(async () => {
  base = `http://127.0.0.1:${await startServer(["--model", path.join(models, MODEL), "--threads", "2"])}`;
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
  bias = {};
  for (const [t, b] of [['"', 9], [",", 3], ["}", 4], ["]", 4], ["@", 9], [".", 6]]) bias[await tokenId(base, t)] = b;
});

after(stopServers);

const messages = [{ role: "user", content: "Fill in the form." }];
const sampling = () => ({ max_tokens: 500, temperature: 1, logit_bias: bias });

// Tries a few seeds: a document cut by max_tokens is the SDK's LengthFinishReasonError.
async function parsed(schema, name) {
  let last;
  for (let seed = 1; seed <= 4; seed++) {
    try {
      const r = await client.chat.completions.parse({
        model: MODEL, messages, ...sampling(), seed, response_format: zodResponseFormat(schema, name),
      });
      return r.choices[0].message.parsed;
    } catch (e) {
      if (e?.constructor?.name !== "LengthFinishReasonError") throw e;
      last = e;
    }
  }
  throw last;
}

const features = {
  "int with min/max": z.object({ n: z.number().int().min(-5).max(500) }),
  "int (safe-integer bounds)": z.object({ n: z.number().int() }),
  positive: z.object({ p: z.number().positive() }),
  email: z.object({ email: z.string().email() }),
  uuid: z.object({ id: z.string().uuid() }),
  datetime: z.object({ at: z.string().datetime() }),
  url: z.object({ link: z.string().url() }),
  regex: z.object({ code: z.string().regex(/^[A-Z]{3}-\d{2}$/) }),
  "discriminated union": z.object({
    shape: z.discriminatedUnion("type", [
      z.object({ type: z.literal("circle"), r: z.number().positive() }),
      z.object({ type: z.literal("rect"), w: z.number().int().min(1).max(9), h: z.number() }),
    ]),
  }),
  nullable: z.object({ nick: z.string().max(8).nullable(), n: z.number().int().nullable() }),
};

for (const [feature, schema] of Object.entries(features)) {
  test(`openai: zodResponseFormat + parse, ${feature}`, async () => {
    const v = await parsed(schema, "form");
    assert.ok(v, "parsed");
    const check = schema.safeParse(v);
    assert.ok(check.success, JSON.stringify({ v, issues: check.error?.issues }));
  });
}

test("openai: a schema feature that cannot be enforced is a 400 naming it", async () => {
  await assert.rejects(
    client.chat.completions.create({
      model: MODEL, messages, max_tokens: 4,
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", not: {} } } },
    }),
    (e) => e.status === 400 && /keyword 'not'/.test(e.message),
  );
});

const weather = {
  type: "object",
  properties: { city: { type: "string", maxLength: 12 }, days: { type: "integer", minimum: 1, maximum: 7 } },
  required: ["city", "days"],
  additionalProperties: false,
};

test("openai: runTools with tool_choice required calls the tool with valid arguments", async () => {
  const calls = [];
  const runner = client.chat.completions.runTools(
    {
      model: MODEL, messages: [{ role: "user", content: "Weather in Paris?" }], ...sampling(), seed: 3,
      tool_choice: "required", parallel_tool_calls: false,
      tools: [{
        type: "function",
        function: {
          name: "get_weather", parameters: weather, parse: JSON.parse,
          function: async (args) => { calls.push(args); return "18 C"; },
        },
      }],
    },
    { maxChatCompletions: 2 },
  );
  await runner.done().catch(() => {}); // tool_choice required never lets it answer in text
  assert.ok(calls.length >= 1, "the tool was called");
  for (const a of calls) {
    assert.equal(typeof a.city, "string");
    assert.ok(a.city.length <= 12);
    assert.ok(Number.isInteger(a.days) && a.days >= 1 && a.days <= 7, JSON.stringify(a));
  }
});

test("openai: a streamed tool call: id and name first, then argument fragments", async () => {
  const stream = await client.chat.completions.create({
    model: MODEL, messages: [{ role: "user", content: "Weather?" }], ...sampling(), seed: 5, stream: true,
    tools: [{ type: "function", function: { name: "get_weather", parameters: weather } }],
    tool_choice: { type: "function", function: { name: "get_weather" } }, parallel_tool_calls: false,
  });
  const deltas = [];
  let finish;
  for await (const c of stream) {
    const ch = c.choices[0];
    if (ch?.delta?.tool_calls) deltas.push(...ch.delta.tool_calls);
    if (ch?.finish_reason) finish = ch.finish_reason;
  }
  assert.equal(finish, "tool_calls");
  assert.ok(deltas[0].id.startsWith("call_"));
  assert.equal(deltas[0].function.name, "get_weather");
  const frags = deltas.slice(1).map((d) => d.function.arguments);
  assert.ok(frags.length >= 3, `arguments arrive in fragments (${frags.length})`);
  assert.ok(deltas.slice(1).every((d) => d.index === 0 && d.id === undefined));
  const args = JSON.parse(frags.join(""));
  assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, JSON.stringify(args));
});

const person = z.object({
  name: z.string().max(12), age: z.number().int().min(0).max(120), email: z.string().email(),
});

test("ai sdk: generateObject", async () => {
  const provider = createOpenAI({ baseURL: `${base}/v1`, apiKey: "unused" });
  let object;
  for (let seed = 1; !object && seed <= 4; seed++) {
    try {
      ({ object } = await generateObject({
        model: provider.chat(MODEL), schema: person, prompt: "A person.", seed, temperature: 1,
        maxOutputTokens: 500, maxRetries: 0, providerOptions: { openai: { logitBias: bias } },
      }));
    } catch (e) {
      if (!/finish|parse|length|JSON/i.test(String(e?.message))) throw e;
      console.error("generateObject:", String(e?.message).slice(0, 300));
    }
  }
  assert.ok(object, "an object");
  assert.ok(person.safeParse(object).success, JSON.stringify(object));
});

for (const method of ["jsonSchema", "functionCalling"]) {
  test(`langchain: withStructuredOutput (${method})`, async () => {
    let out;
    for (let seed = 1; !out && seed <= 4; seed++) {
      const llm = new ChatOpenAI({
        model: MODEL, apiKey: "unused", configuration: { baseURL: `${base}/v1` }, temperature: 1,
        maxTokens: 500, logitBias: bias, maxRetries: 0, modelKwargs: { seed },
      });
      try {
        out = await llm.withStructuredOutput(person, { method, name: "person" }).invoke("A person.");
      } catch (e) {
        if (!/parse|length|JSON|tool/i.test(String(e?.message))) throw e;
        console.error("langchain:", String(e?.message).slice(0, 300));
      }
    }
    assert.ok(out, "an object");
    assert.ok(person.safeParse(out).success, JSON.stringify(out));
  });
}
