"""The mirror's queue (tui/store/waiting.py): what `resume` needs goes first, once per
key, and catching up after a long outage costs n log n, not the square of the queue
(10 000 objects waiting held the engine's interpreter for minutes while the rules
waited: the queue was scanned whole to queue one object and again to take one)."""

from __future__ import annotations

import pytest

from tui.store.layout import ObjectKind
from tui.store.waiting import Job, WaitingJobs, rank


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ckpt(run: str, name: str, t: float, step: int | None = None, sidecar: bool = False) -> Job:
    key = f"runs/{run}/checkpoints/{name}"
    return Job(ObjectKind.CHECKPOINT, f".itera/runs/{run}/{name}",
               key + (".json" if sidecar else ""), run, t, step=step, group=key)


def result(run: str, name: str, t: float, source_tag: str = "") -> Job:
    return Job(ObjectKind.RESULT, f".itera/runs/{run}/{name}{source_tag}",
               f"runs/{run}/{name}", run, t)


def log(run: str, t: float, not_before: float = 0.0) -> Job:
    return Job(ObjectKind.LOG, f".itera/runs/{run}/stdout.log", f"runs/{run}/stdout.log",
               run, t, tail=1000, not_before=not_before)


def drain(queue: WaitingJobs, closing: bool = False) -> list[str]:
    taken = []
    while (job := queue.next_due(closing)) is not None:
        taken.append(job.key)
        queue.remove(job)
    return taken


def test_the_plan_then_checkpoints_then_results_then_logs_each_oldest_first():
    queue = WaitingJobs()
    queue.add(log("a", 1.0))
    queue.add(result("b", "exit.json", 3.0))
    queue.add(result("a", "exit.json", 2.0))
    queue.add(ckpt("b", "step-2.pt", 5.0))
    queue.add(ckpt("a", "step-1.pt", 4.0))
    queue.put_first(Job(ObjectKind.PLAN, ".itera/plan.toml", "plan.toml", None, 9.0))
    assert drain(queue) == ["plan.toml", "runs/a/checkpoints/step-1.pt",
                            "runs/b/checkpoints/step-2.pt", "runs/a/exit.json",
                            "runs/b/exit.json", "runs/a/stdout.log"]
    assert len(queue) == 0 and list(queue) == []


def test_a_log_not_yet_due_waits_until_its_time_or_the_close():
    clock = Clock()
    queue = WaitingJobs(monotonic=clock)
    queue.add(log("a", 1.0, not_before=clock.now + 5))
    queue.add(result("a", "exit.json", 2.0))
    assert drain(queue) == ["runs/a/exit.json"]
    assert queue.next_due(closing=False) is None and len(queue) == 1
    clock.now += 5
    assert drain(queue) == ["runs/a/stdout.log"]
    queue.add(log("b", 3.0, not_before=clock.now + 60))
    assert drain(queue, closing=True) == ["runs/b/stdout.log"]  # closing: all due


def test_once_per_key_a_newer_result_or_checkpoint_replaces_the_waiting_one_in_its_place():
    queue = WaitingJobs()
    first = result("a", "metrics.jsonl", 1.0)
    queue.add(first)
    queue.add(result("b", "metrics.jsonl", 2.0))
    whole = result("a", "metrics.jsonl", 1.0, source_tag="#whole")  # the same key, later
    queue.add(whole)
    plan = Job(ObjectKind.PLAN, ".itera/plan.toml", "plan.toml", None, 0.0)
    queue.put_first(plan)
    queue.put_first(Job(ObjectKind.PLAN, ".itera/other.toml", "plan.toml", None, 0.0))
    assert [j.key for j in queue] == ["plan.toml", "runs/a/metrics.jsonl",
                                      "runs/b/metrics.jsonl"]
    assert queue.next_due(False) is plan
    queue.remove(plan)
    taken = queue.next_due(False)
    assert taken is whole  # the newer job, in the older one's place
    queue.remove(first)  # the replaced job's removal leaves the newer one waiting
    assert queue.next_due(False) is whole


def test_a_runs_newer_checkpoint_replaces_its_older_ones_and_their_sidecars():
    queue = WaitingJobs()
    queue.add(ckpt("a", "step-1.pt", 1.0, step=1))
    queue.add(ckpt("a", "step-1.pt", 1.0, step=1, sidecar=True))
    queue.add(ckpt("b", "step-1.pt", 2.0, step=1))
    queue.add(ckpt("a", "step-2.pt", 3.0, step=2))
    queue.add(ckpt("a", "step-2.pt", 3.0, step=2, sidecar=True))
    assert sorted((j.run, j.key.rsplit("/", 1)[-1]) for j in queue) == [
        ("a", "step-2.pt"), ("a", "step-2.pt.json"), ("b", "step-1.pt")]
    assert drain(queue) == ["runs/b/checkpoints/step-1.pt", "runs/a/checkpoints/step-2.pt",
                            "runs/a/checkpoints/step-2.pt.json"]


@pytest.mark.parametrize("n", [1_000, 20_000])
def test_catching_up_after_an_outage_ranks_each_job_a_bounded_number_of_times(n):
    """The work, counted in rank computations (never a duration): each job is ranked
    when it is queued and when it becomes due, not once per job taken before it."""
    ranked = 0

    def counting(job: Job) -> tuple:
        nonlocal ranked
        ranked += 1
        return rank(job)

    clock = Clock()
    queue = WaitingJobs(counting, monotonic=clock)
    for i in range(n):  # runs' checkpoints (each verified again: replaced), results, logs
        queue.add(ckpt(f"r{i % 50}", f"step-{i}.pt", float(i), step=i))
        queue.add(result(f"r{i}", "exit.json", float(i)))
        queue.add(result(f"r{i}", "exit.json", float(i), source_tag="#whole"))
        queue.add(log(f"r{i}", float(i), not_before=clock.now + 1))
    clock.now += 1
    taken = drain(queue)
    assert len(taken) == 50 + 2 * n and len(queue) == 0
    assert taken[:50] == [f"runs/r{i % 50}/checkpoints/step-{i}.pt" for i in range(n - 50, n)]
    assert ranked <= 6 * n, ranked
