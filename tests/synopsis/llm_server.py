"""A small OpenAI-compatible chat endpoint on 127.0.0.1 for the LLM tests, answering
from a script of programmed responses (one step per request, then ``default_text``).

    server = LlmServer().start()
    server.status(429, retry_after=0).ok("A summary.", prompt_tokens=50, completion_tokens=7)
    provider = LlmProvider(base_url=server.base_url, model="stub")
    ...
    server.requests  # what it received: path, headers, JSON body
    server.stop()

It serves any process (e.g. a Celery worker started with LLM_BASE_URL=server.base_url).
"""

from __future__ import annotations

import json
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Step:
    kind: str  # ok, status, malformed, refusal, delay
    text: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    code: int = 200
    retry_after: str | None = None
    seconds: float = 0.0


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any = field(default=None)

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.body.get("messages", []) if isinstance(self.body, dict) else []

    @property
    def prompt(self) -> str:
        """Every message's content, one after the other."""
        return "\n".join(message.get("content", "") for message in self.messages)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about clients that gave up (timed out) before a delayed answer."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class LlmServer:
    """A scripted OpenAI-compatible /v1/chat/completions endpoint in a thread."""

    default_text = "A stub summary."

    def __init__(self) -> None:
        self.script: deque[Step] = deque()
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._release = threading.Event()  # wakes delayed answers when stopped or reset
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- the script --------------------------------------------------------------------

    def ok(
        self,
        text: str = "A stub summary.",
        *,
        prompt_tokens: int | None = 12,
        completion_tokens: int | None = 5,
    ) -> LlmServer:
        """Answer ``text``, with that usage (None: left out of the answer)."""
        return self._add(
            Step("ok", text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
        )

    def status(self, code: int, retry_after: float | str | None = None) -> LlmServer:
        """Answer with that HTTP status (and a Retry-After header if given)."""
        header = None if retry_after is None else str(retry_after)
        return self._add(Step("status", code=code, retry_after=header))

    def delay(self, seconds: float, text: str | None = None) -> LlmServer:
        """Wait ``seconds`` (less if the server stops), then answer ``text``, or close
        the connection without an answer if ``text`` is None."""
        return self._add(Step("delay", seconds=seconds, text=text))

    def malformed(self) -> LlmServer:
        """A 200 whose body is not JSON."""
        return self._add(Step("malformed"))

    def refusal(self, reason: str = "I can't help with that.") -> LlmServer:
        """A 200 whose message is a refusal (``message.refusal`` set, no content)."""
        return self._add(Step("refusal", text=reason))

    def _add(self, step: Step) -> LlmServer:
        with self._lock:
            self.script.append(step)
        return self

    def _next(self, received: Received) -> Step:
        with self._lock:
            self.requests.append(received)
            return self.script.popleft() if self.script else Step("ok", text=self.default_text)

    def reset(self) -> None:
        """Forget the script and the requests; wake any answer still being delayed."""
        with self._lock:
            self.script.clear()
            self.requests.clear()
            self._release.set()
            self._release = threading.Event()

    # --- the server --------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._server is not None, "the server is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> LlmServer:
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="llm-stub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LlmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _completion(step: Step, model: str) -> dict[str, Any]:
    usage = {
        name: value
        for name, value in (
            ("prompt_tokens", step.prompt_tokens),
            ("completion_tokens", step.completion_tokens),
        )
        if value is not None
    }
    if usage:
        usage["total_tokens"] = sum(usage.values())
    answer: dict[str, Any] = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": step.text, "refusal": None},
                "finish_reason": "stop",
            }
        ],
    }
    if usage:
        answer["usage"] = usage
    return answer


class _StubHandler(BaseHTTPRequestHandler):
    """Answers POST /v1/chat/completions with the next step of ``llm``'s script."""

    protocol_version = "HTTP/1.1"
    llm: LlmServer  # set by _handler

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        received = Received(path=self.path, headers=dict(self.headers.items()), body=body)
        release = self.llm._release
        step = self.llm._next(received)
        model = body.get("model", "stub") if isinstance(body, dict) else "stub"
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        if step.kind == "delay":
            release.wait(step.seconds)
            if step.text is None:
                self.close_connection = True
                return
            step = Step("ok", text=step.text)
        self._answer(step, model)

    def _answer(self, step: Step, model: str) -> None:
        if step.kind == "ok":
            return self._send(200, _completion(step, model))
        if step.kind == "status":
            headers = {"Retry-After": step.retry_after} if step.retry_after else {}
            error = {"error": {"message": f"stub status {step.code}", "code": step.code}}
            return self._send(step.code, error, headers)
        if step.kind == "malformed":
            return self._send_raw(200, b'{"choices": [', "application/json")
        if step.kind == "refusal":
            answer = _completion(Step("ok", text=None), model)
            answer["choices"][0]["message"]["refusal"] = step.text
            return self._send(200, answer)
        raise AssertionError(f"unknown step {step.kind}")

    def _send(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_raw(code, json.dumps(payload).encode(), "application/json", headers)

    def _send_raw(
        self, code: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _handler(server: LlmServer) -> type[BaseHTTPRequestHandler]:
    """A handler class bound to ``server``'s script."""
    return type("Handler", (_StubHandler,), {"llm": server})
