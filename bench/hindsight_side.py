"""Hindsight's side of bench/compare_hindsight.py, over its public HTTP API as an agent
would use it (bench/hindsight_server.py starts it): one bank per conversation, one
retained item per turn, then every question recalled from its conversation's bank.

Retain: POST /v1/default/banks/{bank}/memories with RETAIN_BATCH items a request,
synchronous (the default: it answers once the items are stored and embedded, i.e.
searchable). Each item: the turn's text, its time as ``timestamp``, its own
``document_id`` (items of one request without one would become one document) and the
turn's metadata (strings: Hindsight's metadata is dict[str, str]), dia_id included.

Recall: POST /v1/default/banks/{bank}/memories/recall with the question and Hindsight's
defaults (budget ``mid``, max_tokens 4096, every fact type): it returns as many facts as
fit the token budget, best first; the report takes the first k. With ``budget`` set,
the same questions again at that budget (not timed against the others)."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from bench.client import Api, encode, summary

RETAIN_BATCH = 100


def hindsight_api(port: int) -> Api:
    """bench/client.py's keep-alive client, without the hub's key."""
    api = Api(port, "")
    api.headers = {"Content-Type": "application/json"}
    return api


def _bank_path(bank: str, tail: str) -> str:
    return f"/v1/default/banks/{quote(bank, safe='')}/{tail}"


def _item(message: dict[str, Any]) -> dict[str, Any]:
    metadata = {name: str(value) for name, value in message["metadata"].items()}
    return {
        "content": message["content"],
        "timestamp": message["created_at"],
        "document_id": f"{message['user_id']}:{metadata['dia_id']}",
        "metadata": metadata,
    }


def _retain(api: Api, bank: str, messages: list[dict[str, Any]]) -> float:
    body = encode({"items": [_item(m) for m in messages]})
    data, elapsed = api.post(_bank_path(bank, "memories"), body, expect=200)
    if not data.get("success") or data.get("items_count") != len(messages):
        raise RuntimeError(f"retain into {bank}: {str(data)[:300]}")
    return elapsed


def _batches(messages: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """RETAIN_BATCH at a time, never across two banks (users)."""
    batches: list[tuple[str, list[dict[str, Any]]]] = []
    for message in messages:
        bank = message["user_id"]
        if not batches or batches[-1][0] != bank or len(batches[-1][1]) == RETAIN_BATCH:
            batches.append((bank, []))
        batches[-1][1].append(message)
    return batches


def recall_call(api: Api, bank: str, text: str, budget: str | None = None) -> tuple[Any, float]:
    payload: dict[str, Any] = {"query": text}
    if budget:
        payload["budget"] = budget
    return api.post(_bank_path(bank, "memories/recall"), encode(payload), expect=200)


def hindsight_warmup(api: Api, workload: dict[str, Any]) -> None:
    warmup = workload["warmup"]
    _retain(api, warmup["user_id"], warmup["messages"])
    for text in warmup["queries"]:
        recall_call(api, warmup["user_id"], text)


def hindsight_retain(api: Api, workload: dict[str, Any]) -> dict[str, Any]:
    """Every turn retained, RETAIN_BATCH a request, each request waited for."""
    messages = workload["messages"]
    request_ms = []
    started = time.perf_counter()
    for bank, chunk in _batches(messages):
        request_ms.append(_retain(api, bank, chunk))
    seconds = time.perf_counter() - started
    return {
        "messages": len(messages),
        "batch_size": RETAIN_BATCH,
        "seconds": round(seconds, 3),
        "per_second": round(len(messages) / seconds, 2),
        "batch_request_ms": summary(request_ms),
    }


def hindsight_recall(
    api: Api, workload: dict[str, Any], k: int, budget: str | None = None
) -> dict[str, Any]:
    """Every question recalled from its user's bank: latency, ranked dia_ids."""
    latencies: list[float] = []
    queries = []
    for query in workload["queries"]:
        data, elapsed = recall_call(api, query["user_id"], query["text"], budget)
        latencies.append(elapsed)
        hits = data["results"]
        queries.append(
            {
                "qid": query["qid"],
                "count": len(hits),
                "ranked": [(hit.get("metadata") or {}).get("dia_id") for hit in hits],
                "wrong_user": sum(
                    1
                    for hit in hits
                    if not str(hit.get("document_id") or "").startswith(f"{query['user_id']}:")
                ),
            }
        )
    return {
        "budget": budget or "mid (default)",
        "latency_ms": summary(latencies),
        "results_mean": round(sum(q["count"] for q in queries) / max(1, len(queries)), 1),
        "short": sum(1 for q in queries if q["count"] < k),
        "queries": queries,
    }
