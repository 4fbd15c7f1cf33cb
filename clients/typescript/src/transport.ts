/**
 * One HTTP call to the hub, with the retry rules every method shares: an
 * `Idempotency-Key` on each POST, the same key on each of its retries (so a retry of
 * a write that did land is answered with the first response, not written twice);
 * retries with exponential backoff and jitter on 429 and 503 (honouring
 * `Retry-After`), on 502 and 504, on connection failures and timeouts; a bounded
 * number of attempts, each within `timeoutMs`.
 */

import { ConnectionFailed, type ErrorAnswer, type FieldMessages, errorFor } from "./errors.js";

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

type Outcome =
  | { kind: "ok"; body: unknown }
  | { kind: "refused"; answer: ErrorAnswer }
  | { kind: "unanswered"; timedOut: boolean; cause: unknown };

/** Statuses that say "try again": rate limited, unavailable, a proxy's bad gateway or timeout. */
const RETRIED_STATUSES = new Set([429, 502, 503, 504]);
/** A proxy's answers that do not say whether the hub did the work. */
const LOST_ANSWER_STATUSES = new Set([502, 504]);
const MAX_BACKOFF_MS = 8_000;
const USER_AGENT = "memoryhub-client-ts/0.1.0";

export class Transport {
  readonly #settings: TransportSettings;

  constructor(settings: TransportSettings) {
    this.#settings = { ...settings, url: settings.url.replace(/\/+$/, "") };
  }

  /** The hub's base URL (never the key). */
  get url(): string {
    return this.#settings.url;
  }

  /** The answer's JSON body (undefined for 204); throws a MemoryHubError subclass after the retries. */
  async request<T>(call: Call): Promise<T> {
    const name = `${call.method} ${call.path}`;
    const idempotencyKey = call.method === "POST" ? globalThis.crypto.randomUUID() : undefined;
    const body = call.form ?? (call.json === undefined ? undefined : JSON.stringify(call.json));
    let mayHaveLanded = false; // an earlier attempt may have been done by the hub, its answer lost
    for (let attempt = 1; ; attempt += 1) {
      const outcome = await this.#attempt(call, body, idempotencyKey);
      if (outcome.kind === "ok") {
        return outcome.body as T;
      }
      if (mayHaveLanded && call.method === "DELETE" && outcome.kind === "refused" && outcome.answer.status === 404) {
        return undefined as T; // the first attempt deleted it: gone is what was asked
      }
      mayHaveLanded ||= outcome.kind === "unanswered" || LOST_ANSWER_STATUSES.has(outcome.answer.status);
      const wait = attempt > this.#settings.retries ? undefined : this.#waitBeforeRetry(outcome, attempt);
      if (wait === undefined) {
        throw this.#failure(name, outcome, attempt);
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  async #attempt(call: Call, body: string | FormData | undefined, idempotencyKey?: string): Promise<Outcome> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.#settings.timeoutMs);
    try {
      const response = await this.#settings.fetch(this.#settings.url + call.path + queryString(call.query), {
        method: call.method,
        headers: this.#headers(call, idempotencyKey),
        body,
        signal: controller.signal,
      });
      const text = await response.text(); // inside the timeout: a stalled body is a timeout too
      const parsed = parseBody(text, response.headers.get("content-type"));
      return response.ok ? { kind: "ok", body: parsed } : { kind: "refused", answer: answerOf(response, parsed) };
    } catch (cause) {
      return { kind: "unanswered", timedOut: controller.signal.aborted, cause };
    } finally {
      clearTimeout(timer);
    }
  }

  #headers(call: Call, idempotencyKey?: string): Record<string, string> {
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#settings.apiKey}`,
      Accept: "application/json",
      "User-Agent": USER_AGENT,
    };
    if (call.json !== undefined) {
      headers["Content-Type"] = "application/json";
    }
    if (idempotencyKey !== undefined) {
      headers["Idempotency-Key"] = idempotencyKey;
    }
    return headers;
  }

  /** Milliseconds to wait before the next attempt, or undefined when this outcome is final. */
  #waitBeforeRetry(outcome: Outcome, attempt: number): number | undefined {
    if (outcome.kind === "refused") {
      if (!RETRIED_STATUSES.has(outcome.answer.status)) {
        return undefined;
      }
      const asked = outcome.answer.retryAfterMs;
      if (asked !== undefined) {
        // a wait longer than the caller allows is theirs to decide: no silent long sleep
        return asked <= this.#settings.maxRetryWaitMs ? asked : undefined;
      }
    }
    const ceiling = Math.min(this.#settings.backoffMs * 2 ** (attempt - 1), MAX_BACKOFF_MS);
    return ceiling / 2 + (Math.random() * ceiling) / 2;
  }

  #failure(name: string, outcome: Exclude<Outcome, { kind: "ok" }>, attempts: number): Error {
    if (outcome.kind === "refused") {
      return errorFor(name, outcome.answer, attempts);
    }
    const tries = attempts === 1 ? "1 attempt" : `${attempts} attempts`;
    const why = outcome.timedOut
      ? `no answer within ${this.#settings.timeoutMs} ms`
      : `connection failed (${reason(outcome.cause)})`;
    return new ConnectionFailed(`${name} on ${this.#settings.url}: ${why}, ${tries}`, {
      timedOut: outcome.timedOut,
      cause: outcome.cause,
    });
  }
}

function queryString(query?: Readonly<Record<string, QueryValue>>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value === undefined || value === null) {
      continue;
    }
    for (const item of Array.isArray(value) ? value : [value]) {
      params.append(name, String(item));
    }
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

function parseBody(text: string, contentType: string | null): unknown {
  if (text === "") {
    return undefined;
  }
  if (contentType?.includes("json")) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

/** The parts of a refusal the errors carry: detail, field messages, request id, Retry-After. */
function answerOf(response: Response, body: unknown): ErrorAnswer {
  const object = isRecord(body) ? body : {};
  const detail =
    typeof object.detail === "string"
      ? object.detail
      : typeof body === "string" && body
        ? body.slice(0, 300)
        : response.statusText || "no detail";
  const requestId = typeof object.request_id === "string" ? object.request_id : response.headers.get("x-request-id");
  return {
    status: response.status,
    detail,
    fields: fieldMessages(object),
    requestId: requestId ?? undefined,
    retryAfterMs: retryAfterMs(response.headers.get("retry-after")),
  };
}

/** Every key but `detail`/`request_id`, flattened to `memories[3].metadata`-style names. */
function fieldMessages(body: Record<string, unknown>, prefix = ""): FieldMessages {
  const fields: FieldMessages = {};
  for (const [key, value] of Object.entries(body)) {
    if (!prefix && (key === "detail" || key === "request_id" || key === "limit" || key === "service")) {
      continue;
    }
    const name = prefix ? (/^\d+$/.test(key) ? `${prefix}[${key}]` : `${prefix}.${key}`) : key;
    if (Array.isArray(value) && value.every((item) => typeof item === "string")) {
      fields[name] = value;
    } else if (typeof value === "string") {
      fields[name] = [value];
    } else if (isRecord(value) || Array.isArray(value)) {
      Object.assign(fields, fieldMessages({ ...value }, name));
    }
  }
  return fields;
}

/** `Retry-After` in milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null): number | undefined {
  if (value === null || value.trim() === "") {
    return undefined;
  }
  const seconds = Number(value);
  if (Number.isFinite(seconds)) {
    return Math.max(0, seconds * 1000);
  }
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function reason(cause: unknown): string {
  if (cause instanceof Error) {
    const inner = (cause as Error & { cause?: { code?: string; message?: string } }).cause;
    return inner?.code ?? inner?.message ?? cause.message;
  }
  return String(cause);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
