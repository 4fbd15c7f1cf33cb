// What the tests share: clients on the live hub the pytest session serves
// (MEMORYHUB_URL, MEMORYHUB_API_KEY, MEMORYHUB_READ_KEY), unique names, polling, and
// small local HTTP servers standing between the client and the hub (a proxy that can
// refuse, drop or forward each request; a server that never answers).

import { createServer } from "node:http";
import { MemoryHub } from "memoryhub-client";

export const HUB_URL = required("MEMORYHUB_URL");
export const API_KEY = required("MEMORYHUB_API_KEY");
export const READ_KEY = required("MEMORYHUB_READ_KEY");

/** @param {string} name */
function required(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(
      `the client's tests run against a live hub: set ${name} (tests/clients/test_typescript_client.py does)`,
    );
  }
  return value;
}

/** @param {import("memoryhub-client").MemoryHubOptions} [options] */
export function hub(options = {}) {
  return new MemoryHub({ backoffMs: 10, ...options });
}

/** A name no other test uses: each test writes under its own users and rooms. */
export function unique(/** @type {string} */ prefix) {
  return `${prefix}-${globalThis.crypto.randomUUID().slice(0, 8)}`;
}

/**
 * Call `probe` until it returns something truthy; that value.
 * @template T
 * @param {() => Promise<T>} probe
 * @param {{timeoutMs?: number, intervalMs?: number, what?: string}} [options]
 * @returns {Promise<NonNullable<T>>}
 */
export async function eventually(probe, { timeoutMs = 120_000, intervalMs = 250, what = "condition" } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) {
      return /** @type {NonNullable<T>} */ (value);
    }
    if (Date.now() > deadline) {
      throw new Error(`${what} not met within ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Every memory of the hub's list for these filters, with the read-write key. */
export async function stored(/** @type {import("memoryhub-client").MemoryFilters} */ filters) {
  return hub().memories.list(filters).toArray();
}

/**
 * @typedef {{method: string, path: string, headers: import("node:http").IncomingHttpHeaders, body: string}} Seen
 * @typedef {{status: number, headers?: Record<string, string>, body?: unknown}} Canned
 * @typedef {"forward" | "drop" | "forward-then-drop" | Canned} Step
 * @typedef {(seen: Seen, index: number) => Step} Plan
 */

/**
 * A local HTTP server before the hub. For the n-th request `plan(seen, n)` says what
 * to do: answer it (`{status, headers, body}`), "drop" the connection unanswered,
 * "forward" it to the hub and pass the answer back, or "forward-then-drop" (the hub
 * did the work, the answer is lost on the way). `seen` lists the requests as they came;
 * `replayed` the hub's `Idempotent-Replayed` answers.
 * @param {Plan} plan
 */
export async function proxy(plan) {
  /** @type {Seen[]} */
  const seen = [];
  /** @type {Seen[]} */
  const replayed = [];
  const server = createServer(async (request, response) => {
    const chunks = [];
    for await (const chunk of request) {
      chunks.push(chunk);
    }
    const body = Buffer.concat(chunks);
    const entry = {
      method: request.method ?? "",
      path: request.url ?? "",
      headers: request.headers,
      body: body.toString(),
    };
    seen.push(entry);
    const step = plan(entry, seen.length - 1);
    if (step === "drop") {
      request.socket.destroy();
      return;
    }
    if (typeof step === "object") {
      const text = step.body === undefined ? "" : JSON.stringify(step.body);
      response.writeHead(step.status, { "Content-Type": "application/json", ...step.headers });
      response.end(text);
      return;
    }
    const answer = await forward(request, body);
    if (answer.headers.get("idempotent-replayed")) {
      replayed.push(entry);
    }
    if (step === "forward-then-drop") {
      request.socket.destroy();
      return;
    }
    response.writeHead(answer.status, { "Content-Type": answer.headers.get("content-type") ?? "application/json" });
    response.end(Buffer.from(await answer.arrayBuffer()));
  });
  const url = await listen(server);
  return { url, seen, replayed, close: () => close(server) };
}

/**
 * @param {import("node:http").IncomingMessage} request
 * @param {Buffer} body
 */
function forward(request, body) {
  /** @type {Record<string, string>} */
  const headers = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (typeof value === "string" && !["host", "connection", "content-length"].includes(name)) {
      headers[name] = value;
    }
  }
  const method = request.method ?? "GET";
  return fetch(HUB_URL + (request.url ?? "/"), {
    method,
    headers,
    body: method === "GET" || method === "DELETE" ? undefined : new Uint8Array(body),
  });
}

/**
 * A server that takes each connection and never answers (with `headersFirst`, it
 * sends the status line and headers, then nothing more). `connections` counts them.
 */
export async function silentServer({ headersFirst = false } = {}) {
  const state = { connections: 0 };
  const server = createServer((request, response) => {
    state.connections += 1;
    if (headersFirst) {
      response.writeHead(200, { "Content-Type": "application/json", "Content-Length": "1000" });
      response.write("{");
    }
  });
  const url = await listen(server);
  return {
    url,
    get connections() {
      return state.connections;
    },
    close: () => {
      server.closeAllConnections();
      return close(server);
    },
  };
}

/** @param {import("node:http").Server} server */
function listen(server) {
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      resolve(`http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`);
    });
  });
}

/** @param {import("node:http").Server} server */
function close(server) {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve(undefined)));
}
