/**
 * The hub's lists answer keyset pages, `{count, next_cursor, results}`; a `Pages` walks
 * them lazily: the next page is fetched only when the rows of this one are used up.
 */
/** One page of a list, as the hub answers it. */
export interface Page<T> {
    /** How many rows match the filters, over all pages. */
    count: number;
    /** Pass back as `cursor` for the next page; null on the last one. */
    next_cursor: string | null;
    results: T[];
}
export type PageFetcher<T> = (cursor: string | undefined) => Promise<Page<T>>;
/** `for await (const row of pages)` yields every row; `.pages()` yields whole pages. */
export declare class Pages<T> implements AsyncIterable<T> {
    #private;
    constructor(fetchPage: PageFetcher<T>);
    /** Each page in turn, from the first (or from `cursor`) to the last. */
    pages(cursor?: string): AsyncGenerator<Page<T>, void, undefined>;
    [Symbol.asyncIterator](): AsyncGenerator<T, void, undefined>;
    /** Every row of every page, in order (mind the size of what you ask for). */
    toArray(): Promise<T[]>;
}
