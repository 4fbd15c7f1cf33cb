"""The pruning policies' choice (memories/services/pruning_plan.py): each policy's exact
choice on its own and all together (age, fifo, importance, size, in that order),
pinned memories kept, memories without a user as a group of their own."""

from __future__ import annotations

import pytest

from memories.services.pruning import prune_run
from memories.services.pruning_plan import prune_plan
from tests.memories.services.test_pruning import (
    ONE_POLICY,
    POLICY,
    SYSTEM,
    names,
    policy_set,
    seed,
    statuses,
)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("age", ["m5", "m1"]),  # m2 important, m3 read 7 times, m4 pinned, f3 superseded
        # 3 per user and kind, pinned m4 kept first: m9, m8 stay; facts are 3
        ("fifo", ["m3", "m2", "m1", "m6", "m7"]),
        # keep 5: pinned f4 and m4, then m2 .9, f2 .7, m8 .6; m3 and m6 tie at .3: older first
        ("importance", ["m3", "m1", "f1", "m6", "m7", "m9"]),
        # f4, m4, m2, f2 (100 bytes each) + m8 (700) = 1,100 > 1,048: m8 and all below go
        ("size", ["m3", "m1", "f1", "m6", "m7", "m8", "m9"]),
    ],
)
def test_each_policy_alone_chooses_exactly(owner, policy, expected):
    rows = seed(owner.project)
    policy_set(owner.project, **ONE_POLICY[policy])
    plan = prune_plan(project=owner.project)
    assert names(rows, plan.ids[policy]) == expected  # oldest first
    assert plan.total == len(expected)  # the other policies chose nothing


def test_policies_together_each_take_what_the_ones_before_left(owner):
    rows = seed(owner.project)
    policy_set(owner.project, **POLICY)
    plan = prune_plan(project=owner.project)
    assert {policy: names(rows, ids) for policy, ids in plan.ids.items()} == {
        "age": ["m5", "m1"],
        "fifo": ["m3", "m2", "m6", "m7"],  # m4 (pinned), m9, m8 stay
        "importance": ["f1"],  # 6 left: f4, m4 (pinned), f2, m8, m9 stay
        "size": ["m9"],  # f4 + m4 + f2 + m8 = 1,000 bytes; m9 would make 1,100
    }
    assert prune_plan(project=owner.project).ids == plan.ids  # deterministic


def test_pinned_memories_survive_every_policy(owner):
    spec = {
        f"p{i}": ("message", 1000 + i, 0.0, {"pinned": True, "metadata": {"pad": "x" * 5000}})
        for i in range(4)
    }
    rows = seed(owner.project, spec=spec)
    policy_set(
        owner.project,
        max_age_days=1,
        age_keep_importance=0,
        age_keep_access_count=0,
        fifo_per_user_kind=1,
        importance_cap=1,
        max_mb_per_user=0.001,
    )
    assert prune_plan(project=owner.project).total == 0
    prune_run(project=owner.project, actor=SYSTEM, purge=True)
    assert set(statuses(rows).values()) == {"active"}


def test_a_threshold_of_zero_keeps_nothing_back_from_the_age_policy(owner):
    rows = seed(owner.project)
    policy_set(owner.project, max_age_days=365, age_keep_importance=0, age_keep_access_count=0)
    assert names(rows, prune_plan(project=owner.project).ids["age"]) == ["m5", "m3", "m2", "m1"]


def test_memories_without_a_user_are_capped_as_their_own_group(owner):
    spec = {"old": ("message", 3, 0.5, {}), "new": ("message", 1, 0.5, {})}
    mine = seed(owner.project, spec=spec)
    nobody = seed(owner.project, user=None, spec=spec)
    policy_set(owner.project, fifo_per_user_kind=1)
    plan = prune_plan(project=owner.project)
    assert plan.ids["fifo"] == [nobody["old"].pk, mine["old"].pk]  # user-less sort first
