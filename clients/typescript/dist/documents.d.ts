/** Documents: upload a text or a file's bytes, read its status, wait until a worker is done. */
import type { Transport } from "./transport.js";
import type { Document, DocumentFileOptions, DocumentTextInput, DocumentUpload } from "./types.js";
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
export declare class Documents {
    #private;
    constructor(transport: Transport);
    /** A text and the name of its source (`faq.md`); 202 queued, or the existing one (`duplicate`). */
    uploadText(input: DocumentTextInput): Promise<DocumentUpload>;
    /** A file's bytes (PDF, DOCX, Markdown, HTML, JSON, text) as multipart; the same answers. */
    upload(file: FileBytes, options: DocumentFileOptions): Promise<DocumentUpload>;
    /** Status, progress, error and timings of one document. */
    get(id: string): Promise<Document>;
    /**
     * Read the document until it is `done` or `failed` and return it as it ended (a
     * failed one carries its `error`); `WaitTimedOut` when `timeoutMs` passes first.
     */
    waitUntilDone(id: string, options?: WaitOptions): Promise<Document>;
}
