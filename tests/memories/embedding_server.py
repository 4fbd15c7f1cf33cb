"""A small OpenAI-compatible embeddings endpoint on 127.0.0.1 for the tests of the
"openai" model choice: each text's vector is the hashing embedder's
(memories.providers.embeddings.HashingEmbeddingProvider) of ``dimension`` numbers, so
texts that share words are near; ``wrong_dimension`` makes it answer one number short,
``delay`` (seconds) makes each answer that much slower, ``status`` (e.g. 503) makes it
answer that error instead.

    server = EmbeddingServer(dimension=32).start()
    ...  # EMBEDDING_API_URL=server.base_url
    server.texts  # every text it embedded
    server.stop()
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memories.providers.embeddings import HashingEmbeddingProvider


class EmbeddingServer:
    def __init__(self, *, dimension: int = 32) -> None:
        self.dimension = dimension
        self.wrong_dimension = False
        self.delay = 0.0
        self.status: int | None = None
        self.requests = 0  # answered or refused
        self.texts: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> EmbeddingServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests += 1
                if owner.status is not None:
                    self.send_response(owner.status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                self._json(owner.answer(texts, body.get("model", "")))

            def _json(self, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def answer(self, texts: list[str], model: str) -> dict[str, Any]:
        time.sleep(self.delay)
        with self._lock:
            self.texts += texts
            size = self.dimension - 1 if self.wrong_dimension else self.dimension
        vectors = HashingEmbeddingProvider(model, size).embed(texts)
        data = [
            {"object": "embedding", "index": n, "embedding": vector.tolist()}
            for n, vector in enumerate(vectors)
        ]
        return {"object": "list", "data": data, "model": model}

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
