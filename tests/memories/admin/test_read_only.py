"""Records of what happened are read-only in the admin: no add, change or delete, by
page or by action."""

from __future__ import annotations

import pytest

from memories.models import (
    Embedding,
    EmbeddingSpace,
    MemoryRevision,
    SettingsRevision,
    SynopsisRevision,
)
from synopsis.models import LlmCall

READ_ONLY = [MemoryRevision, SettingsRevision, SynopsisRevision, LlmCall, Embedding,
             EmbeddingSpace]  # fmt: skip


@pytest.mark.parametrize("model", READ_ONLY, ids=lambda model: model.__name__)
def test_records_cannot_be_added_changed_or_deleted(admin_client, world, model):
    row = world.rows[model]
    base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
    page = admin_client.get(f"{base}{row.pk}/change/")
    assert page.status_code == 200  # viewable
    assert b'name="_save"' not in page.content
    assert b"delete/" not in page.content.split(b'id="content"')[1]
    assert admin_client.get(f"{base}add/").status_code == 403
    assert admin_client.post(f"{base}add/", {}).status_code == 403
    assert admin_client.post(f"{base}{row.pk}/change/", {"actor": "x"}).status_code == 403
    assert admin_client.get(f"{base}{row.pk}/delete/").status_code == 403
    assert admin_client.post(f"{base}{row.pk}/delete/", {"post": "yes"}).status_code == 403
    listing = admin_client.get(base)
    assert b"delete_selected" not in listing.content
    admin_client.post(base, {"action": "delete_selected", "_selected_action": [row.pk],
                             "post": "yes"})  # fmt: skip
    assert model.objects.filter(pk=row.pk).exists()
