// The hub's refusals as typed errors (400 with the field messages, 401, 403, 404, 409),
// the client's own checks, and the key kept out of everything a program may print.

import assert from "node:assert/strict";
import { test } from "node:test";
import { inspect } from "node:util";
import {
  AuthenticationError,
  BadRequest,
  Conflict,
  ConnectionFailed,
  MemoryHub,
  MemoryHubError,
  NotFound,
  PermissionDenied,
  ServerError,
} from "memoryhub-client";
import { API_KEY, HUB_URL, READ_KEY, hub, proxy, unique } from "./support.mjs";

/**
 * The error a call rejects with, checked to be of `Class` (and so a MemoryHubError).
 * @template {MemoryHubError} E
 * @param {Promise<unknown>} call
 * @param {new (...args: any[]) => E} Class
 * @returns {Promise<E>}
 */
async function failure(call, Class) {
  try {
    await call;
  } catch (error) {
    assert.ok(error instanceof Class, `${error} is not a ${Class.name}`);
    assert.ok(error instanceof MemoryHubError);
    return error;
  }
  assert.fail(`the call did not fail with ${Class.name}`);
}

/**
 * Everything a program might print of an error or a client: no key in any of it.
 * @param {unknown} thing
 * @param {string} key
 */
function assertKeyNowhere(thing, key) {
  const shown = [String(thing), JSON.stringify(thing), inspect(thing, { depth: 10, showHidden: true })];
  if (thing instanceof Error) {
    shown.push(thing.message, thing.stack ?? "");
  }
  for (const text of shown) {
    assert.ok(!text.includes(key), `the key appears in: ${text.slice(0, 200)}`);
    assert.ok(!text.includes(key.slice(-12)), `the key's tail appears in: ${text.slice(0, 200)}`);
  }
}

test("400: BadRequest names each bad field, a batch names the item", async () => {
  const client = hub();
  const error = await failure(client.memories.add({ content: "", importance: 3 }), BadRequest);
  assert.equal(error.status, 400);
  assert.deepEqual(Object.keys(error.fields).sort(), ["content", "importance"]);
  assert.ok(error.fields.importance?.[0]?.includes("1"), error.fields.importance?.join());
  assert.match(error.message, /^POST \/api\/v1\/memories\/ -> 400: .*content: .*importance: /);

  const batch = await failure(
    client.memories.batch([{ content: "fine" }, { content: "bad", kind: /** @type {any} */ ("nonsense") }]),
    BadRequest,
  );
  assert.deepEqual(Object.keys(batch.fields), ["memories[1].kind"]);
  const user = unique("none");
  assert.deepEqual(await client.memories.list({ user }).toArray(), [], "nothing of the batch was written");

  const cursor = await failure(client.memories.page({ cursor: "not-a-cursor" }), BadRequest);
  assert.deepEqual(cursor.fields, { cursor: ["Invalid cursor."] });
});

test("401: an unknown key is an AuthenticationError that does not show the key", async () => {
  const badKey = `mh_${"x".repeat(40)}`;
  const error = await failure(hub({ apiKey: badKey }).memories.page(), AuthenticationError);
  assert.equal(error.status, 401);
  assert.ok(error.detail.length > 0);
  assertKeyNowhere(error, badKey);
});

test("403: a read-only key may read but not write", async () => {
  const reader = hub({ apiKey: READ_KEY });
  const user = unique("ro");
  assert.deepEqual((await reader.memories.page({ user })).results, []);
  const error = await failure(reader.memories.add({ user, content: "not allowed" }), PermissionDenied);
  assert.equal(error.status, 403);
  assertKeyNowhere(error, READ_KEY);
  assert.equal(await hub().memories.count({ user }), 0);
});

test("404: another id is NotFound, on reads, changes and deletes alike", async () => {
  const client = hub();
  const id = globalThis.crypto.randomUUID();
  const calls = [
    () => client.memories.get(id),
    () => client.memories.update(id, { content: "x" }),
    () => client.memories.delete(id),
    () => client.documents.get(id),
  ];
  for (const call of calls) {
    const error = await failure(call(), NotFound);
    assert.equal(error.status, 404);
  }
});

test("409: a client id held by a different memory is a Conflict naming the id", async () => {
  const client = hub();
  const id = globalThis.crypto.randomUUID();
  const first = await client.memories.add({ id, content: "the first text" });
  const retried = await client.memories.add({ id, content: "the first text" });
  assert.deepEqual([first.created, retried.created, retried.memory.id], [true, false, id]);
  const error = await failure(client.memories.add({ id, content: "another text" }), Conflict);
  assert.equal(error.status, 409);
  assert.deepEqual(Object.keys(error.fields), ["id"]);
});

test("500: a ServerError carries the hub's request id, and is not retried", async () => {
  const broken = await proxy(() => ({
    status: 500,
    headers: { "X-Request-ID": "req-42" },
    body: { detail: "internal error", request_id: "req-42" },
  }));
  try {
    const error = await failure(hub({ url: broken.url }).search({ query: "x" }), ServerError);
    assert.deepEqual([error.status, error.requestId, error.detail], [500, "req-42", "internal error"]);
    assert.match(error.message, /request id req-42/);
    assert.equal(broken.seen.length, 1);
  } finally {
    await broken.close();
  }
});

test("the key never leaks: not from the client, nor from any error", async () => {
  const client = new MemoryHub({ url: HUB_URL, apiKey: API_KEY });
  assertKeyNowhere(client, API_KEY);
  assert.equal(inspect(client), `MemoryHub { url: '${HUB_URL}' }`);
  const errors = [
    await failure(client.memories.get(globalThis.crypto.randomUUID()), NotFound),
    await failure(client.memories.add({ content: "" }), BadRequest),
    await failure(
      new MemoryHub({ url: "http://127.0.0.1:9", apiKey: API_KEY, retries: 0 }).search({ query: "x" }),
      ConnectionFailed,
    ),
  ];
  for (const error of errors) {
    assertKeyNowhere(error, API_KEY);
  }
});

test("the options come from the environment and are checked", () => {
  const client = new MemoryHub();
  assert.equal(client.url, HUB_URL.replace(/\/+$/, ""));
  const saved = process.env.MEMORYHUB_API_KEY;
  delete process.env.MEMORYHUB_API_KEY;
  try {
    assert.throws(() => new MemoryHub(), /MEMORYHUB_API_KEY/);
  } finally {
    process.env.MEMORYHUB_API_KEY = saved;
  }
  assert.throws(() => new MemoryHub({ url: "", apiKey: "k" }), /MEMORYHUB_URL/);
  assert.throws(() => new MemoryHub({ timeoutMs: 0 }), RangeError);
  assert.throws(() => new MemoryHub({ retries: -1 }), RangeError);
  assert.throws(() => new MemoryHub({ retries: 1.5 }), RangeError);
});
