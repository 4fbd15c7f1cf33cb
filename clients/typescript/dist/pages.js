/**
 * The hub's lists answer keyset pages, `{count, next_cursor, results}`; a `Pages` walks
 * them lazily: the next page is fetched only when the rows of this one are used up.
 */
/** `for await (const row of pages)` yields every row; `.pages()` yields whole pages. */
export class Pages {
    #fetchPage;
    constructor(fetchPage) {
        this.#fetchPage = fetchPage;
    }
    /** Each page in turn, from the first (or from `cursor`) to the last. */
    async *pages(cursor) {
        let next = cursor;
        do {
            const page = await this.#fetchPage(next ?? undefined);
            yield page;
            next = page.next_cursor;
        } while (next);
    }
    async *[Symbol.asyncIterator]() {
        for await (const page of this.pages()) {
            yield* page.results;
        }
    }
    /** Every row of every page, in order (mind the size of what you ask for). */
    async toArray() {
        const rows = [];
        for await (const row of this) {
            rows.push(row);
        }
        return rows;
    }
}
