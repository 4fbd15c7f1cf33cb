"""Writes and contexts through the API, for the context tests."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

URL = "/api/v1/context/"
START = timezone.now() - timedelta(days=30)


def write(tenant, *items):
    body = {"memories": [{"user": "maria", **item} for item in items]}
    response = tenant.client.post("/api/v1/memories/batch/", body, format="json")
    assert response.status_code == 201, response.json()
    return [r["memory"]["id"] for r in response.json()["results"]]


def turns(tenant, texts, room="chat", start=0):
    return write(
        tenant,
        *[
            {
                "room": room,
                "role": "user" if i % 2 == 0 else "assistant",
                "content": text,
                "created_at": (START + timedelta(hours=start + i)).isoformat(),
            }
            for i, text in enumerate(texts)
        ],
    )


def context(tenant, **body):
    response = tenant.client.post(URL, {"user": "maria", **body}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def section(body, name):
    return next(s for s in body["sections"] if s["name"] == name)
