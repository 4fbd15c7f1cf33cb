"""The API's JSON parser: DRF's, with the checks a hostile body needs before and after
``json.loads``.

* Depth: JSON nested deeper than MEMORYHUB_MAX_JSON_DEPTH levels is refused before it
  is parsed (json.loads recurses, and so does everything that walks the result later:
  serializers, json.dumps, psycopg). The scan needs no recursion and no per-byte Python
  loop: strings are blanked with one regex, the brackets left are counted with numpy.
* Strings PostgreSQL cannot store: ``\\u0000`` and lone surrogates (``\\ud800``)
  anywhere in the body, keys included.

Each refusal is a 400 naming the top-level field, in the API's error shape.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding  # type: ignore[attr-defined]
from rest_framework.utils.json import strict_constant

from memories.api.validators import max_json_depth

# A JSON string, also an unterminated one (it runs to the end): possessive, so it never
# backtracks and every quote starts at most one match (linear in the body's size)
STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
TOKEN = re.compile(STRING.pattern + rb"|[\[\]{}:,]", re.DOTALL)
NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
STEPS = np.zeros(256, dtype=np.int32)
STEPS[list(b"[{")] = 1
STEPS[list(b"]}")] = -1
CHUNK = 1 << 20  # brackets counted per numpy pass (bounds the temporary arrays)
# \u0000 or a surrogate escape: a candidate for the exact check on the parsed value
SUSPECT = re.compile(rb"\\u0000|\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
PATH_TOKENS_MAX = 1_000_000  # naming the field of a too-deep body reads this many tokens


def json_bytes_depth(raw: bytes, limit: int) -> int:
    """The nesting depth of JSON text (brackets outside strings), or a number past
    ``limit`` as soon as it is exceeded."""
    brackets = np.frombuffer(STRING.sub(b'""', raw).translate(None, NOT_BRACKETS), np.uint8)
    level = deepest = 0
    for start in range(0, len(brackets), CHUNK):
        running = np.cumsum(STEPS[brackets[start : start + CHUNK]]) + level
        deepest = max(deepest, int(running.max()))
        if deepest > limit:
            return deepest
        level = int(running[-1])
    return deepest


def _key(token: bytes) -> str:
    try:
        key = json.loads(token)
    except ValueError:
        key = token.decode(errors="replace")
    return str(key)[:100]


def json_bytes_deep_path(raw: bytes, limit: int) -> list[str | int]:
    """Where JSON text first nests deeper than ``limit``: the keys and indexes leading
    there (``["memories", 0, "metadata", ...]``); empty if that is not found within
    PATH_TOKENS_MAX tokens."""
    stack: list[list[Any]] = []  # per open container: [b"{", key] or [b"[", index]
    last_string = b'""'
    for count, match in enumerate(TOKEN.finditer(raw)):
        if count > PATH_TOKENS_MAX:
            break
        token = match.group()
        char = token[:1]
        if char == b'"':
            last_string = token
        elif char in b"[{":
            stack.append([char, None if char == b"{" else 0])
            if len(stack) > limit:
                return [level[1] for level in stack[:-1] if level[1] is not None]
        elif char in b"]}":
            if stack:
                stack.pop()
        elif char == b":" and stack and stack[-1][0] == b"{":
            stack[-1][1] = _key(last_string)
        elif char == b"," and stack and stack[-1][0] == b"[":
            stack[-1][1] += 1
    return []


def error_key(path: list[str | int]) -> str | None:
    """The field an error is reported under: the top-level key, and through lists of
    objects the key of the item's field (``memories[1].content_json``), as the import
    names fields; None for the body as a whole."""
    if not path or not isinstance(path[0], str):
        return None
    key = str(path[0])
    rest = path[1:]
    while rest and isinstance(rest[0], int):
        key += f"[{rest.pop(0)}]"
        if rest and isinstance(rest[0], str):
            return f"{key}.{rest[0]}"
    return key


def _path_text(path: list[str | int]) -> str:
    text = ""
    for part in path[:4]:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text + ("…" if len(path) > 4 else "")


def json_depth_refusal(raw: bytes) -> tuple[str | None, str] | None:
    """(the top-level field or None, the message) if UTF-8 JSON text ``raw`` nests
    deeper than MEMORYHUB_MAX_JSON_DEPTH, else None."""
    limit = max_json_depth()
    if json_bytes_depth(raw, limit) <= limit:
        return None
    path = json_bytes_deep_path(raw, limit)
    where = f" (at {_path_text(path)})" if path else ""
    field = error_key(path)
    return field, f"JSON nested deeper than {limit} levels{where}; the limit is {limit}."


def _refusal(field: str | None, message: str) -> serializers.ValidationError:
    """A 400 in the API's shape: ``{field: [message]}``, or ``{"detail": message}`` when
    the body is not an object."""
    if field:
        return serializers.ValidationError({field: [message]})
    return serializers.ValidationError({"detail": message})


def _unstorable(value: str) -> str | None:
    if "\x00" in value:
        return "Null characters are not allowed."
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "Lone surrogates (\\ud800-\\udfff without their pair) are not allowed."
    return None


def json_unstorable_find(data: Any) -> tuple[str | None, str] | None:
    """The field (error_key) and the reason of the first string, key or value, that
    PostgreSQL cannot store; None if there is none. No recursion."""
    stack: list[tuple[Any, list[str | int]]] = [(data, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            reason = _unstorable(item)
            if reason:
                return error_key(path), reason
        elif isinstance(item, dict):
            for key, value in item.items():
                stack.append((key, [*path, key] if isinstance(key, str) else path))
                stack.append((value, [*path, key]))
        elif isinstance(item, list):
            stack.extend((value, [*path, n]) for n, value in enumerate(item))
    return None


class DepthLimitedJSONParser(JSONParser):
    """application/json, refused with a 400 when nested too deep or holding strings
    PostgreSQL cannot store."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = get_encoding(parser_context or {})
        raw: bytes = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if codecs.lookup(encoding).name != "utf-8":
            raw = text.encode("utf-8", "surrogatepass")
        http_request = getattr((parser_context or {}).get("request"), "_request", None)
        if not getattr(http_request, "json_depth_checked", False):  # the middleware did
            refusal = json_depth_refusal(raw)
            if refusal is not None:
                raise _refusal(*refusal)
        try:
            data = json.loads(text, parse_constant=strict_constant if self.strict else None)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if SUSPECT.search(raw):
            found = json_unstorable_find(data)
            if found is not None:
                raise _refusal(found[0], found[1])
        return data
