/**
 * One HTTP call to the hub, with the retry rules every method shares: an
 * `Idempotency-Key` on each POST, the same key on each of its retries (so a retry of
 * a write that did land is answered with the first response, not written twice);
 * retries with exponential backoff and jitter on 429 and 503 (honouring
 * `Retry-After`), on 502 and 504, on connection failures and timeouts; a bounded
 * number of attempts, each within `timeoutMs`.
 */
export type Method = "GET" | "POST" | "PATCH" | "DELETE";
/** A query parameter: arrays repeat the name (`kind=fact&kind=goal`); null/undefined are left out. */
export type QueryValue = string | number | boolean | readonly (string | number)[] | null | undefined;
export interface Call {
    method: Method;
    /** From the hub's root, e.g. `/api/v1/memories/`. */
    path: string;
    query?: Readonly<Record<string, QueryValue>>;
    json?: unknown;
    form?: FormData;
}
export interface TransportSettings {
    url: string;
    apiKey: string;
    timeoutMs: number;
    retries: number;
    backoffMs: number;
    maxRetryWaitMs: number;
    fetch: typeof fetch;
}
export declare class Transport {
    #private;
    constructor(settings: TransportSettings);
    /** The hub's base URL (never the key). */
    get url(): string;
    /** The answer's JSON body (undefined for 204); throws a MemoryHubError subclass after the retries. */
    request<T>(call: Call): Promise<T>;
}
/** `Retry-After` in milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export declare function retryAfterMs(value: string | null): number | undefined;
