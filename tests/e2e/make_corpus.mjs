// Writes tests/e2e/corpus/: JSON Schemas as the SDKs write them, for
// tests/integration/test_schema_corpus.py (every finished output must validate with an
// independent validator).
//  - zod-*.json: zod 4 schemas through the OpenAI SDK's zodResponseFormat (exactly what
//    `client.chat.completions.parse` sends: the SDK's own conversion, strict mode).
//  - pydantic-*.json: pydantic v2 models' model_json_schema() output. pydantic is not
//    installable here (Debian and npm only), so these are written out by hand in the shape
//    pydantic 2.x produces (titles, $defs/$ref, Optional as anyOf with null and a default,
//    Literal as const, discriminated unions as oneOf + discriminator, constr/conint/
//    confloat/conlist bounds, EmailStr/UUID/datetime/date/time/IPv4Address/AnyUrl formats,
//    Tuple as prefixItems, Dict as additionalProperties).
// usage: node make_corpus.mjs   (rewrites the directory; commit the result)
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { zodResponseFormat } from "openai/helpers/zod";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, "corpus");
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out);

const zods = {
  int: z.object({ n: z.number().int() }),
  int_range: z.object({ age: z.number().int().min(0).max(120) }),
  int_positive: z.object({ count: z.number().int().positive() }),
  int_negative: z.object({ debt: z.number().int().negative() }),
  int_multiple: z.object({ step: z.number().int().multipleOf(5) }),
  number_range: z.object({ ratio: z.number().min(0).max(1) }),
  number_positive: z.object({ price: z.number().positive() }),
  number_lt: z.object({ temp: z.number().gt(-40).lt(60) }),
  email: z.object({ email: z.string().email() }),
  uuid: z.object({ id: z.string().uuid() }),
  datetime: z.object({ at: z.string().datetime() }),
  date: z.object({ day: z.string().date() }),
  time: z.object({ clock: z.string().time() }),
  url: z.object({ link: z.string().url() }),
  regex: z.object({ code: z.string().regex(/^[A-Z]{3}-\d{2}$/) }),
  regex_alt: z.object({ size: z.string().regex(/^(small|medium|large)$/) }),
  ipv4: z.object({ ip: z.string().ipv4?.() ?? z.ipv4() }),
  nullable: z.object({ nick: z.string().nullable(), age: z.number().int().nullable() }),
  optional_nullable: z.object({ a: z.string().max(9), b: z.string().max(9).optional().nullable() }),
  enum: z.object({ color: z.enum(["red", "green", "blue"]) }),
  literal: z.object({ kind: z.literal("point"), x: z.number(), y: z.number() }),
  bool_array: z.object({ flags: z.array(z.boolean()).min(1).max(3) }),
  string_len: z.object({ word: z.string().min(2).max(8) }),
  nested: z.object({ user: z.object({ name: z.string().max(20), tags: z.array(z.string().max(10)).max(3) }) }),
  discriminated: z.object({
    shape: z.discriminatedUnion("type", [
      z.object({ type: z.literal("circle"), r: z.number().positive() }),
      z.object({ type: z.literal("rect"), w: z.number(), h: z.number() }),
    ]),
  }),
  union: z.object({ v: z.union([z.string().max(5), z.number().int()]) }),
  tuple: z.object({ pair: z.tuple([z.string().max(5), z.number().int()]) }),
  record_like: z.object({ scores: z.array(z.object({ k: z.string().max(8), v: z.number() })).max(3) }),
  mixed: z.object({
    id: z.string().uuid(), email: z.string().email(), n: z.number().int().min(1).max(9),
    when: z.string().date(), ok: z.boolean(),
  }),
  deep: z.object({ a: z.object({ b: z.object({ c: z.object({ d: z.number().int() }) }) }) }),
  array_objects: z.object({ items: z.array(z.object({ sku: z.string().regex(/^[0-9]{4}$/), qty: z.number().int().min(1).max(9) })).min(1).max(2) }),
  nullable_object: z.object({ addr: z.object({ city: z.string().max(12) }).nullable() }),
  enum_array: z.object({ days: z.array(z.enum(["mon", "tue", "wed"])).max(3) }),
  literal_union: z.object({ mode: z.union([z.literal("fast"), z.literal("slow")]) }),
  number_int_mix: z.object({ lat: z.number().min(-90).max(90), lon: z.number().min(-180).max(180) }),
  recipe: z.object({
    title: z.string().max(30), servings: z.number().int().min(1).max(12),
    steps: z.array(z.string().max(40)).min(1).max(3),
  }),
  event: z.object({ name: z.string().max(20), start: z.string().datetime(), attendees: z.array(z.string().email()).max(2) }),
  product: z.object({ sku: z.string().regex(/^[A-Z]{2}\d{4}$/), price: z.number().positive(), tags: z.array(z.enum(["new", "sale"])).max(2) }),
  triage: z.object({ severity: z.enum(["low", "high"]), component: z.string().max(15), reproducible: z.boolean() }),
  contact: z.object({ phone: z.string().regex(/^\+?[0-9]{7,12}$/), email: z.string().email().nullable() }),
  weather: z.object({ city: z.string().max(15), celsius: z.number().int().min(-50).max(60), sky: z.enum(["sun", "rain", "snow"]) }),
  sentiment: z.object({ label: z.enum(["pos", "neg", "neu"]), score: z.number().min(0).max(1) }),
  ids: z.object({ ids: z.array(z.string().uuid()).min(1).max(2) }),
};
let n = 0;
for (const [name, schema] of Object.entries(zods)) {
  const rf = zodResponseFormat(schema, name);
  fs.writeFileSync(path.join(out, `zod-${name}.json`), JSON.stringify(rf.json_schema.schema, null, 1) + "\n");
  n++;
}

const str = (title, extra = {}) => ({ title, type: "string", ...extra });
const pyd = {
  user: {
    $defs: { Address: { properties: { street: str("Street", { maxLength: 30 }), city: str("City", { maxLength: 20 }), zip: str("Zip", { pattern: "^\\d{5}$" }) }, required: ["street", "city", "zip"], title: "Address", type: "object" } },
    properties: { name: str("Name", { maxLength: 20 }), age: { exclusiveMinimum: 0, title: "Age", type: "integer", maximum: 130 }, email: { format: "email", title: "Email", type: "string" }, nickname: { anyOf: [{ type: "string", maxLength: 10 }, { type: "null" }], default: null, title: "Nickname" }, address: { $ref: "#/$defs/Address" } },
    required: ["name", "age", "email", "address"], title: "User", type: "object",
  },
  color_enum: {
    $defs: { Color: { enum: ["red", "green", "blue"], title: "Color", type: "string" } },
    properties: { primary: { $ref: "#/$defs/Color" }, secondary: { $ref: "#/$defs/Color", default: "red" } },
    required: ["primary"], title: "Palette", type: "object",
  },
  literal_const: { properties: { kind: { const: "cat", enum: ["cat"], title: "Kind", type: "string" }, lives: { maximum: 9, minimum: 0, title: "Lives", type: "integer" } }, required: ["kind", "lives"], title: "Cat", type: "object" },
  pets_discriminated: {
    $defs: {
      Cat: { properties: { pet_type: { const: "cat", title: "Pet Type", type: "string" }, meows: { title: "Meows", type: "integer", minimum: 0, maximum: 99 } }, required: ["pet_type", "meows"], title: "Cat", type: "object" },
      Dog: { properties: { pet_type: { const: "dog", title: "Pet Type", type: "string" }, barks: { title: "Barks", type: "number", minimum: 0, maximum: 10 } }, required: ["pet_type", "barks"], title: "Dog", type: "object" },
    },
    properties: { pet: { discriminator: { mapping: { cat: "#/$defs/Cat", dog: "#/$defs/Dog" }, propertyName: "pet_type" }, oneOf: [{ $ref: "#/$defs/Cat" }, { $ref: "#/$defs/Dog" }], title: "Pet" } },
    required: ["pet"], title: "Model", type: "object",
  },
  constrained: { properties: { code: str("Code", { pattern: "^[a-z]{2}_[0-9]{2}$" }), level: { maximum: 10, minimum: 1, title: "Level", type: "integer" }, ratio: { exclusiveMaximum: 1, exclusiveMinimum: 0, title: "Ratio", type: "number" }, even: { multipleOf: 2, title: "Even", type: "integer", minimum: 0, maximum: 20 } }, required: ["code", "level", "ratio", "even"], title: "Constrained", type: "object" },
  conlist: { properties: { values: { items: { type: "integer", minimum: 0, maximum: 99 }, maxItems: 3, minItems: 1, title: "Values", type: "array" } }, required: ["values"], title: "Bag", type: "object" },
  tuple: { properties: { point: { maxItems: 2, minItems: 2, prefixItems: [{ type: "integer", minimum: -9, maximum: 9 }, { type: "string", maxLength: 4 }], title: "Point", type: "array" } }, required: ["point"], title: "Tagged", type: "object" },
  dict: { properties: { counts: { additionalProperties: { type: "integer", minimum: 0, maximum: 9 }, title: "Counts", type: "object", maxProperties: 3 } }, required: ["counts"], title: "Counter", type: "object" },
  formats: { properties: { id: { format: "uuid", title: "Id", type: "string" }, when: { format: "date-time", title: "When", type: "string" }, day: { format: "date", title: "Day", type: "string" }, at: { format: "time", title: "At", type: "string" }, ip: { format: "ipv4", title: "Ip", type: "string" }, ip6: { format: "ipv6", title: "Ip6", type: "string" } }, required: ["id", "when", "day", "at", "ip", "ip6"], title: "Stamped", type: "object" },
  url: { properties: { homepage: { format: "uri", maxLength: 2083, minLength: 1, title: "Homepage", type: "string" } }, required: ["homepage"], title: "Site", type: "object" },
  recursive: {
    $defs: { Node: { properties: { value: { title: "Value", type: "integer", minimum: 0, maximum: 9 }, children: { items: { $ref: "#/$defs/Node" }, maxItems: 2, title: "Children", type: "array" } }, required: ["value", "children"], title: "Node", type: "object" } },
    $ref: "#/$defs/Node",
  },
  optional_fields: { properties: { a: { anyOf: [{ type: "integer", minimum: 0, maximum: 5 }, { type: "null" }], default: null, title: "A" }, b: { anyOf: [{ type: "string", maxLength: 6 }, { type: "null" }], default: null, title: "B" }, c: { default: true, title: "C", type: "boolean" } }, title: "Opts", type: "object" },
  strlen: { properties: { handle: { maxLength: 12, minLength: 3, title: "Handle", type: "string" }, bio: { maxLength: 30, title: "Bio", type: "string" } }, required: ["handle"], title: "Profile", type: "object" },
  nested_list: {
    $defs: { Item: { properties: { name: str("Name", { maxLength: 10 }), qty: { minimum: 1, maximum: 5, title: "Qty", type: "integer" } }, required: ["name", "qty"], title: "Item", type: "object" } },
    properties: { items: { items: { $ref: "#/$defs/Item" }, maxItems: 2, title: "Items", type: "array" }, total: { title: "Total", type: "number", minimum: 0, maximum: 1000 } },
    required: ["items", "total"], title: "Order", type: "object",
  },
  enum_int: { properties: { priority: { enum: [1, 2, 3], title: "Priority", type: "integer" }, label: { enum: ["a", "b"], title: "Label", type: "string" } }, required: ["priority", "label"], title: "Task", type: "object" },
  email_list: { properties: { to: { items: { format: "email", type: "string" }, maxItems: 2, minItems: 1, title: "To", type: "array" }, subject: str("Subject", { maxLength: 20 }) }, required: ["to", "subject"], title: "Mail", type: "object" },
  allof_ref: {
    $defs: { Base: { properties: { id: { title: "Id", type: "integer", minimum: 0, maximum: 99 } }, required: ["id"], title: "Base", type: "object" } },
    properties: { base: { allOf: [{ $ref: "#/$defs/Base" }], description: "the base" } },
    required: ["base"], title: "Wrapper", type: "object",
  },
};
for (const [name, schema] of Object.entries(pyd)) {
  fs.writeFileSync(path.join(out, `pydantic-${name}.json`), JSON.stringify(schema, null, 1) + "\n");
  n++;
}
console.log(`${n} schemas in ${out}`);
