"""What the console's Pruning page reads and starts: the project's pruning policies as
set, a dry run (counts and ids per policy, what the purge would erase), a real run
queued for a worker (memories.services.pruning), and the record of past runs
(MaintenanceRun rows of task "prune")."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models.fields.json import KT

from console.services.user_page import Page, page_number
from memories.config import settings_as_dict, settings_schema
from memories.models import MaintenanceRun, Memory, Project
from memories.services.configuration import project_settings_get
from memories.services.pruning import POLICIES, PRUNE_TASK, prune_enqueue, prune_run
from memories.services.pruning_plan import pruning_enabled
from memories.services.revisions import Actor

RUNS_PAGE = 20
IDS_SHOWN = 12  # ids listed per policy; the rest counted ("and N more")
# what a run's counts hold besides the policies, in the order the page shows them
PURGE_COUNTS = (
    ("purged", "pruned memories erased"),
    ("trash_purged", "trash erased"),
    ("revisions_purged", "old revisions deleted"),
)


@dataclass
class Setting:
    name: str
    value: Any
    default: Any
    description: str
    is_set: bool


def policies_get(*, project: Project) -> tuple[list[Setting], bool]:
    """The project's pruning settings (value, default, whether overridden) and whether
    any policy is on."""
    config = project_settings_get(project=project)
    values = settings_as_dict(config)["pruning"]
    overrides = (project.settings or {}).get("pruning", {})
    settings = [
        Setting(name, values[name], entry["default"], entry["description"], name in overrides)
        for name, entry in settings_schema()["pruning"].items()
    ]
    return settings, pruning_enabled(config.pruning)


@dataclass
class MemoryLink:
    """One id of a run's list, with the user page it links to (None: no user, or the
    memory is gone)."""

    public_id: str
    end_user_id: int | None = None


@dataclass
class PolicyIds:
    policy: str
    count: int
    shown: list[MemoryLink] = field(default_factory=list)

    @property
    def more(self) -> int:
        return self.count - len(self.shown)


@dataclass
class RunView:
    """A run as the page shows it."""

    run: MaintenanceRun
    actor_type: str = ""
    actor: str = ""

    @classmethod
    def of(cls, run: MaintenanceRun) -> RunView:
        """A run read whole (its details hold who asked for it)."""
        details = run.details
        return cls(run, str(details.get("actor_type", "")), str(details.get("actor", "")))

    @property
    def who(self) -> str:
        """Who asked for it (a queued or a console's run), else the beat."""
        if self.actor:
            return f"{self.actor_type} {self.actor}".strip()
        return "scheduled (beat)"

    @property
    def duration(self) -> timedelta | None:
        if self.run.finished_at is None:
            return None
        return self.run.finished_at - self.run.started_at

    @property
    def running(self) -> bool:
        return self.run.status == MaintenanceRun.Status.RUNNING

    @property
    def policy_counts(self) -> list[tuple[str, int]]:
        return [(policy, self.run.counts.get(policy, 0)) for policy in POLICIES]

    @property
    def purge_counts(self) -> list[tuple[str, int]]:
        counts = self.run.counts
        return [(label, counts[key]) for key, label in PURGE_COUNTS if key in counts]


def _runs(project: Project) -> Any:
    return MaintenanceRun.objects.filter(project=project, task=PRUNE_TASK)


def runs_page(*, project: Project, page: str | None) -> Page:
    """A page of the project's prune runs, newest first; ``items`` are RunView."""
    runs = _runs(project)
    count = runs.count()
    number = page_number(page, pages=max(1, -(-count // RUNS_PAGE)))
    start = (number - 1) * RUNS_PAGE
    # not the details: up to 10,000 ids a run
    rows = (
        runs.defer("details")
        .annotate(actor_kind=KT("details__actor_type"), actor_name=KT("details__actor"))
        .order_by("-started_at", "-pk")[start : start + RUNS_PAGE]
    )
    items = [RunView(row, row.actor_kind or "", row.actor_name or "") for row in rows]
    return Page(items=items, number=number, count=count, size=RUNS_PAGE)


def run_get(*, project: Project, run_id: int) -> RunView | None:
    run = _runs(project).filter(pk=run_id).first()
    return RunView.of(run) if run else None


def dry_run_latest(*, project: Project) -> RunView | None:
    """The project's last dry run of the whole project (not one user's)."""
    run = (
        _runs(project)
        .filter(dry_run=True, status=MaintenanceRun.Status.OK)
        .exclude(details__has_key="user")
        .order_by("-started_at", "-pk")
        .first()
    )
    return RunView.of(run) if run else None


def run_ids(*, project: Project, run: MaintenanceRun) -> list[PolicyIds]:
    """Each policy's count and its first IDS_SHOWN ids, each with its user's page."""
    listed: dict[str, list[str]] = run.details.get("ids", {})
    shown = {policy: listed.get(policy, [])[:IDS_SHOWN] for policy in POLICIES}
    wanted = []
    for ids in shown.values():
        for raw in ids:
            try:
                wanted.append(uuid.UUID(raw))
            except ValueError:
                continue
    users = dict(
        Memory.objects.filter(project=project, public_id__in=wanted).values_list(
            "public_id", "end_user_id"
        )
    )
    return [
        PolicyIds(
            policy=policy,
            count=run.counts.get(policy, 0),
            shown=[MemoryLink(raw, _user_of(users, raw)) for raw in shown[policy]],
        )
        for policy in POLICIES
    ]


def _user_of(users: Mapping[uuid.UUID, int | None], raw: str) -> int | None:
    try:
        return users.get(uuid.UUID(raw))
    except ValueError:
        return None


def _actor_note(run: MaintenanceRun, actor: Actor) -> None:
    """Say who asked for a run (the queued runs say it already)."""
    run.details = {**run.details, "actor_type": actor.type, "actor": actor.name}
    MaintenanceRun.objects.filter(pk=run.pk).update(details=run.details)


def pruning_dry_run(*, project: Project, actor: Actor) -> MaintenanceRun:
    """What a real run would prune and purge now, recorded as a dry run (changes no
    memory: a viewer may, as a read-only API key may)."""
    run = prune_run(project=project, actor=actor, dry_run=True, purge=True)
    _actor_note(run, actor)
    return run


def pruning_start(*, project: Project, actor: Actor) -> MaintenanceRun:
    """Queue a real run (prune, then purge) for a worker; its row, ``running`` until the
    worker ends it. PruneQueueUnavailable when the broker cannot take it."""
    return prune_enqueue(project=project, actor=actor)


def pruning_running(*, project: Project) -> MaintenanceRun | None:
    """The project's real run still waiting or running, if any."""
    return (
        _runs(project)
        .filter(dry_run=False, status=MaintenanceRun.Status.RUNNING)
        .order_by("-started_at")
        .first()
    )


def real_run_latest(*, project: Project) -> RunView | None:
    """The project's last real run (of the whole project), under way or ended."""
    run = (
        _runs(project)
        .filter(dry_run=False)
        .exclude(details__has_key="user")
        .order_by("-started_at", "-pk")
        .first()
    )
    return RunView.of(run) if run else None
