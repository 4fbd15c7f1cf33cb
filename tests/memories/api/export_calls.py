"""Calls of the export and import endpoints, asserting their status."""

from __future__ import annotations

IMPORT = "/api/v1/import/"


def user_export(tenant, user="alice", **params):
    response = tenant.client.get(f"/api/v1/users/{user}/export/", params)
    assert response.status_code == 200, response.json()
    return response.json()


def room_export(tenant, room="r1", **params):
    response = tenant.client.get(f"/api/v1/rooms/{room}/export/", params)
    assert response.status_code == 200, response.json()
    return response.json()


def import_(tenant, document, status=201):
    response = tenant.client.post(IMPORT, document)
    assert response.status_code == status, response.json()
    return response.json()
