// The client's types from the hub's OpenAPI schema, with the options kept here, once:
//   node scripts/generate.mjs [schema.yaml] [output.d.ts]
// (defaults: openapi.yaml, written by `manage.py spectacular --file clients/typescript/openapi.yaml`,
// and generated/openapi.d.ts). `npm run generate` runs it; the hub's tests run it to a
// temporary file and compare, so the committed types cannot drift from the API.

import { writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import openapiTS, { COMMENT_HEADER, astToString } from "openapi-typescript";

const [schema = "openapi.yaml", output = "generated/openapi.d.ts"] = process.argv.slice(2);
const nodes = await openapiTS(pathToFileURL(schema), {
  // a request field with a default may be left out: not required in the input types
  defaultNonNullable: false,
  silent: true,
});
writeFileSync(output, COMMENT_HEADER + astToString(nodes));
console.log(`${schema} -> ${output}`);
