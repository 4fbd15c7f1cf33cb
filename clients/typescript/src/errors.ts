/**
 * What a failed call throws: one class per kind of failure, all of them a
 * `MemoryHubError`. None of them carries the request's headers, so the API key can
 * never reach a log line through an error.
 */

/** Messages by field, as a 400 names them (`{"metadata": ["..."]}`). */
export type FieldMessages = Record<string, string[]>;

/** What the hub answered, as the error classes take it. */
export interface ErrorAnswer {
  status: number;
  detail: string;
  fields?: FieldMessages;
  requestId?: string;
  retryAfterMs?: number;
}

/** Any failed call: `status` is the HTTP status (0 when no answer came). */
export class MemoryHubError extends Error {
  readonly status: number;
  readonly detail: string;
  /** The field messages of a 400 (and of a 409 naming the id); empty otherwise. */
  readonly fields: FieldMessages;
  /** The hub's request id (`X-Request-ID`): quote it when reporting a 5xx. */
  readonly requestId: string | undefined;

  constructor(message: string, answer: ErrorAnswer, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.status = answer.status;
    this.detail = answer.detail;
    this.fields = answer.fields ?? {};
    this.requestId = answer.requestId;
  }
}

/** 400: invalid input; `fields` names each bad field. */
export class BadRequest extends MemoryHubError {}

/** 401: no key, or an unknown or revoked one. */
export class AuthenticationError extends MemoryHubError {}

/** 403: a read-only key on a write. */
export class PermissionDenied extends MemoryHubError {}

/** 404: no such object in the key's project. */
export class NotFound extends MemoryHubError {}

/** 409: a client-chosen id the project already uses for a different memory. */
export class Conflict extends MemoryHubError {}

/** 429: over the key's rate limit, still so after the retries. */
export class RateLimited extends MemoryHubError {
  /** How long the hub asked to wait, in milliseconds (from `Retry-After`). */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, answer: ErrorAnswer) {
    super(message, answer);
    this.retryAfterMs = answer.retryAfterMs;
  }
}

/** 5xx: a fault or an outage of the hub's (503, 502, 504 after the retries). */
export class ServerError extends MemoryHubError {}

/** No answer: the connection failed or the call timed out, on every attempt. */
export class ConnectionFailed extends MemoryHubError {
  /** True when the last attempt ran out of time rather than failing to connect. */
  readonly timedOut: boolean;

  constructor(message: string, options: { timedOut: boolean; cause?: unknown }) {
    super(message, { status: 0, detail: message }, options.cause);
    this.timedOut = options.timedOut;
  }
}

/** `documents.waitUntilDone` ran out of time before the document finished. */
export class WaitTimedOut extends MemoryHubError {}

const BY_STATUS: Record<number, new (message: string, answer: ErrorAnswer) => MemoryHubError> = {
  400: BadRequest,
  401: AuthenticationError,
  403: PermissionDenied,
  404: NotFound,
  409: Conflict,
  429: RateLimited,
};

/** The error for an answer: the class its status calls for, a message naming the call. */
export function errorFor(call: string, answer: ErrorAnswer, attempts = 1): MemoryHubError {
  const fields = Object.entries(answer.fields ?? {})
    .map(([field, messages]) => `${field}: ${messages.join(" ")}`)
    .join("; ");
  const said = fields || answer.detail;
  const trace = answer.requestId && answer.status >= 500 ? ` (request id ${answer.requestId})` : "";
  const tries = attempts > 1 ? ` (${attempts} attempts)` : "";
  const message = `${call} -> ${answer.status}: ${said}${trace}${tries}`;
  const Class = BY_STATUS[answer.status] ?? (answer.status >= 500 ? ServerError : MemoryHubError);
  return new Class(message, answer);
}
