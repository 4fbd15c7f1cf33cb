"""Management commands: projects, API keys, operators, embedding what is pending."""

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from memories.models import ApiKey, Memory, Project


def run(*args):
    stdout, stderr = io.StringIO(), io.StringIO()
    call_command(*args, stdout=stdout, stderr=stderr)
    return stdout.getvalue(), stderr.getvalue()


def client_for(raw_key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


def test_create_api_key_prints_only_a_working_key(db):
    stdout, stderr = run("create_api_key", "--project", "acme", "--name", "ci")
    raw_key = stdout.strip()
    assert re.fullmatch(r"mh_[0-9a-f]{8}_[\w-]+", raw_key), stdout
    assert "\n" not in raw_key
    assert "acme" in stderr and raw_key not in stderr
    project = Project.objects.get(name="acme")  # created on the way
    [key] = ApiKey.objects.filter(project=project)
    assert key.name == "ci"
    assert raw_key not in (key.key_hash, key.prefix)  # stored hashed

    client = client_for(raw_key)
    assert client.post("/api/v1/memories/", {"content": "hello"}).status_code == 201
    assert Memory.objects.get().project == project


def test_create_api_key_read_only(db):
    raw_key = run("create_api_key", "--project", "acme", "--read-only")[0].strip()
    client = client_for(raw_key)
    assert client.get("/api/v1/memories/").status_code == 200
    assert client.post("/api/v1/memories/", {"content": "hello"}).status_code == 403


def test_create_api_key_reuses_an_existing_project(db):
    run("create_project", "acme")
    first = run("create_api_key", "--project", "acme")[0].strip()
    second = run("create_api_key", "--project", "acme")[0].strip()
    assert first != second
    assert Project.objects.filter(name="acme").count() == 1
    assert ApiKey.objects.filter(project__name="acme").count() == 2


def test_create_project_is_idempotent(db):
    stdout, _ = run("create_project", "acme")
    assert "Created" in stdout
    stdout, _ = run("create_project", "acme")
    assert "Found" in stdout
    assert Project.objects.filter(name="acme").count() == 1


def test_create_operator_can_log_into_the_admin(db):
    stdout, _ = run("create_operator", "olivia", "--email", "o@example.com")
    password = re.search(r"with password (\S+)", stdout).group(1)
    user = get_user_model().objects.get(username="olivia")
    assert user.is_staff and user.is_superuser
    assert user.email == "o@example.com"

    browser = Client()
    assert browser.get("/admin/").status_code == 302  # to the login page
    response = browser.post(
        "/admin/login/?next=/admin/", {"username": "olivia", "password": password}
    )
    assert response.status_code == 302
    assert browser.get("/admin/").status_code == 200
    assert browser.get("/admin/memories/memory/").status_code == 200


def test_create_operator_again_resets_the_password(db):
    run("create_operator", "olivia", "--password", "first-Secret-1")
    stdout, _ = run("create_operator", "olivia", "--password", "second-Secret-2")
    assert "Updated" in stdout
    assert get_user_model().objects.count() == 1
    assert not Client().login(username="olivia", password="first-Secret-1")
    assert Client().login(username="olivia", password="second-Secret-2")


def test_embed_pending_embeds_what_waits(owner):
    items = [{"content": f"note {n}"} for n in range(3)]
    owner.client.post("/api/v1/memories/batch/", {"memories": items})
    assert Memory.objects.filter(embedding_status="pending").count() == 3
    stdout, _ = run("embed_pending", "--batch-size", "2")
    assert "Embedded 3 memories" in stdout
    assert not Memory.objects.filter(embedding_status="pending").exists()
    assert all(m.embeddings.count() == 1 for m in Memory.objects.all())
    assert "Embedded 0 memories" in run("embed_pending")[0]


@pytest.mark.parametrize("command", ["create_api_key", "create_project", "create_operator"])
def test_required_arguments_are_required(db, command):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        run(command)
