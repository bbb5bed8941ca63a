// What every e2e test shares: where the binary, the models and the chat templates are (the
// same environment variables as the python harness: UVLLM_BIN, UVLLM_SOURCE_DIR,
// UVLLM_SHARED), starting a real server on a port of its own, and stopping them all.
import { spawn } from "node:child_process";
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const src = process.env.UVLLM_SOURCE_DIR ?? path.join(here, "..", "..");
const shared = process.env.UVLLM_SHARED ?? path.join(src, "..", "shared");
const bin = process.env.UVLLM_BIN ?? path.join(src, "build", "uvllm");
export const models = path.join(shared, "models");
export const templates = path.join(shared, "chat-templates", "templates");

const procs = [];

// `uvllm serve --port 0 ARGS...`; resolves to the port from its "listening on" line, rejects
// when it exits first or says nothing in timeoutMs (a loaded host starts it slowly).
export function startServer(args, timeoutMs = 20000) {
  const proc = spawn(bin, ["serve", "--port", "0", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  procs.push(proc);
  return new Promise((resolve, reject) => {
    let log = "";
    const timer = setTimeout(() => reject(new Error(`no 'listening on' in ${timeoutMs / 1000} s:\n${log}`)), timeoutMs);
    proc.stderr.on("data", (d) => {
      log += d;
      const m = log.match(/listening on http:\/\/[^:\s]+:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on("exit", (code) => reject(new Error(`server exited ${code}:\n${log}`)));
  });
}

// Every server startServer started (for node:test's after()).
export function stopServers() {
  procs.forEach((p) => p.kill("SIGTERM"));
}

// The one token `text` is in the vocabulary of the server at base (for logit biases).
export async function tokenId(base, text) {
  const r = await fetch(`${base}/tokenize`, { method: "POST", body: JSON.stringify({ content: text, add_special: false }) });
  const { tokens } = await r.json();
  assert.equal(tokens.length, 1, `'${text}' is one token`);
  return tokens[0];
}
