/** MemoryHub's TypeScript client: `new MemoryHub()` and what its calls take, answer and throw. */
export { Memories, MemoryHub, type MemoryHubOptions, RoomBuffer } from "./client.js";
export { Documents, type FileBytes, type WaitOptions } from "./documents.js";
export { AuthenticationError, BadRequest, Conflict, ConnectionFailed, type FieldMessages, MemoryHubError, NotFound, PermissionDenied, RateLimited, ServerError, WaitTimedOut, } from "./errors.js";
export { type Page, Pages } from "./pages.js";
export type * from "./types.js";
export type { components, operations, paths } from "../generated/openapi.js";
