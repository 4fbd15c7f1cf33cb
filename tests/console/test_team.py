"""The console's Team page: the project's operators; an editor adds an existing
operator or a new one (a password shown once), changes a role, removes one; the last
editor stays; every change in the activity log; viewers read only."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from memories.models import Membership
from tests.console.operators import operator_client

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def editor(owner):
    return operator_client("erin", project=owner.project)


@pytest.fixture
def viewer(owner):
    return operator_client("vic", project=owner.project, role="viewer")


def url(name, tenant):
    return reverse(name, args=[tenant.project.pk])


def roles(tenant):
    rows = Membership.objects.filter(project=tenant.project).values_list("user__username", "role")
    return dict(rows)


def test_the_team_lists_operators_and_roles(owner, editor, viewer):
    html = editor.get(url("console-team", owner)).content.decode()
    assert "erin" in html and "vic" in html and "Add a teammate" in html
    read_only = viewer.get(url("console-team", owner)).content.decode()
    assert "vic" in read_only and "Add a teammate" not in read_only


def test_an_existing_operator_is_added_by_username_or_email(owner, outsider, editor):
    other = operator_client("olga", project=outsider.project)
    other.user.email = "olga@example.org"
    other.user.save()
    added = editor.post(url("console-team-add", owner), {"operator": "olga", "role": "viewer"})
    assert "olga added as viewer." in added.content.decode()
    assert roles(owner)["olga"] == "viewer"
    again = editor.post(
        url("console-team-add", owner), {"operator": "OLGA@example.org", "role": "editor"}
    )
    assert again.status_code == 422 and "operator: olga is in the team already." in again.text
    assert roles(owner)["olga"] == "viewer"
    assert Membership.objects.filter(project=outsider.project, user=other.user).exists()


def test_a_new_operator_gets_a_password_shown_once_that_logs_in(owner, editor):
    response = editor.post(
        url("console-team-add", owner),
        {"username": "nadia", "email": "nadia@example.org", "role": "editor"},
        **HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200 and "nadia added as editor." in html
    password = html.split('<code class="secret">')[1].split("</code>")[0]
    assert len(password) >= 16
    assert roles(owner)["nadia"] == "editor"
    user = get_user_model().objects.get(username="nadia")
    assert not user.is_staff and not user.is_superuser
    client = Client()
    assert client.login(username="nadia", password=password)
    assert client.get(url("console-team", owner)).status_code == 200
    assert password not in editor.get(url("console-team", owner)).content.decode()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"operator": "nobody", "role": "viewer"}, "operator:"),
        ({"username": "", "email": "x@example.org", "role": "viewer"}, "username:"),
        ({"username": "bad name!", "email": "x@example.org", "role": "viewer"}, "username:"),
        ({"username": "xavier", "email": "not-an-email", "role": "viewer"}, "email:"),
        ({"username": "erin", "email": "e@example.org", "role": "viewer"}, "username:"),
        ({"username": "xavier", "email": "x@example.org", "role": "owner"}, "role:"),
    ],
)
def test_bad_input_is_named_and_changes_nothing(owner, editor, data, field):
    before = (get_user_model().objects.count(), roles(owner))
    response = editor.post(url("console-team-add", owner), data, **HTMX)
    assert response.status_code == 422 and field in response.content.decode()
    assert (get_user_model().objects.count(), roles(owner)) == before


def test_roles_change_and_the_last_editor_stays(owner, editor, viewer):
    vic = Membership.objects.get(user=viewer.user)
    erin = Membership.objects.get(user=editor.user)
    role = url("console-team-role", owner)
    alone = editor.post(role, {"membership": erin.pk, "role": "viewer"}, **HTMX)
    assert alone.status_code == 422 and "last editor" in alone.text
    removing = editor.post(url("console-team-remove", owner), {"membership": erin.pk}, **HTMX)
    assert removing.status_code == 422 and "last editor" in removing.text
    assert roles(owner) == {"erin": "editor", "vic": "viewer"}

    assert "vic is editor." in editor.post(role, {"membership": vic.pk, "role": "editor"}).text
    assert editor.post(role, {"membership": erin.pk, "role": "viewer"}).status_code == 200
    assert roles(owner) == {"erin": "viewer", "vic": "editor"}
    assert editor.post(role, {"membership": vic.pk, "role": "viewer"}).status_code == 403


def test_remove_keeps_the_login_and_the_log_says_who_did_what(owner, editor, viewer):
    vic = Membership.objects.get(user=viewer.user)
    done = editor.post(url("console-team-remove", owner), {"membership": vic.pk}, **HTMX)
    assert "vic removed from the team." in done.text
    assert "vic" not in roles(owner) and get_user_model().objects.filter(username="vic").exists()
    assert viewer.get(url("console-team", owner)).status_code == 404
    log = editor.get(url("console-activity", owner), {"action": "team"}).content.decode()
    assert "removed vic (viewer)" in log and "<strong>erin</strong>" in log


def test_viewers_and_other_projects_change_nothing(owner, outsider, editor, viewer):
    theirs = operator_client("tom", project=outsider.project)
    tom = Membership.objects.get(user=theirs.user)
    for name, data in [
        ("console-team-add", {"operator": "tom", "role": "editor"}),
        ("console-team-role", {"membership": tom.pk, "role": "viewer"}),
        ("console-team-remove", {"membership": tom.pk}),
    ]:
        assert viewer.post(url(name, owner), data).status_code == 403
        assert editor.post(url(name, outsider), data).status_code == 404
    other = editor.post(url("console-team-remove", owner), {"membership": tom.pk}, **HTMX)
    assert other.status_code == 422 and "membership:" in other.text
    assert Membership.objects.filter(pk=tom.pk, role="editor").exists()
    assert "tom" not in roles(owner)
