"""The user page's panels: the synopsis (freshness, edit, lock, refresh, recorded as the
operator) and the context preview (exactly what an agent gets, counted exactly, and
recording nothing); viewers read but change nothing; other tenants' users are 404s."""

import html
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from console.services.user_page import RECENT_ROOMS
from memories.models import EndUser, Membership, Synopsis, SynopsisRevision
from memories.providers.tokens import token_count
from memories.services.access import accesses_flush
from memories.services.context.history import savings_totals
from memories.services.synopsis import SynopsisDraft, synopsis_store
from memories.services.synopsis_refresh import QUEUED_FLAG
from tests.conftest import embed_pending
from tests.console.test_user_page import operator_client, write

HTMX = {"HTTP_HX_REQUEST": "true"}
NOW = timezone.now()


@pytest.fixture
def editor(owner):
    return operator_client(owner.project, "erin")


@pytest.fixture
def viewer(owner):
    return operator_client(owner.project, "victor", Membership.Role.VIEWER)


@pytest.fixture
def maria(owner):
    """Maria: a conversation about her cat in the kitchen, a fact, a goal."""
    write(
        owner,
        {
            "user": "maria",
            "room": "kitchen",
            "role": "user",
            "content": "I adopted a cat called Miso",
            "created_at": (NOW - timedelta(days=3)).isoformat(),
        },
        {
            "user": "maria",
            "room": "kitchen",
            "role": "assistant",
            "content": "Miso is a lovely name!",
            "created_at": (NOW - timedelta(days=3, minutes=-1)).isoformat(),
        },
        {
            "user": "maria",
            "room": "garden",
            "role": "user",
            "content": "The tomatoes are ripe",
            "created_at": (NOW - timedelta(days=1)).isoformat(),
        },
        {"user": "maria", "kind": "fact", "content": "Maria lives in Lisbon", "confidence": 0.9},
        {"user": "maria", "kind": "goal", "content": "Plant basil in spring"},
    )
    return EndUser.objects.get(project=owner.project, external_id="maria")


def url(name, owner, user, *rest):
    return reverse(name, args=[owner.project.pk, user.pk, *rest])


def stored(maria, *, identity_age=timedelta(minutes=5), context_age=timedelta(hours=2)):
    """Generated parts: identity within its 7 days, context past its hour."""
    synopsis_store(
        end_user=maria,
        drafts=[
            SynopsisDraft(
                "identity", "Maria lives in Lisbon.", "template", [], timezone.now() - identity_age
            ),
            SynopsisDraft(
                "context",
                "Open goal: plant basil in spring.",
                "template",
                [],
                timezone.now() - context_age,
            ),
        ],
    )


def part_html(page, part):
    """The HTML of one part of the synopsis panel."""
    match = re.search(rf'id="synopsis-{part}"(.*?)</dl>', page, re.S)
    assert match, page
    return match.group(1)


# --- the slots ---------------------------------------------------------------------------


def test_the_overview_loads_the_synopsis_and_each_panel_is_a_tab(owner, editor, maria):
    page = editor.get(url("console-user", owner, maria)).content.decode()
    assert f'hx-get="{url("console-user-synopsis", owner, maria)}" hx-trigger="load"' in page
    for name, tab in (("console-user-synopsis", "Synopsis"), ("console-user-context", "Context")):
        whole = editor.get(url(name, owner, maria)).content.decode()
        assert "<html" in whole and f'aria-current="page">{tab}</a>' in whole
        alone = editor.get(url(name, owner, maria), **HTMX).content.decode()
        assert "<html" not in alone and 'class="panel-head"' in alone


# --- the synopsis ------------------------------------------------------------------------


def test_the_synopsis_shows_each_parts_freshness_generator_and_tokens(owner, editor, maria):
    stored(maria)
    response = editor.get(url("console-user-synopsis", owner, maria), **HTMX)
    page = response.content.decode()
    assert response.status_code == 200
    identity, context = part_html(page, "identity"), part_html(page, "context")
    assert 'data-freshness="fresh"' in identity and "Maria lives in Lisbon." in identity
    assert 'data-freshness="stale"' in context and "plant basil" in context
    assert "template" in identity
    assert f"<dt>tokens</dt><dd>{token_count('Maria lives in Lisbon.')}" in identity
    assert "kept 7 days" in page and "kept 1 hour" in page  # the project's TTLs


def test_reading_the_panel_asks_for_no_regeneration(owner, editor, maria, redis_client):
    stored(maria)  # the context part is stale: an agent's read would queue it
    editor.get(url("console-user-synopsis", owner, maria), **HTMX)
    assert not redis_client.exists(QUEUED_FLAG.format(maria.pk, "context"))


def test_a_user_without_a_synopsis_shows_both_parts_missing(owner, editor, maria):
    page = editor.get(url("console-user-synopsis", owner, maria), **HTMX).content.decode()
    assert page.count('data-freshness="missing"') == 2
    assert "Not generated yet" in page


def test_an_editor_edits_a_part_which_is_locked_and_recorded(
    owner, editor, maria, django_capture_on_commit_callbacks
):
    stored(maria)
    form = editor.get(url("console-user-synopsis-edit", owner, maria, "identity"), **HTMX)
    assert "Maria lives in Lisbon.</textarea>" in form.content.decode()
    with django_capture_on_commit_callbacks(execute=True):  # the cache put after the commit
        response = editor.post(
            url("console-user-synopsis-edit", owner, maria, "identity"),
            {"text": "Maria (she/her) lives in Lisbon with her cat Miso.", "lock": "on"},
            **HTMX,
        )
    assert response.status_code == 200
    assert "The identity part is saved and locked." in response.content.decode()
    row = Synopsis.objects.get(end_user=maria)
    assert row.identity_text == "Maria (she/her) lives in Lisbon with her cat Miso."
    assert row.identity_locked and row.identity_generator == "operator"
    revision = SynopsisRevision.objects.get(end_user=maria)
    assert (revision.part, revision.action, revision.actor) == ("identity", "edit", "erin")
    assert revision.before["text"] == "Maria lives in Lisbon."
    api = owner.client.get("/api/v1/users/maria/synopsis/").json()
    assert api["identity"]["locked"] and api["identity"]["edited_by"] == "operator:erin"
    assert api["identity"]["text"].endswith("her cat Miso.")


def test_an_edit_may_leave_the_part_unlocked(owner, editor, maria):
    response = editor.post(
        url("console-user-synopsis-edit", owner, maria, "context"), {"text": "Planting basil."}
    )
    assert response.status_code == 200
    row = Synopsis.objects.get(end_user=maria)
    assert row.context_text == "Planting basil." and not row.context_locked


def test_a_text_over_the_token_limit_is_refused_in_place(owner, editor, maria):
    response = editor.post(
        url("console-user-synopsis-edit", owner, maria, "identity"),
        {"text": "word " * 400, "lock": "on"},
        **HTMX,
    )
    assert response.status_code == 422
    assert "At most 300 tokens" in response.content.decode()
    assert not Synopsis.objects.filter(end_user=maria, identity_text__startswith="word").exists()


def test_lock_and_unlock_are_recorded(owner, editor, maria):
    stored(maria)
    lock = url("console-user-synopsis-lock", owner, maria, "context")
    page = editor.post(lock, {"locked": "true"}, **HTMX).content.decode()
    assert "The context part is locked." in page
    assert 'class="tag lock"' in part_html(page, "context")
    assert Synopsis.objects.get(end_user=maria).context_locked
    editor.post(lock, {"locked": "false"}, **HTMX)
    assert not Synopsis.objects.get(end_user=maria).context_locked
    actions = SynopsisRevision.objects.filter(end_user=maria).order_by("created_at")
    assert [(r.action, r.actor) for r in actions] == [("lock", "erin"), ("unlock", "erin")]
    assert editor.post(lock, {"locked": "maybe"}).status_code == 400


def test_a_refresh_queues_the_unlocked_parts(
    owner, editor, maria, redis_client, django_capture_on_commit_callbacks
):
    stored(maria)
    editor.post(url("console-user-synopsis-lock", owner, maria, "identity"), {"locked": "true"})
    redis_client.delete(*(QUEUED_FLAG.format(maria.pk, part) for part in ("identity", "context")))
    page = editor.post(url("console-user-synopsis-refresh", owner, maria), **HTMX).content.decode()
    assert "Regeneration asked for: context." in page
    assert redis_client.exists(QUEUED_FLAG.format(maria.pk, "context"))
    assert not redis_client.exists(QUEUED_FLAG.format(maria.pk, "identity"))
    # the panel reads itself again until a part newer than the ask is written
    since = int(re.search(r"\?since=(\d+)", page).group(1))
    assert 'hx-trigger="load delay:3s"' in page
    again = editor.get(url("console-user-synopsis", owner, maria), {"since": since}, **HTMX)
    assert "?since=" in again.content.decode()  # nothing new yet: it keeps asking
    with django_capture_on_commit_callbacks(execute=True):  # the cache follows the commit
        stored(maria, context_age=timedelta(0))  # the worker's new version
    done = editor.get(url("console-user-synopsis", owner, maria), {"since": since}, **HTMX)
    assert "?since=" not in done.content.decode()


def test_a_refresh_with_both_parts_locked_says_so(owner, editor, maria):
    for part in ("identity", "context"):
        editor.post(url("console-user-synopsis-lock", owner, maria, part), {"locked": "true"})
    page = editor.post(url("console-user-synopsis-refresh", owner, maria)).content.decode()
    assert "Both parts are locked" in page


# --- the context preview -----------------------------------------------------------------


def preview(client, owner, maria, **params):
    values = {
        "query": "what pet does she have?",
        "max_tokens": "4000",
        "encoding": "cl100k_base",
        "room": "",
        **params,
    }
    return client.get(url("console-user-context", owner, maria), values, **HTMX)


def prompt_of(page):
    match = re.search(r'<pre class="context-prompt">(.*?)</pre>', page, re.S)
    assert match, page
    return html.unescape(match.group(1))


def test_the_preview_form_starts_from_the_projects_defaults(owner, viewer, maria):
    response = viewer.get(url("console-user-context", owner, maria), **HTMX)
    page = response.content.decode()
    assert response.status_code == 200
    assert 'name="max_tokens" value="4000"' in page
    assert '<option value="cl100k_base" selected>' in page
    suggested = re.search(r'<datalist id="context-rooms">(.*?)</datalist>', page, re.S)[1]
    assert sorted(re.findall(r'<option value="([^"]+)">', suggested)) == ["garden", "kitchen"]
    assert "context-prompt" not in page


def test_the_preview_shows_the_prompt_counted_exactly_and_why(owner, viewer, maria):
    embed_pending()
    stored(maria)
    page = preview(viewer, owner, maria, room="kitchen", max_tokens="600").content.decode()
    prompt = prompt_of(page)
    total = int(re.search(r'<strong class="total-tokens">(\d+)</strong> / 600 tokens', page)[1])
    assert total == token_count(prompt) <= 600
    assert "## About the user" in prompt and "Maria lives in Lisbon." in prompt
    assert "I adopted a cat called Miso" in prompt  # the kitchen's conversation
    assert "turn 2 of the 2 most recent" in page  # why a history item was chosen
    assert re.search(r'class="section-history" style="width: \d+\.\d\d%"', page)
    assert "the full room’s history" in page


def test_the_preview_lists_what_was_dropped_and_why(owner, editor, maria):
    write(
        owner,
        *[
            {
                "user": "maria",
                "room": "kitchen",
                "role": "user",
                "content": f"Miso chased the laser dot again, round {i}, across the whole flat.",
            }
            for i in range(12)
        ],
    )
    page = preview(editor, owner, maria, room="kitchen", max_tokens="100").content.decode()
    assert 'class="dropped"' in page
    assert "over the section" in page  # the reason
    # bounded: a section lists its best few dropped candidates, the rest as a count
    assert page.count('<span class="tag status">dropped</span>') <= 5 * 4  # per section
    assert re.search(r"and \d+ more dropped", page)


def test_the_preview_records_no_access_and_no_savings(owner, viewer, maria):
    embed_pending()
    cat = maria.memories.get(content__startswith="I adopted")
    before = savings_totals(end_user=maria)
    page = preview(viewer, owner, maria, query="Miso the cat").content.decode()
    assert "I adopted a cat called Miso" in prompt_of(page)
    accesses_flush()
    cat.refresh_from_db()
    assert cat.access_count == 0
    assert savings_totals(end_user=maria) == before
    # an agent's context, the same query, counts: the check above could fail
    body = owner.client.post(
        "/api/v1/context/", {"user": "maria", "query": "Miso the cat"}, format="json"
    ).json()
    assert "I adopted a cat called Miso" in body["prompt"]
    accesses_flush()
    cat.refresh_from_db()
    assert cat.access_count == 1
    assert savings_totals(end_user=maria)["contexts"] == before["contexts"] + 1


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"max_tokens": "50"}, "greater than or equal to 100"),
        ({"max_tokens": "300000"}, "less than or equal to 200000"),
        ({"query": ""}, "This field is required."),
        ({"encoding": "o200k_base"}, "Select a valid choice."),
        ({"room": "no-such-room"}, "This user has no memories in a room of that id."),
    ],
)
def test_bad_preview_input_is_shown_in_place(owner, editor, maria, params, error):
    response = preview(editor, owner, maria, **params)
    assert response.status_code == 422
    assert error in response.content.decode()
    assert "context-prompt" not in response.content.decode()


def test_the_preview_offers_only_the_users_rooms(owner, editor, maria):
    write(owner, {"user": "bob", "room": "bobs-room", "role": "user", "content": "Hello"})
    response = preview(editor, owner, maria, room="bobs-room")
    assert response.status_code == 422
    page = response.content.decode()
    assert "This user has no memories in a room of that id." in page
    suggested = re.search(r'<datalist id="context-rooms">(.*?)</datalist>', page, re.S)[1]
    assert "bobs-room" not in suggested and "kitchen" in suggested


def test_the_preview_suggests_her_most_recent_rooms_first(owner, editor, maria):
    for n in range(RECENT_ROOMS + 5):  # one write each: a room's latest write is later
        write(
            owner, {"user": "maria", "room": f"room-{n:02d}", "role": "user", "content": f"In {n}"}
        )
    page = editor.get(url("console-user-context", owner, maria), **HTMX).content.decode()
    suggested = re.search(r'<datalist id="context-rooms">(.*?)</datalist>', page, re.S)[1]
    rooms = re.findall(r'<option value="([^"]+)">', suggested)
    newest = [f"room-{n:02d}" for n in range(RECENT_ROOMS + 4, 4, -1)]
    assert rooms == newest


# --- who may do what ---------------------------------------------------------------------


def test_a_viewer_reads_the_panels_without_their_buttons(owner, viewer, maria):
    stored(maria)
    page = viewer.get(url("console-user-synopsis", owner, maria), **HTMX).content.decode()
    assert "Maria lives in Lisbon." in page
    assert "hx-post" not in page and ">Edit</button>" not in page


def test_a_viewer_gets_403_on_every_change(owner, viewer, maria):
    stored(maria)
    posts = [
        (url("console-user-synopsis-edit", owner, maria, "identity"), {"text": "Hacked"}),
        (url("console-user-synopsis-lock", owner, maria, "identity"), {"locked": "true"}),
        (url("console-user-synopsis-refresh", owner, maria), {}),
    ]
    for target, data in posts:
        assert viewer.post(target, data).status_code == 403, target
    assert (
        viewer.get(url("console-user-synopsis-edit", owner, maria, "identity")).status_code == 403
    )
    row = Synopsis.objects.get(end_user=maria)
    assert row.identity_text == "Maria lives in Lisbon." and not row.identity_locked
    assert not SynopsisRevision.objects.exists()


def test_another_projects_user_is_a_404(owner, outsider, editor, maria):
    write(outsider, {"user": "olga", "content": "Olga's secret"})
    olga = EndUser.objects.get(project=outsider.project, external_id="olga")
    for name in ("console-user-synopsis", "console-user-context"):
        assert editor.get(url(name, owner, olga)).status_code == 404, name
    assert editor.post(url("console-user-synopsis-refresh", owner, olga)).status_code == 404
    edit = url("console-user-synopsis-edit", owner, olga, "identity")
    assert editor.post(edit, {"text": "x"}).status_code == 404
    assert not Synopsis.objects.filter(end_user=olga).exists()
    # the user's own project id in the URL, without a membership: 404 as well
    foreign = reverse("console-user-context", args=[outsider.project.pk, olga.pk])
    assert editor.get(foreign).status_code == 404


def test_an_unknown_part_is_a_404(owner, editor, maria):
    assert (
        editor.post(
            url("console-user-synopsis-lock", owner, maria, "mood"), {"locked": "true"}
        ).status_code
        == 404
    )


def test_the_404_page_looks_like_the_console_and_links_back(owner, outsider, editor, maria):
    write(outsider, {"user": "olga", "content": "Olga's secret"})
    olga = EndUser.objects.get(project=outsider.project, external_id="olga")
    page = editor.get(url("console-user", owner, olga)).content.decode()
    assert 'class="topbar"' in page and "There is nothing here" in page
    assert f'href="{reverse("console-overview", args=[owner.project.pk])}"' in page


def test_the_403_page_says_why_and_links_back(owner, viewer, maria):
    response = viewer.post(url("console-user-synopsis-refresh", owner, maria))
    page = response.content.decode()
    assert response.status_code == 403
    assert 'class="topbar"' in page and "Viewers cannot change anything" in page
    assert f'href="{reverse("console-overview", args=[owner.project.pk])}"' in page
