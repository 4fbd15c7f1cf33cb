"""Console login and logout; failed logins throttled per username and IP, for the
console's form and the admin's."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from memories.models import Membership
from tests.console.operators import PASSWORD, operator_client


@pytest.fixture(autouse=True)
def fast_hashing(settings):
    """Each login attempt hashes a password; the production hasher takes ~0.3 s here."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def no_failures_counted(redis_client):
    """Every test starts without failed logins counted (they live in Redis)."""
    for key in redis_client.scan_iter("*login-failures*"):
        redis_client.delete(key)


def test_pages_need_a_login(owner):
    client = Client()
    for url in [
        "/dashboard/",
        f"/dashboard/p/{owner.project.pk}/",
        f"/dashboard/p/{owner.project.pk}/users/",
    ]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/?next=")


def test_login_and_logout(owner):
    user = operator_client("maria", project=owner.project).user
    user.set_password(PASSWORD)
    user.save()
    client = Client()
    page = client.get("/login/")
    assert page.status_code == 200 and b'name="password"' in page.content
    response = client.post("/login/", {"username": "maria", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/dashboard/"
    assert owner.project.name in client.get("/dashboard/").content.decode()
    assert client.get("/logout/").status_code == 405  # a link cannot log anyone out
    assert client.post("/logout/").status_code == 302
    assert client.get("/dashboard/").status_code == 302


def test_a_wrong_password_says_so(db):
    get_user_model().objects.create_user(username="maria", password=PASSWORD)
    response = Client().post("/login/", {"username": "maria", "password": "wrong"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()


def test_five_failures_then_429_even_with_the_right_password(db, settings):
    get_user_model().objects.create_user(username="maria", password=PASSWORD)
    client = Client()
    for _ in range(settings.LOGIN_FAILURES_PER_USERNAME):
        assert client.post("/login/", {"username": "maria", "password": "x"}).status_code == 200
    response = client.post("/login/", {"username": "Maria ", "password": PASSWORD})
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "Too many failed logins. Wait 5 minutes" in response.content.decode()
    assert "_auth_user_id" not in client.session
    # another username from another address is not affected
    other = Client(REMOTE_ADDR="10.0.0.9")
    get_user_model().objects.create_user(username="omar", password=PASSWORD)
    assert other.post("/login/", {"username": "omar", "password": PASSWORD}).status_code == 302


def test_one_address_trying_many_usernames_is_throttled(db, settings):
    settings.LOGIN_FAILURES_PER_IP = 3
    client = Client(REMOTE_ADDR="10.0.0.7")
    for name in ["a", "b", "c"]:
        assert client.post("/login/", {"username": name, "password": "x"}).status_code == 200
    assert client.post("/login/", {"username": "d", "password": "x"}).status_code == 429
    assert (
        Client(REMOTE_ADDR="10.0.0.8")
        .post("/login/", {"username": "d", "password": "x"})
        .status_code
        == 200
    )


def test_a_success_clears_the_usernames_failures(db, settings):
    get_user_model().objects.create_user(username="maria", password=PASSWORD)
    client = Client()
    for _ in range(settings.LOGIN_FAILURES_PER_USERNAME - 1):
        client.post("/login/", {"username": "maria", "password": "x"})
    assert client.post("/login/", {"username": "maria", "password": PASSWORD}).status_code == 302
    client.logout()
    for _ in range(settings.LOGIN_FAILURES_PER_USERNAME - 1):
        client.post("/login/", {"username": "maria", "password": "x"})
    assert client.post("/login/", {"username": "maria", "password": PASSWORD}).status_code == 302


def test_the_admin_login_is_throttled_too(db, settings):
    get_user_model().objects.create_superuser(username="root", password=PASSWORD)
    client = Client()
    for _ in range(settings.LOGIN_FAILURES_PER_USERNAME):
        response = client.post("/admin/login/", {"username": "root", "password": "x"})
        assert response.status_code == 200
    response = client.post("/admin/login/", {"username": "root", "password": PASSWORD})
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    assert client.get("/admin/").status_code == 302  # still not logged in


def test_failures_are_counted_in_redis_for_every_web_process(db, redis_client):
    Client().post("/login/", {"username": "maria", "password": "x"})
    assert len(list(redis_client.scan_iter("*login-failures:user:*"))) == 2  # count, since
    assert len(list(redis_client.scan_iter("*login-failures:ip:*"))) == 2


def test_create_operator_makes_a_member_of_one_project(owner, outsider):
    out = io.StringIO()
    call_command("create_operator", "vera", "--project", "owner", "--role", "viewer", stdout=out)
    password = out.getvalue().split("with password ")[1].strip()
    assert "viewer of 'owner'" in out.getvalue()
    user = get_user_model().objects.get(username="vera")
    assert not user.is_superuser and not user.is_staff
    assert Membership.objects.get(user=user).role == "viewer"
    client = Client()
    assert client.post("/login/", {"username": "vera", "password": password}).status_code == 302
    page = client.get("/dashboard/").content.decode()
    assert f"/dashboard/p/{owner.project.pk}/" in page
    assert f"/dashboard/p/{outsider.project.pk}/" not in page

    call_command("create_operator", "vera", "--project", "owner", "--role", "editor", stdout=out)
    assert Membership.objects.get(user=user).role == "editor"
    with pytest.raises(CommandError, match="No project called 'nope'"):
        call_command("create_operator", "vera", "--project", "nope", stdout=out)
