/** MemoryHub's TypeScript client: `new MemoryHub()` and what its calls take, answer and throw. */
export { Memories, MemoryHub, RoomBuffer } from "./client.js";
export { Documents } from "./documents.js";
export { AuthenticationError, BadRequest, Conflict, ConnectionFailed, MemoryHubError, NotFound, PermissionDenied, RateLimited, ServerError, WaitTimedOut, } from "./errors.js";
export { Pages } from "./pages.js";
