/**
 * `MemoryHub`: the hub's core calls for an agent written in TypeScript. Each method is
 * one endpoint of `/api/v1/`, takes the API's own field names and returns the hub's
 * answer as the schema types it (see types.ts); failures are `MemoryHubError`s.
 */
import { Documents } from "./documents.js";
import { Pages } from "./pages.js";
import { Transport } from "./transport.js";
const FACT_KINDS = ["fact", "relationship", "goal"];
function segment(value) {
    return encodeURIComponent(value);
}
/** Store, list, read, change and delete memories. */
export class Memories {
    #transport;
    constructor(transport) {
        this.#transport = transport;
    }
    /** Store one memory; `created` is false when `unique` or a client `id` found it stored. */
    add(memory) {
        return this.#transport.request({ method: "POST", path: "/api/v1/memories/", json: memory });
    }
    /** Up to 1,000 memories in one transaction: all stored, or none (a 400 naming the item). */
    batch(memories) {
        return this.#transport.request({ method: "POST", path: "/api/v1/memories/batch/", json: { memories } });
    }
    /** Every memory matching the filters, newest first (`order: "asc"`: oldest), page by page. */
    list(filters = {}, pageSize) {
        return new Pages((cursor) => this.page({ ...filters, cursor, limit: pageSize }));
    }
    /** One page: `{count, next_cursor, results}`. */
    page(query = {}) {
        return this.#transport.request({ method: "GET", path: "/api/v1/memories/", query });
    }
    /** How many memories match the filters. */
    async count(filters = {}) {
        const answer = await this.#transport.request({
            method: "GET",
            path: "/api/v1/memories/count/",
            query: filters,
        });
        return answer.count;
    }
    get(id) {
        return this.#transport.request({ method: "GET", path: `/api/v1/memories/${segment(id)}/` });
    }
    /** Change some fields (each change a revision; new content is re-embedded). */
    update(id, changes) {
        return this.#transport.request({ method: "PATCH", path: `/api/v1/memories/${segment(id)}/`, json: changes });
    }
    async delete(id) {
        await this.#transport.request({ method: "DELETE", path: `/api/v1/memories/${segment(id)}/` });
    }
}
/** A room's buffer: the recent window and the search over its messages. */
export class RoomBuffer {
    #transport;
    constructor(transport) {
        this.#transport = transport;
    }
    /** The last `max_size` messages (oldest first), the newest summary, the unsummarized count. */
    get(room) {
        return this.#transport.request({ method: "GET", path: `/api/v1/rooms/${segment(room)}/buffer/` });
    }
    /** The room's messages by `(1 - recency_bias) x semantic + recency_bias x recency`. */
    search(room, input) {
        return this.#transport.request({
            method: "POST",
            path: `/api/v1/rooms/${segment(room)}/buffer/search/`,
            json: input,
        });
    }
}
/**
 * A client for one project of one hub. Options default from the environment
 * (`MEMORYHUB_URL`, `MEMORYHUB_API_KEY`); the key is held privately and never appears
 * in an error, a log line or `console.log(hub)`.
 */
export class MemoryHub {
    memories;
    buffer;
    documents;
    #transport;
    constructor(options = {}) {
        const env = typeof process === "undefined" ? {} : process.env;
        const url = options.url ?? env.MEMORYHUB_URL;
        const apiKey = options.apiKey ?? env.MEMORYHUB_API_KEY;
        if (!url) {
            throw new TypeError("MemoryHub needs the hub's url: pass {url} or set MEMORYHUB_URL");
        }
        if (!apiKey) {
            throw new TypeError("MemoryHub needs an API key: pass {apiKey} or set MEMORYHUB_API_KEY");
        }
        const settings = {
            url,
            apiKey,
            timeoutMs: positive("timeoutMs", options.timeoutMs ?? 30_000),
            retries: count("retries", options.retries ?? 3),
            backoffMs: count("backoffMs", options.backoffMs ?? 500),
            maxRetryWaitMs: count("maxRetryWaitMs", options.maxRetryWaitMs ?? 60_000),
            fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
        };
        this.#transport = new Transport(settings);
        this.memories = new Memories(this.#transport);
        this.buffer = new RoomBuffer(this.#transport);
        this.documents = new Documents(this.#transport);
    }
    /** The hub's base URL. */
    get url() {
        return this.#transport.url;
    }
    /** Memories by meaning and/or words (`mode` auto, vector, keyword, hybrid), best first. */
    search(input) {
        return this.#transport.request({ method: "POST", path: "/api/v1/search/", json: input });
    }
    /** What to put in the prompt for a user (and room) and a query, within `max_tokens`. */
    context(input) {
        return this.#transport.request({ method: "POST", path: "/api/v1/context/", json: input });
    }
    /** A user's facts, relationships and goals (active ones unless `status` says otherwise). */
    facts(user, filters = {}) {
        const { kind = [...FACT_KINDS], ...rest } = filters;
        return this.memories.list({ ...rest, user, kind });
    }
    /** Shown by `console.log` and `util.inspect`: the url, never the key. */
    [Symbol.for("nodejs.util.inspect.custom")]() {
        return `MemoryHub { url: '${this.url}' }`;
    }
    toJSON() {
        return { url: this.url };
    }
}
function positive(name, value) {
    if (!(Number.isFinite(value) && value > 0)) {
        throw new RangeError(`${name} must be a positive number of milliseconds, not ${value}`);
    }
    return value;
}
function count(name, value) {
    if (!(Number.isInteger(value) && value >= 0)) {
        throw new RangeError(`${name} must be a whole number >= 0, not ${value}`);
    }
    return value;
}
