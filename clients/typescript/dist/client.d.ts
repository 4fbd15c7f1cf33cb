/**
 * `MemoryHub`: the hub's core calls for an agent written in TypeScript. Each method is
 * one endpoint of `/api/v1/`, takes the API's own field names and returns the hub's
 * answer as the schema types it (see types.ts); failures are `MemoryHubError`s.
 */
import { Documents } from "./documents.js";
import { Pages } from "./pages.js";
import { Transport } from "./transport.js";
import type { BufferSearchInput, BufferSearchResult, BufferWindow, Context, ContextInput, FactFilters, Memory, MemoryBatch, MemoryChanges, MemoryCreated, MemoryFilters, MemoryInput, MemoryPage, MemoryPageQuery, SearchInput, SearchResult } from "./types.js";
export interface MemoryHubOptions {
    /** The hub, e.g. `http://127.0.0.1:8000` (default: `MEMORYHUB_URL`). */
    url?: string;
    /** A project API key, `mh_…` (default: `MEMORYHUB_API_KEY`). */
    apiKey?: string;
    /** Each attempt's limit, the answer's body included (default 30 s). */
    timeoutMs?: number;
    /** Attempts after the first on 429/502/503/504, connection failures and timeouts (default 3). */
    retries?: number;
    /** The first backoff; it doubles with each retry, with jitter, up to 8 s (default 500 ms). */
    backoffMs?: number;
    /** A `Retry-After` longer than this is not waited for: the error is thrown at once (default 60 s). */
    maxRetryWaitMs?: number;
    /** Another `fetch` (a proxy's, a test's); default the platform's. */
    fetch?: typeof fetch;
}
/** Store, list, read, change and delete memories. */
export declare class Memories {
    #private;
    constructor(transport: Transport);
    /** Store one memory; `created` is false when `unique` or a client `id` found it stored. */
    add(memory: MemoryInput): Promise<MemoryCreated>;
    /** Up to 1,000 memories in one transaction: all stored, or none (a 400 naming the item). */
    batch(memories: MemoryInput[]): Promise<MemoryBatch>;
    /** Every memory matching the filters, newest first (`order: "asc"`: oldest), page by page. */
    list(filters?: MemoryFilters, pageSize?: number): Pages<Memory>;
    /** One page: `{count, next_cursor, results}`. */
    page(query?: MemoryPageQuery): Promise<MemoryPage>;
    /** How many memories match the filters. */
    count(filters?: MemoryFilters): Promise<number>;
    get(id: string): Promise<Memory>;
    /** Change some fields (each change a revision; new content is re-embedded). */
    update(id: string, changes: MemoryChanges): Promise<Memory>;
    delete(id: string): Promise<void>;
}
/** A room's buffer: the recent window and the search over its messages. */
export declare class RoomBuffer {
    #private;
    constructor(transport: Transport);
    /** The last `max_size` messages (oldest first), the newest summary, the unsummarized count. */
    get(room: string): Promise<BufferWindow>;
    /** The room's messages by `(1 - recency_bias) x semantic + recency_bias x recency`. */
    search(room: string, input: BufferSearchInput): Promise<BufferSearchResult>;
}
/**
 * A client for one project of one hub. Options default from the environment
 * (`MEMORYHUB_URL`, `MEMORYHUB_API_KEY`); the key is held privately and never appears
 * in an error, a log line or `console.log(hub)`.
 */
export declare class MemoryHub {
    #private;
    readonly memories: Memories;
    readonly buffer: RoomBuffer;
    readonly documents: Documents;
    constructor(options?: MemoryHubOptions);
    /** The hub's base URL. */
    get url(): string;
    /** Memories by meaning and/or words (`mode` auto, vector, keyword, hybrid), best first. */
    search(input: SearchInput): Promise<SearchResult>;
    /** What to put in the prompt for a user (and room) and a query, within `max_tokens`. */
    context(input: ContextInput): Promise<Context>;
    /** A user's facts, relationships and goals (active ones unless `status` says otherwise). */
    facts(user: string, filters?: FactFilters): Pages<Memory>;
    toJSON(): {
        url: string;
    };
}
