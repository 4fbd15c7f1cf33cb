"""Process plumbing: the embedding model and its runtimes, tokens, the one Redis client,
task sending, short-lived caches, threads, and the standalone BufferMemory library.
Nothing here imports a model, a service or the API."""
