"""What the memories API tests send: a create, a batch."""

MEMORIES = "/api/v1/memories/"
BATCH = "/api/v1/memories/batch/"


def create(tenant, **body):
    response = tenant.client.post(MEMORIES, body)
    assert response.status_code in (200, 201), response.json()
    return response.json()["memory"]


def batch(tenant, items, **extra):
    return tenant.client.post(BATCH, {"memories": items}, **extra)
