// Getting memories back from the live hub (its worker embeds and mines them): search,
// the context, a room's buffer and its search, a user's facts.

import assert from "node:assert/strict";
import { test } from "node:test";
import { eventually, hub, stored, unique } from "./support.mjs";

const TURNS = [
  "I adopted a cat called Miso last spring",
  "My favourite food is ramen with extra egg",
  "I work as a nurse at the city hospital",
  "The weather was rainy all week",
];

/**
 * A user's room holding TURNS, once the worker has embedded every one of them.
 * @param {string} user
 */
async function conversation(user) {
  const room = `${user}-chat`;
  await hub().memories.batch(TURNS.map((content) => ({ user, room, role: "user", content })));
  await eventually(
    async () => (await stored({ user, kind: ["message"] })).every((m) => m.embedding_status === "done"),
    {
      what: "the turns embedded",
    },
  );
  return room;
}

test("search finds a memory by meaning and by words, with a similarity in 0..1", async () => {
  const client = hub();
  const user = unique("gus");
  await conversation(user);

  // the turns only: the worker also mines them into facts, which search would find too
  const turns = /** @type {const} */ (["message"]);
  const byMeaning = await client.search({
    user,
    query: "what pet does she have?",
    mode: "vector",
    kind: [...turns],
    k: 3,
  });
  assert.equal(byMeaning.mode, "vector");
  assert.equal(byMeaning.results[0]?.memory.content, TURNS[0]);
  for (const hit of byMeaning.results) {
    assert.ok(hit.similarity !== null && hit.similarity >= 0 && hit.similarity <= 1, `similarity ${hit.similarity}`);
  }
  const byWords = await client.search({ user, query: "ramen", mode: "keyword", kind: [...turns], k: 5 });
  assert.deepEqual(
    byWords.results.map((hit) => hit.memory.content),
    [TURNS[1]],
  );
  const elsewhere = await client.search({ user: unique("nobody"), query: "cat", k: 5 });
  assert.deepEqual(elsewhere.results, []);
});

test("context puts what matters in the prompt within the budget", async () => {
  const user = unique("hal");
  const room = await conversation(user);
  const context = await hub().context({
    user,
    room,
    query: "what is the name of my cat?",
    max_tokens: 300,
    explain: true,
  });
  assert.ok(context.prompt.includes("Miso"), context.prompt);
  assert.ok(context.total_tokens > 0 && context.total_tokens <= 300, `${context.total_tokens} tokens`);
  assert.equal(context.max_tokens, 300);
  const names = context.sections.map((section) => section.name);
  assert.ok(names.includes("history"), names.join());
  const items = context.sections.flatMap((section) => section.items);
  assert.ok(items.some((item) => item.text.includes("Miso")));
});

test("buffer answers a room's window oldest first and searches its messages", async () => {
  const client = hub();
  const user = unique("ivy");
  const room = await conversation(user);
  const window = await client.buffer.get(room);
  assert.equal(window.room, room);
  assert.deepEqual(
    window.messages.map((message) => message.content),
    TURNS,
  );
  assert.equal(window.summary, null);

  const found = await client.buffer.search(room, { query: "her job at the hospital", limit: 2, recency_bias: 0 });
  assert.equal(found.method, "semantic");
  assert.equal(found.results.length, 2);
  assert.equal(found.results[0]?.memory.content, TURNS[2]);
  assert.equal(found.recency_bias, 0);
});

test("facts lists what the worker mined from a user's turns, with their sources", async () => {
  const client = hub();
  const user = unique("jo");
  const { memory } = await client.memories.add({
    user,
    role: "user",
    content: "I live in Lisbon and I work at Acme Corp.",
  });
  const facts = await eventually(
    async () => {
      const found = await client.facts(user).toArray();
      return found.length >= 2 ? found : null;
    },
    { what: "two facts mined" },
  );
  assert.deepEqual(facts.map((fact) => fact.content).sort(), ["User lives in Lisbon.", "User works at Acme Corp."]);
  for (const fact of facts) {
    assert.equal(fact.kind, "fact");
    assert.equal(fact.user, user);
    assert.deepEqual(fact.source_ids, [memory.id]);
  }
  const work = await client.facts(user, { category: "work" }).toArray();
  assert.deepEqual(
    work.map((fact) => fact.content),
    ["User works at Acme Corp."],
  );
  assert.deepEqual(await client.facts(user, { kind: ["goal"] }).toArray(), []);
});
