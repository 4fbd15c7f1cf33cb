// What a round trip through the client adds over a raw `fetch` of the same endpoint:
// p50/p95 of each, over N calls of each kind, interleaved (client, raw, raw, client, ...)
// so that the hub's own drift falls on both alike, and the median of the pairs'
// differences. Twice: against the hub, and against a local server that answers the
// hub's own response at once (no hub time, so no hub noise: the client's own cost).
//
//   MEMORYHUB_URL=http://127.0.0.1:8000 MEMORYHUB_API_KEY=mh_... node bench/overhead.mjs [--calls 200] [--json]

import { createServer } from "node:http";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { MemoryHub } from "memoryhub-client";

const { values } = parseArgs({
  options: { calls: { type: "string", default: "200" }, json: { type: "boolean", default: false } },
});
const CALLS = Number(values.calls);
const WARMUP = 20;
const url = (process.env.MEMORYHUB_URL ?? "").replace(/\/+$/, "");
const key = process.env.MEMORYHUB_API_KEY ?? "";
const headers = { Authorization: `Bearer ${key}`, Accept: "application/json", "Content-Type": "application/json" };

/** @param {number[]} sorted @param {number} q */
function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

/** @param {number[]} samples */
function summary(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: round(quantile(sorted, 0.5)), p95: round(quantile(sorted, 0.95)) };
}

/** @param {number} value */
function round(value) {
  return Math.round(value * 1000) / 1000;
}

/** @param {() => Promise<unknown>} call */
async function timed(call) {
  const started = performance.now();
  await call();
  return performance.now() - started;
}

/**
 * @param {string} name
 * @param {() => Promise<unknown>} viaClient
 * @param {() => Promise<unknown>} viaFetch
 */
async function compare(name, viaClient, viaFetch) {
  for (let i = 0; i < WARMUP; i += 1) {
    await viaClient();
    await viaFetch();
  }
  /** @type {number[]} */
  const client = [];
  /** @type {number[]} */
  const raw = [];
  for (let i = 0; i < CALLS; i += 1) {
    const clientFirst = i % 2 === 0;
    const first = await timed(clientFirst ? viaClient : viaFetch);
    const second = await timed(clientFirst ? viaFetch : viaClient);
    client.push(clientFirst ? first : second);
    raw.push(clientFirst ? second : first);
  }
  const c = summary(client);
  const r = summary(raw);
  const pairs = summary(client.map((ms, i) => ms - (raw[i] ?? 0)));
  return {
    name,
    calls: CALLS,
    client: c,
    raw: r,
    added_p50_ms: round(c.p50 - r.p50),
    added_p95_ms: round(c.p95 - r.p95),
    added_pair_median_ms: pairs.p50,
  };
}

/** @param {string} base @param {string} path @param {RequestInit} [init] */
async function rawJson(base, path, init) {
  const response = await fetch(base + path, { headers, ...init });
  if (!response.ok) {
    throw new Error(`${path} -> ${response.status}`);
  }
  return response.json();
}

/**
 * A server on this machine answering each request at once with the body the hub gave
 * for its method (JSON).
 * @param {Record<string, string>} bodies
 * @returns {Promise<{url: string, close: () => void}>}
 */
function replaying(bodies) {
  const server = createServer((request, response) => {
    const body = bodies[request.method ?? "GET"] ?? "{}";
    request.resume();
    request.on("end", () => {
      response.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
      response.end(body);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      resolve({ url: `http://127.0.0.1:${port}`, close: () => server.close() });
    });
  });
}

/**
 * The two calls measured against the hub at `base`.
 * @param {string} label
 * @param {string} base
 * @param {string} memoryId
 * @param {import("memoryhub-client").SearchInput} search
 */
async function measure(label, base, memoryId, search) {
  const hub = new MemoryHub({ url: base, apiKey: key });
  return [
    await compare(
      `${label} GET /api/v1/memories/{id}/`,
      () => hub.memories.get(memoryId),
      () => rawJson(base, `/api/v1/memories/${memoryId}/`),
    ),
    await compare(
      `${label} POST /api/v1/search/ (keyword)`,
      () => hub.search(search),
      () => rawJson(base, "/api/v1/search/", { method: "POST", body: JSON.stringify(search) }),
    ),
  ];
}

const hub = new MemoryHub({ url, apiKey: key });
const user = `bench-${globalThis.crypto.randomUUID().slice(0, 8)}`;
const { memory } = await hub.memories.add({ user, content: "I adopted a cat called Miso" });
/** @type {import("memoryhub-client").SearchInput} */
const search = { user, query: "cat", mode: "keyword", k: 5 };
const local = await replaying({
  GET: JSON.stringify(await hub.memories.get(memory.id)),
  POST: JSON.stringify(await hub.search(search)),
});
const results = [
  ...(await measure("hub", url, memory.id, search)),
  ...(await measure("local", local.url, memory.id, search)),
];
local.close();
if (values.json) {
  console.log(JSON.stringify(results));
} else {
  for (const r of results) {
    console.log(
      `${r.name}: client p50 ${r.client.p50} ms p95 ${r.client.p95} ms; raw fetch p50 ${r.raw.p50} ms p95 ${r.raw.p95} ms; ` +
        `added p50 ${r.added_p50_ms} ms p95 ${r.added_p95_ms} ms, pair median ${r.added_pair_median_ms} ms (${r.calls} calls each)`,
    );
  }
}
