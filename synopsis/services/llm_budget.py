"""The project's monthly token budget (setting ``llm.monthly_token_budget``, 0: no limit):
the tokens (prompt + completion) of its recorded LlmCalls since the first of the month
(UTC). Once they reach the budget, ``llm_budget_spent`` says so and the workers use the
offline methods (synopsis/llm.py ``llm_choice``) until the month ends; nothing fails.

The check runs before every LLM call. A project without a budget costs one read of its
settings. With one, the month's sum (an index range scan on (project, -created_at)) is
cached in Redis for CACHE_SECONDS, and each recorded call adds its tokens to the cached
sum (``llm_budget_record``): a worker sees its own calls at once and the others' within
CACHE_SECONDS at worst. Without Redis the sum is read from the database every time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import redis
from django.db.models import F, Sum
from django.db.models.functions import Coalesce

from memories.models import Project
from memories.providers.redis_client import redis_client
from memories.services.configuration import project_settings_get
from synopsis.models import LlmCall

logger = logging.getLogger(__name__)

CACHE_KEY = "memoryhub:llm-tokens:{}:{}"  # project id, month (YYYY-MM)
CACHE_SECONDS = 30
BUDGET_SPENT = "the project's monthly token budget (llm.monthly_token_budget) is spent"
# add to the cached sum only while it is cached: a missing sum is read from the database
_INCREMENT = """
if redis.call('exists', KEYS[1]) == 1 then
  return redis.call('incrby', KEYS[1], ARGV[1])
end
return nil
"""


@dataclass(frozen=True)
class LlmBudget:
    """A project's LLM tokens this calendar month (UTC) against its budget."""

    tokens: int  # prompt + completion of the month's LlmCalls
    budget: int  # llm.monthly_token_budget; 0: no limit
    month_start: datetime
    resets_at: datetime  # the first of next month, 00:00 UTC

    @property
    def spent(self) -> bool:
        return self.budget > 0 and self.tokens >= self.budget

    @property
    def remaining(self) -> int | None:
        """Tokens left this month; None without a limit."""
        return max(0, self.budget - self.tokens) if self.budget else None

    @property
    def share(self) -> float | None:
        """The part of the budget used (0..1, capped); None without a limit."""
        return min(1.0, self.tokens / self.budget) if self.budget else None


def month_bounds(now: datetime | None = None) -> tuple[datetime, datetime]:
    """The first instant of ``now``'s calendar month (UTC) and of the next one."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = start.replace(year=start.year + 1, month=1) if start.month == 12 else None
    return start, following or start.replace(month=start.month + 1)


def month_tokens(*, project_id: int, start: datetime, end: datetime) -> int:
    """Prompt + completion tokens of the project's LlmCalls in [start, end) (a call
    without a count, e.g. one that failed, counts 0)."""
    total = (
        LlmCall.objects.filter(project_id=project_id, created_at__gte=start, created_at__lt=end)
        .order_by()
        .aggregate(
            n=Sum(Coalesce(F("prompt_tokens"), 0) + Coalesce(F("completion_tokens"), 0)),
        )["n"]
    )
    return int(total or 0)


def _cache_key(project_id: int, start: datetime) -> str:
    return CACHE_KEY.format(project_id, f"{start:%Y-%m}")


def _tokens_cached(project_id: int, start: datetime, end: datetime) -> int:
    """The month's tokens from Redis, else from the database (then cached)."""
    key = _cache_key(project_id, start)
    try:
        client = redis_client()
        cached = client.get(key)
        if cached is not None:
            return int(cached)
    except redis.RedisError:
        return month_tokens(project_id=project_id, start=start, end=end)
    tokens = month_tokens(project_id=project_id, start=start, end=end)
    try:
        client.set(key, tokens, ex=CACHE_SECONDS, nx=True)
    except redis.RedisError as error:
        logger.info("could not cache the LLM tokens of project %s: %s", project_id, error)
    return tokens


def llm_budget_get(
    *, project: Project, now: datetime | None = None, cached: bool = True
) -> LlmBudget:
    """The project's tokens this month (at ``now``) and its budget; ``cached`` False
    reads the sum from the database (what a page showing the figure wants)."""
    start, end = month_bounds(now)
    budget = project_settings_get(project=project).llm.monthly_token_budget
    if cached and now is None:
        tokens = _tokens_cached(project.pk, start, end)
    else:
        tokens = month_tokens(project_id=project.pk, start=start, end=end)
    return LlmBudget(tokens=tokens, budget=budget, month_start=start, resets_at=end)


def llm_budget_spent(*, project_id: int | None) -> bool:
    """Whether the project's budget for this month is spent (False for no project, an
    unknown one, or no limit): checked before every LLM call."""
    if project_id is None:
        return False
    overrides = Project.objects.filter(pk=project_id).values_list("settings", flat=True).first()
    section = (overrides or {}).get("llm") or {}
    budget = int(section.get("monthly_token_budget") or 0)  # validated when it was set
    if budget <= 0:
        return False  # the default: no limit, and no sum to read
    start, end = month_bounds()
    return _tokens_cached(project_id, start, end) >= budget


@lru_cache(maxsize=4)
def _increment_script(client: redis.Redis) -> Any:
    return client.register_script(_INCREMENT)


def llm_budget_record(*, project_id: int | None, tokens: int, at: datetime) -> None:
    """Add a recorded call's tokens to the cached sum of its month, if cached (the
    database has them anyway); a Redis error is logged only."""
    if project_id is None or tokens <= 0:
        return
    try:
        client = redis_client()
        start, _ = month_bounds(at)
        _increment_script(client)(
            keys=[_cache_key(project_id, start)], args=[tokens], client=client
        )
    except redis.RedisError as error:
        logger.info("could not count the LLM tokens of project %s: %s", project_id, error)
