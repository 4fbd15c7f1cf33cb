/** Documents: upload a text or a file's bytes, read its status, wait until a worker is done. */

import { WaitTimedOut } from "./errors.js";
import type { Transport } from "./transport.js";
import type { Document, DocumentFileOptions, DocumentStatus, DocumentTextInput, DocumentUpload } from "./types.js";

/** The states a document ends in; every other one is still queued or in progress. */
const FINISHED: ReadonlySet<DocumentStatus> = new Set<DocumentStatus>(["done", "failed"]);

export interface WaitOptions {
  /** Give up after this long (default 5 minutes): `WaitTimedOut`. */
  timeoutMs?: number;
  /** Time between two reads of the status (default 500 ms). */
  intervalMs?: number;
  /** Called with each status read, e.g. to show `progress.percent`. */
  onProgress?: (document: Document) => void;
}

/** A file's content: a Blob, bytes (a Node Buffer is a Uint8Array) or a text. */
export type FileBytes = Blob | ArrayBuffer | ArrayBufferView | string;

export class Documents {
  readonly #transport: Transport;

  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /** A text and the name of its source (`faq.md`); 202 queued, or the existing one (`duplicate`). */
  uploadText(input: DocumentTextInput): Promise<DocumentUpload> {
    return this.#transport.request({ method: "POST", path: "/api/v1/documents/", json: input });
  }

  /** A file's bytes (PDF, DOCX, Markdown, HTML, JSON, text) as multipart; the same answers. */
  upload(file: FileBytes, options: DocumentFileOptions): Promise<DocumentUpload> {
    const { filename, chunker_settings, metadata, ...fields } = options;
    const form = new FormData();
    form.append("file", blobOf(file), filename);
    for (const [name, value] of Object.entries(fields)) {
      if (value !== undefined && value !== null) {
        form.append(name, String(value));
      }
    }
    // the hub reads these two as JSON strings in a multipart body
    if (chunker_settings !== undefined) {
      form.append("chunker_settings", JSON.stringify(chunker_settings));
    }
    if (metadata !== undefined) {
      form.append("metadata", JSON.stringify(metadata));
    }
    return this.#transport.request({ method: "POST", path: "/api/v1/documents/", form });
  }

  /** Status, progress, error and timings of one document. */
  get(id: string): Promise<Document> {
    return this.#transport.request({ method: "GET", path: `/api/v1/documents/${encodeURIComponent(id)}/` });
  }

  /**
   * Read the document until it is `done` or `failed` and return it as it ended (a
   * failed one carries its `error`); `WaitTimedOut` when `timeoutMs` passes first.
   */
  async waitUntilDone(id: string, options: WaitOptions = {}): Promise<Document> {
    const { timeoutMs = 300_000, intervalMs = 500, onProgress } = options;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const document = await this.get(id);
      onProgress?.(document);
      if (document.status !== undefined && FINISHED.has(document.status)) {
        return document;
      }
      if (Date.now() + intervalMs > deadline) {
        const message = `document ${id} still ${document.status} after ${timeoutMs} ms`;
        throw new WaitTimedOut(message, { status: 0, detail: message });
      }
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }
}

function blobOf(file: FileBytes): Blob {
  if (file instanceof Blob) {
    return file;
  }
  if (typeof file === "string" || file instanceof ArrayBuffer) {
    return new Blob([file]);
  }
  // a copy: the view may be a window on a larger (or shared) buffer
  return new Blob([new Uint8Array(file.buffer, file.byteOffset, file.byteLength).slice()]);
}
