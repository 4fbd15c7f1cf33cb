/**
 * Names for the hub's request and response shapes. Every one is taken from
 * `generated/openapi.d.ts`, which openapi-typescript generates from the hub's OpenAPI schema
 * (`npm run generate`): the client has no hand-written copy of a shape to drift.
 */
import type { components, operations } from "../generated/openapi.js";
type Schemas = components["schemas"];
type QueryOf<Operation extends keyof operations> = NonNullable<operations[Operation]["parameters"]["query"]>;
export type Kind = Schemas["KindEnum"];
export type Memory = Schemas["MemoryOutput"];
export type MemoryInput = Schemas["MemoryInputRequest"];
export type MemoryCreated = Schemas["MemoryCreatedOutput"];
export type MemoryBatch = Schemas["MemoryBatchOutput"];
export type MemoryChanges = Schemas["PatchedMemoryUpdateRequest"];
export type MemoryPage = Schemas["MemoryPageOutput"];
/** The list's filters (user, room, kind, status, start/end, category, goal_status, ...). */
export type MemoryFilters = Omit<QueryOf<"v1_memories_list">, "cursor" | "limit">;
export type MemoryPageQuery = QueryOf<"v1_memories_list">;
/** A user's facts: the memory filters without `user`, `kind` narrowed to the fact kinds. */
export type FactFilters = Omit<MemoryFilters, "user" | "kind"> & {
    kind?: ("fact" | "relationship" | "goal")[];
};
export type SearchInput = Schemas["SearchInputRequest"];
export type SearchResult = Schemas["SearchOutput"];
export type SearchHit = Schemas["SearchHitOutput"];
export type ContextInput = Schemas["ContextInputRequest"];
export type Context = Schemas["ContextOutput"];
export type BufferWindow = Schemas["BufferOutput"];
export type BufferSearchInput = Schemas["BufferSearchInputRequest"];
export type BufferSearchResult = Schemas["BufferSearchOutput"];
export type Document = Schemas["DocumentOutput"];
export type DocumentUpload = Schemas["DocumentUploadOutput"];
export type DocumentStatus = Schemas["DocumentStatusEnum"];
export type DocumentTextInput = Schemas["DocumentTextInputRequest"];
/** A file upload's fields beside the file itself (`chunker_settings`, `metadata` as objects). */
export type DocumentFileOptions = Omit<Schemas["DocumentFileInputRequest"], "file"> & {
    /** The file's name: its extension tells Markdown from plain text. */
    filename: string;
};
export {};
