"""A web process runs at most SEARCH_CONCURRENCY searches at once: one more waits for a
slot (holding a thread, not the CPU) and says how long in timings_ms."""

import threading
import time

from memories.models import EndUser, Memory, content_hash
from memories.services.search import memory_search
from memories.services.search.slots import SearchSlots, search_slot

HOLD_SECONDS = 0.3


def test_one_search_more_than_the_slots_waits_for_one_to_free(settings):
    settings.SEARCH_CONCURRENCY = 2
    inside, most_inside = 0, 0
    lock = threading.Lock()
    entered = [threading.Event() for _ in range(3)]
    leave = threading.Event()
    waits: list[float] = [0.0] * 3

    def search(number: int) -> None:
        nonlocal inside, most_inside
        timings: dict[str, float] = {}
        with search_slot(timings):
            with lock:
                inside += 1
                most_inside = max(most_inside, inside)
            entered[number].set()
            leave.wait(5)
            with lock:
                inside -= 1
        waits[number] = timings["search_wait"]

    threads = [threading.Thread(target=search, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(HOLD_SECONDS)
    assert sum(event.is_set() for event in entered) == 2  # the third is waiting
    leave.set()
    for thread in threads:
        thread.join(5)

    assert all(event.is_set() for event in entered)
    assert most_inside == 2
    assert max(waits) >= HOLD_SECONDS * 1000 * 0.8
    assert sorted(waits)[1] < HOLD_SECONDS * 1000 / 3  # two got a slot at once


def test_a_freed_slot_goes_to_the_longest_waiter_not_a_newcomer():
    slots = SearchSlots(1)
    slots.acquire()
    order: list[str] = []

    def search(name: str) -> None:
        slots.acquire()
        order.append(name)
        slots.release()

    waiters = []
    for name in ("first", "second"):
        waiters.append(threading.Thread(target=search, args=(name,)))
        waiters[-1].start()
        while len(slots.waiters) < len(waiters):  # queued in this order
            time.sleep(0.01)
    slots.release()
    newcomer = threading.Thread(target=search, args=("newcomer",))
    newcomer.start()
    for thread in (*waiters, newcomer):
        thread.join(5)

    assert order == ["first", "second", "newcomer"]
    assert slots.free == 1 and not slots.waiters


def test_a_search_reports_its_wait_for_a_slot_in_its_total(owner, settings):
    settings.SEARCH_CONCURRENCY = 1
    alice = EndUser.objects.create(project=owner.project, external_id="alice")
    Memory.objects.create(
        project=owner.project,
        end_user=alice,
        content="Piano lessons on Monday",
        content_hash=content_hash("Piano lessons on Monday"),
    )
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with search_slot({}):
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    threading.Timer(HOLD_SECONDS, release.set).start()
    result = memory_search(project=owner.project, query="piano", mode="keyword")
    holder.join(5)

    assert [hit.memory.content for hit in result.hits] == ["Piano lessons on Monday"]
    assert result.timings_ms["search_wait"] >= HOLD_SECONDS * 1000 * 0.8
    assert result.timings_ms["total"] >= result.timings_ms["search_wait"]


def test_no_bound_no_wait(owner, settings):
    settings.SEARCH_CONCURRENCY = 0
    result = memory_search(project=owner.project, query="piano", mode="keyword")

    assert "search_wait" not in result.timings_ms
