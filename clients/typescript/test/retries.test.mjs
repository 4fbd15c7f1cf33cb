// Retries and timeouts: a local server before the live hub refuses, drops or stalls
// requests; the client retries what is safe to retry, with one Idempotency-Key per
// write across its attempts, and gives up in bounded time with a typed error.

import assert from "node:assert/strict";
import { test } from "node:test";
import { ConnectionFailed, NotFound, RateLimited, ServerError } from "memoryhub-client";
import { hub, proxy, silentServer, stored, unique } from "./support.mjs";

/** @param {string} seconds */
const unavailable = (seconds) => ({
  status: 503,
  headers: { "Retry-After": seconds },
  body: { detail: "database unreachable", service: "database" },
});

/** @param {import("./support.mjs").Seen[]} seen */
const keysOf = (seen) => seen.map((request) => request.headers["idempotency-key"]);

test("503 with Retry-After: waits as told, retries with the same Idempotency-Key, stores once", async () => {
  const gate = await proxy((_, index) => (index === 0 ? unavailable("1") : "forward"));
  try {
    const user = unique("ret");
    const started = Date.now();
    const { created, memory } = await hub({ url: gate.url }).memories.add({
      user,
      content: "I adopted a cat called Miso",
    });
    assert.ok(Date.now() - started >= 1_000, "Retry-After: 1 was honoured");
    assert.deepEqual([created, memory.content], [true, "I adopted a cat called Miso"]);
    assert.equal(gate.seen.length, 2);
    const [first, second] = keysOf(gate.seen);
    assert.match(String(first), /^[0-9a-f-]{36}$/);
    assert.equal(second, first);
    assert.equal(gate.seen[1]?.body, gate.seen[0]?.body);
    assert.deepEqual(
      (await stored({ user })).map((m) => m.id),
      [memory.id],
    );
  } finally {
    await gate.close();
  }
});

test("an answer lost after the hub wrote: the retry is replayed, not written twice", async () => {
  const lossy = await proxy((_, index) => (index === 0 ? "forward-then-drop" : "forward"));
  try {
    const user = unique("lost");
    const answer = await hub({ url: lossy.url }).memories.batch([
      { user, content: "one" },
      { user, content: "two" },
    ]);
    assert.equal(lossy.seen.length, 2);
    assert.equal(keysOf(lossy.seen)[1], keysOf(lossy.seen)[0]);
    assert.equal(lossy.replayed.length, 1, "the hub answered the retry from its first response");
    assert.deepEqual(
      answer.results.map((r) => r.memory.content),
      ["one", "two"],
    );
    assert.equal((await stored({ user })).length, 2);
  } finally {
    await lossy.close();
  }
});

test("a DELETE whose answer was lost: the retry's 404 means it is gone, as asked", async () => {
  const { memory } = await hub().memories.add({ user: unique("del"), content: "to forget" });
  const lossy = await proxy((_, index) => (index === 0 ? "forward-then-drop" : "forward"));
  try {
    assert.equal(await hub({ url: lossy.url }).memories.delete(memory.id), undefined);
    assert.deepEqual(
      lossy.seen.map((request) => request.method),
      ["DELETE", "DELETE"],
    );
    await assert.rejects(hub().memories.get(memory.id), NotFound);
    await assert.rejects(hub({ url: lossy.url }).memories.delete(memory.id), NotFound, "a first 404 is a 404");
  } finally {
    await lossy.close();
  }
});

test("each write gets its own key; reads carry none", async () => {
  const watched = await proxy(() => "forward");
  try {
    const client = hub({ url: watched.url });
    const user = unique("keys");
    const { memory } = await client.memories.add({ user, content: "a" });
    await client.memories.add({ user, content: "b" });
    await client.search({ user, query: "a", mode: "keyword" });
    await client.memories.get(memory.id);
    await client.memories.update(memory.id, { content: "c" });
    const keys = keysOf(watched.seen);
    assert.equal(new Set(keys.slice(0, 3)).size, 3);
    assert.deepEqual(keys.slice(3), [undefined, undefined]);
  } finally {
    await watched.close();
  }
});

test("429 and 502/504 are retried too, 429 honouring a Retry-After of 0", async () => {
  const plan = [
    { status: 429, headers: { "Retry-After": "0" }, body: { detail: "slow down" } },
    { status: 502, body: "bad gateway" },
    { status: 504 },
  ];
  const flaky = await proxy((_, index) => plan[index] ?? "forward");
  try {
    const user = unique("flaky");
    const result = await hub({ url: flaky.url }).search({ user, query: "anything" });
    assert.deepEqual(result.results, []);
    assert.equal(flaky.seen.length, 4);
    assert.equal(new Set(keysOf(flaky.seen)).size, 1);
  } finally {
    await flaky.close();
  }
});

test("retries are bounded: the last refusal is thrown after retries + 1 attempts", async () => {
  const down = await proxy(() => unavailable("0"));
  try {
    const error = await hub({ url: down.url, retries: 2 })
      .memories.add({ content: "x" })
      .catch((e) => e);
    assert.ok(error instanceof ServerError);
    assert.deepEqual([error.status, error.detail], [503, "database unreachable"]);
    assert.match(error.message, /^POST \/api\/v1\/memories\/ -> 503: database unreachable \(3 attempts\)$/);
    assert.equal(down.seen.length, 3);
  } finally {
    await down.close();
  }
});

test("a Retry-After longer than maxRetryWaitMs is not slept through", async () => {
  const limited = await proxy(() => ({
    status: 429,
    headers: { "Retry-After": "120" },
    body: { detail: "Request was throttled." },
  }));
  try {
    const started = Date.now();
    const error = await hub({ url: limited.url, maxRetryWaitMs: 5_000 })
      .memories.page()
      .catch((e) => e);
    assert.ok(error instanceof RateLimited);
    assert.deepEqual([error.status, error.retryAfterMs], [429, 120_000]);
    assert.equal(limited.seen.length, 1);
    assert.ok(Date.now() - started < 1_000);
  } finally {
    await limited.close();
  }
});

test("a hub that never answers: each attempt times out, then ConnectionFailed", async () => {
  for (const headersFirst of [false, true]) {
    const silent = await silentServer({ headersFirst });
    try {
      const started = Date.now();
      const call = hub({ url: silent.url, timeoutMs: 300, retries: 1 }).memories.add({ content: "x" });
      const error = await call.catch((e) => e);
      const elapsed = Date.now() - started;
      assert.ok(error instanceof ConnectionFailed, String(error));
      assert.equal(error.timedOut, true);
      assert.equal(error.status, 0);
      assert.match(error.message, /no answer within 300 ms, 2 attempts/);
      assert.equal(silent.connections, 2);
      assert.ok(elapsed >= 600 && elapsed < 3_000, `${elapsed} ms`);
    } finally {
      await silent.close();
    }
  }
});

test("nothing listening: ConnectionFailed after the retries, not a hang", async () => {
  const gone = await silentServer();
  const url = gone.url;
  await gone.close();
  const started = Date.now();
  const error = await hub({ url, retries: 2 })
    .memories.get("x")
    .catch((e) => e);
  assert.ok(error instanceof ConnectionFailed, String(error));
  assert.equal(error.timedOut, false);
  assert.match(error.message, /connection failed \(ECONNREFUSED\), 3 attempts/);
  assert.ok(Date.now() - started < 2_000);
});
