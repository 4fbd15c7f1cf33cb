// Memories against the live hub: add, batch, get, update, delete, and the list's pages.

import assert from "node:assert/strict";
import { test } from "node:test";
import { NotFound, Pages } from "memoryhub-client";
import { hub, proxy, stored, unique } from "./support.mjs";

test("add stores a memory and answers it whole; unique skips a text stored as unique", async () => {
  const client = hub();
  const user = unique("ada");
  const first = await client.memories.add({
    user,
    room: "chat-1",
    role: "user",
    content: "I adopted a cat called Miso",
    metadata: { channel: "web" },
    importance: 0.7,
    unique: true,
  });
  assert.equal(first.created, true);
  const memory = first.memory;
  assert.match(memory.id, /^[0-9a-f-]{36}$/);
  assert.deepEqual(
    [memory.user, memory.room, memory.kind, memory.role, memory.content, memory.metadata, memory.importance],
    [user, "chat-1", "message", "user", "I adopted a cat called Miso", { channel: "web" }, 0.7],
  );
  const again = await client.memories.add({
    user,
    room: "chat-1",
    role: "user",
    content: "I adopted a cat called Miso",
    unique: true,
  });
  assert.equal(again.created, false);
  assert.equal(again.memory.id, memory.id);
  assert.equal((await stored({ user })).length, 1);
});

test("batch stores every memory in the order given", async () => {
  const user = unique("bob");
  const contents = ["first turn", "second turn", "third turn"];
  const answer = await hub().memories.batch(contents.map((content) => ({ user, room: "r", role: "user", content })));
  assert.deepEqual(
    answer.results.map((result) => [result.created, result.memory.content]),
    contents.map((content) => [true, content]),
  );
  const ids = (await stored({ user, order: "asc" })).map((memory) => memory.id);
  assert.deepEqual(
    ids,
    answer.results.map((result) => result.memory.id),
  );
});

test("get, update and delete one memory", async () => {
  const client = hub();
  const user = unique("cy");
  const { memory } = await client.memories.add({ user, kind: "fact", content: "User likes tea.", confidence: 0.6 });
  const read = await client.memories.get(memory.id);
  assert.deepEqual([read.id, read.kind, read.content, read.confidence], [memory.id, "fact", "User likes tea.", 0.6]);

  const changed = await client.memories.update(memory.id, { content: "User likes green tea.", pinned: true });
  assert.deepEqual([changed.content, changed.pinned], ["User likes green tea.", true]);
  assert.equal((await client.memories.get(memory.id)).content, "User likes green tea.");

  assert.equal(await client.memories.delete(memory.id), undefined);
  await assert.rejects(client.memories.get(memory.id), (error) => error instanceof NotFound && error.status === 404);
  assert.deepEqual(await stored({ user }), []);
});

test("list walks every page once, newest first, fetching a page only when needed", async () => {
  const client = hub();
  const user = unique("dee");
  const base = Date.parse("2026-01-01T00:00:00Z");
  const batch = Array.from({ length: 7 }, (_, i) => ({
    user,
    room: i % 2 ? "odd" : "even",
    content: `turn ${i}`,
    created_at: new Date(base + i * 60_000).toISOString(),
  }));
  await client.memories.batch(batch);

  const list = client.memories.list({ user }, 3);
  assert.ok(list instanceof Pages);
  const pages = [];
  for await (const page of list.pages()) {
    pages.push(page);
  }
  assert.deepEqual(
    pages.map((page) => [page.count, page.results.length, page.next_cursor === null]),
    [
      [7, 3, false],
      [7, 3, false],
      [7, 1, true],
    ],
  );
  const rows = await list.toArray();
  assert.deepEqual(
    rows.map((memory) => memory.content),
    ["turn 6", "turn 5", "turn 4", "turn 3", "turn 2", "turn 1", "turn 0"],
  );

  const watched = await proxy(() => "forward");
  try {
    let rows = 0;
    for await (const memory of hub({ url: watched.url }).memories.list({ user, room: "odd", order: "asc" }, 2)) {
      assert.equal(memory.room, "odd");
      rows += 1;
      if (rows === 2) {
        break;
      }
    }
    assert.equal(rows, 2);
    assert.equal(watched.seen.length, 1, "no page past the first was asked for");
  } finally {
    await watched.close();
  }
  assert.equal(await client.memories.count({ user, room: "even" }), 4);
});

test("page answers one page and its cursor leads to the next", async () => {
  const client = hub();
  const user = unique("eve");
  await client.memories.batch(["a", "b", "c"].map((content) => ({ user, content })));
  const first = await client.memories.page({ user, limit: 2, order: "asc" });
  assert.deepEqual([first.count, first.results.map((m) => m.content)], [3, ["a", "b"]]);
  assert.equal(typeof first.next_cursor, "string");
  const second = await client.memories.page({ user, limit: 2, order: "asc", cursor: first.next_cursor ?? undefined });
  assert.deepEqual([second.results.map((m) => m.content), second.next_cursor], [["c"], null]);
});

test("list filters by kind: several kinds at once", async () => {
  const client = hub();
  const user = unique("fay");
  await client.memories.batch([
    { user, content: "hello" },
    { user, kind: "fact", content: "User is a pilot." },
    { user, kind: "goal", content: "Fly to Lisbon", content_json: { due: "2027-01-01" } },
  ]);
  const kinds = (await client.memories.list({ user, kind: ["fact", "goal"] }).toArray()).map((m) => m.kind).sort();
  assert.deepEqual(kinds, ["fact", "goal"]);
});
