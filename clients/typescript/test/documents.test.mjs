// Documents against the live hub and its worker: a text and a file's bytes in, followed
// to the end, found by search with their source.

import assert from "node:assert/strict";
import { test } from "node:test";
import { WaitTimedOut } from "memoryhub-client";
import { hub, proxy, unique } from "./support.mjs";

const REFUNDS = "# Refunds\n\nRefunds are paid within 14 days of the return reaching our warehouse.\n";
const DESCALING = "# Care\n\n## Descaling\n\nDescale the Aurora 3000 kettle every month with citric acid.\n";

test("a text document is ingested and search finds it with its source", async () => {
  const client = hub();
  const user = unique("kim");
  const upload = await client.documents.uploadText({ text: REFUNDS, source: "refunds.md", user, chunker: "recursive" });
  assert.deepEqual([upload.source, upload.user, upload.duplicate, upload.scope], ["refunds.md", user, false, "user"]);
  assert.ok(["queued", "parsing", "chunking", "embedding", "done"].includes(upload.status ?? ""), upload.status);

  /** @type {(string | undefined)[]} */
  const seen = [];
  const done = await client.documents.waitUntilDone(upload.id, {
    intervalMs: 200,
    onProgress: (d) => seen.push(d.status),
  });
  assert.equal(done.status, "done", done.error);
  assert.equal(done.progress.percent, 100);
  assert.equal(seen.at(-1), "done");
  assert.deepEqual(await client.documents.get(upload.id), done);

  const hits = await client.search({ user, query: "how long until I get my money back?", kind: ["knowledge"], k: 3 });
  const hit = hits.results[0];
  assert.ok(hit && hit.memory.content.includes("14 days"), JSON.stringify(hits.results));
  assert.equal(/** @type {any} */ (hit.memory.content_json).document.source, "refunds.md");
});

test("a file's bytes are uploaded as multipart; the same bytes again are the same document", async () => {
  const client = hub();
  const bytes = new TextEncoder().encode(DESCALING);
  const upload = await client.documents.upload(bytes, {
    filename: "kettle.md",
    title: "Aurora 3000 manual",
    metadata: { team: "ops" },
    chunker: "recursive",
    chunker_settings: { chunk_size: 200, chunk_overlap: 0 },
  });
  assert.deepEqual(
    [upload.title, upload.source, upload.scope, upload.metadata],
    ["Aurora 3000 manual", "kettle.md", "project", { team: "ops" }],
  );
  assert.deepEqual(upload.chunker_settings, { chunk_size: 200, chunk_overlap: 0 });
  const done = await client.documents.waitUntilDone(upload.id, { intervalMs: 200 });
  assert.equal(done.status, "done", done.error);

  const again = await client.documents.upload(new Blob([DESCALING]), { filename: "kettle.md" });
  assert.deepEqual([again.duplicate, again.id], [true, upload.id]);
  const hits = await client.search({
    query: "how often should I descale it?",
    kind: ["knowledge"],
    document: upload.id,
    k: 1,
  });
  assert.ok(hits.results[0]?.memory.content.includes("citric acid"));
  assert.equal(/** @type {any} */ (hits.results[0]?.memory.content_json).heading[0], "Care");
});

test("waitUntilDone gives up after its timeout on a document that stays queued", async () => {
  const id = globalThis.crypto.randomUUID();
  const queued = {
    id,
    source: "stuck.md",
    user: null,
    scope: "project",
    sha256: "",
    chunker: "recursive",
    status: "queued",
    progress: { done: 0, total: 0, percent: 0 },
  };
  const stuck = await proxy(() => ({ status: 200, body: queued }));
  try {
    const started = Date.now();
    await assert.rejects(
      hub({ url: stuck.url }).documents.waitUntilDone(id, { timeoutMs: 600, intervalMs: 100 }),
      (error) => {
        assert.ok(error instanceof WaitTimedOut);
        assert.match(error.message, /still queued after 600 ms/);
        return true;
      },
    );
    assert.ok(Date.now() - started < 2_000);
    assert.ok(stuck.seen.length >= 4 && stuck.seen.every((request) => request.path === `/api/v1/documents/${id}/`));
  } finally {
    await stuck.close();
  }
});
