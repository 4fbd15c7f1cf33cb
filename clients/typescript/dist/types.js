/**
 * Names for the hub's request and response shapes. Every one is taken from
 * `generated/openapi.d.ts`, which openapi-typescript generates from the hub's OpenAPI schema
 * (`npm run generate`): the client has no hand-written copy of a shape to drift.
 */
export {};
