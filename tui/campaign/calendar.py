"""The campaign calendar: intervals on GPU lanes against the rental window.

The calendar is built from explicit steps (human or machine), one pilot
interval per variant, the decision point, one interval per variant run, and
the wrap-up and retrieval. Machine intervals hold GPU lanes: a lot with N GPUs
gives N lanes, a run that needs k GPUs takes k lanes of one lot (a second lot
does not merge memory), and two intervals never share a lane at the same
time. Independent intervals (human preparation, runs on other lanes) overlap.

Scheduling is a deterministic list schedule: tasks in dependency order, ties
broken by phase, category and priority, each placed at the earliest time its
dependencies are done and enough lanes of one lot are free. The engine uses
the same placement (`place`) so the projection and reality agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .graph import longest_chain_hours
from .units import human_duration
from .plan import CATEGORY_RANK, Plan

PHASES = {"step": 0, "pilot": 1, "decision": 2, "run": 3, "post": 4, "wrapup": 5,
          "retrieval": 6}


@dataclass(frozen=True)
class Task:
    """One thing the calendar places: a step, a pilot, the decision, a run or the wrap-up."""
    id: str
    label: str
    kind: str  # step | pilot | decision | run | post | wrapup | retrieval
    who: str  # human | machine
    hours: float
    deps: tuple[str, ...]
    gpus: int
    sort_key: tuple = ()
    category: str | None = None


@dataclass(frozen=True)
class Entry:
    """A task placed on the calendar: its hours, its lanes and its slack."""
    task: Task
    start: float  # hours from the window start
    end: float
    lanes: tuple[str, ...]  # "lot:index" lane ids
    lot: str | None
    latest_start: float
    critical: bool

    @property
    def id(self) -> str:
        return self.task.id

    def to_dict(self) -> dict:
        return {"id": self.task.id, "label": self.task.label, "kind": self.task.kind,
                "who": self.task.who, "category": self.task.category,
                "start_hours": round(self.start, 4), "end_hours": round(self.end, 4),
                "hours": round(self.task.hours, 4), "lanes": list(self.lanes),
                "lot": self.lot, "latest_start_hours": round(self.latest_start, 4),
                "critical": self.critical}


@dataclass(frozen=True)
class Calendar:
    """The campaign laid out in time: whether it fits the window, and its critical path."""
    entries: tuple[Entry, ...]
    window_hours: float
    end_to_end_hours: float
    machine_hours: float
    gpu_hours: float
    human_hours: float
    longest_chain_hours: float
    critical_path: tuple[str, ...]
    lanes: tuple[str, ...] = field(default=())

    @property
    def slack_hours(self) -> float:
        return round(self.window_hours - self.end_to_end_hours, 6)

    lot_hours: tuple[tuple[str, float], ...] = field(default=())

    @property
    def lot_overruns(self) -> list[dict]:
        """Intervals placed on a lot that end after that lot's own window."""
        hours = dict(self.lot_hours)
        return [{"lot": e.lot, "task": e.id, "end_hours": round(e.end, 4),
                 "lot_hours": hours[e.lot]}
                for e in self.entries if e.lot in hours and e.end > hours[e.lot] + 1e-9]

    @property
    def fits(self) -> bool:
        return self.slack_hours >= -1e-9 and not self.lot_overruns

    @property
    def over_hours(self) -> float:
        return max(0.0, -self.slack_hours)

    def entry(self, task_id: str) -> Entry:
        for e in self.entries:
            if e.id == task_id:
                return e
        raise KeyError(task_id)

    def latest_starts(self, plan: Plan) -> dict[str, float]:
        """Latest start (hours from window start) of each mandatory run."""
        return {v.id: self.entry(v.id).latest_start for v in plan.variants
                if v.category == "mandatory"}


def pilot_hours(plan: Plan, variant) -> float:
    pilot = plan.pilot
    if pilot is None:
        return 0.0
    if pilot.hours is not None:
        return pilot.hours
    if variant.pilot_hours is not None:  # calibrated from a prior bundle
        return variant.pilot_hours
    if pilot.steps and variant.steps:
        return variant.hours * min(1.0, pilot.steps / variant.steps)
    return variant.hours * 0.1


def build_tasks(plan: Plan, durations: dict[str, float] | None = None) -> list[Task]:
    """Tasks of the plan; `durations` overrides run hours (re-estimation)."""
    durations = durations or {}
    pre, post = plan.split_steps()
    tasks: list[Task] = []
    for i, s in enumerate(pre):
        tasks.append(Task(s.id, s.id, "step", s.who, s.hours, s.after,
                          s.gpus if s.who == "machine" else 0, (PHASES["step"], 0, 0, i)))
    gate = tuple(s.id for s in pre)
    if plan.pilot is not None:
        pilots = []
        for i, v in enumerate(plan.variants):
            tid = f"pilot:{v.id}"
            pilots.append(tid)
            tasks.append(Task(tid, f"pilot {v.id}", "pilot", "machine",
                              durations.get(tid, pilot_hours(plan, v)), gate, v.gpus,
                              (PHASES["pilot"], CATEGORY_RANK[v.category], v.priority, i),
                              v.category))
        tasks.append(_decision_task(plan.pilot, tuple(pilots)))
        gate = ("decision",)
    for i, v in enumerate(plan.variants):
        tasks.append(Task(v.id, v.id, "run", "machine", durations.get(v.id, v.hours),
                          tuple(dict.fromkeys(gate + v.after)), v.gpus,
                          (PHASES["run"], CATEGORY_RANK[v.category], v.priority, i),
                          v.category))
    runs = tuple(v.id for v in plan.variants)
    for i, s in enumerate(post):
        tasks.append(Task(s.id, s.id, "post", s.who, s.hours,
                          tuple(dict.fromkeys(runs + s.after)),
                          s.gpus if s.who == "machine" else 0, (PHASES["post"], 0, 0, i)))
    ends = runs + tuple(s.id for s in post)
    tasks.append(Task("wrapup", "wrap-up", "wrapup", "machine", plan.campaign.wrapup_hours,
                      ends, 0, (PHASES["wrapup"],)))
    delivery = plan.store.delivery_hours if plan.store is not None else None
    tasks.append(Task("retrieval", "delivery to the store" if plan.store is not None
                      else "retrieval", "retrieval", "machine",
                      durations.get("retrieval", delivery if delivery is not None
                                    else plan.campaign.retrieval_hours),
                      ("wrapup",), 0, (PHASES["retrieval"],)))
    return tasks


def _decision_task(pilot, pilots: tuple[str, ...]) -> Task:
    """The decision point, a human interval; a deadline bounds it (and is shown)."""
    hours, label = pilot.decision_hours, "decision point"
    if pilot.decide == "ask" and pilot.decide_after_minutes is not None:
        hours = min(hours, pilot.decide_after_minutes / 60.0)
        label = f"decision (<= {human_duration(pilot.decide_after_minutes * 60.0)})"
    return Task("decision", label, "decision", "human", hours, pilots, 0,
                (PHASES["decision"],))


def lane_ids(plan: Plan) -> dict[str, list[str]]:
    return {lot.id: [f"{lot.id}:{k}" for k in range(lot.gpus)] for lot in plan.lots}


def place(free_at: dict[str, float], lots: dict[str, list[str]], gpus: int,
          ready: float) -> tuple[float, str | None, tuple[str, ...]]:
    """Earliest start >= ready with `gpus` lanes of one lot; (start, lot, lanes).

    Lanes of the chosen lot are the ones free earliest (ties by lane order),
    so placement is deterministic. Raises ValueError if no lot is big enough.
    """
    if gpus == 0:
        return ready, None, ()
    best = None
    for lot_id, lanes in lots.items():
        if len(lanes) < gpus:
            continue
        chosen = sorted(lanes, key=lambda lane: (free_at[lane], lanes.index(lane)))[:gpus]
        start = max([ready] + [free_at[lane] for lane in chosen])
        if best is None or start < best[0] - 1e-12:
            best = (start, lot_id, tuple(sorted(chosen, key=lanes.index)))
    if best is None:
        raise ValueError(f"no lot has {gpus} GPUs")
    return best


def build_calendar(plan: Plan, durations: dict[str, float] | None = None,
                   done: dict[str, tuple[float, float]] | None = None,
                   earliest: float = 0.0) -> Calendar:
    """Schedule the plan.

    `done` pins tasks already observed (id -> start, end in hours from the
    window start); every other task starts no earlier than `earliest` (now).
    """
    tasks = build_tasks(plan, durations)
    by_id = {t.id: t for t in tasks}
    order = _priority_topological(tasks)
    lots = lane_ids(plan)
    free_at = {lane: 0.0 for lanes in lots.values() for lane in lanes}
    holder: dict[str, str] = {}
    times: dict[str, tuple[float, float, tuple[str, ...], str | None]] = {}
    binding: dict[str, set[str]] = {}
    for tid in order:
        t = by_id[tid]
        ready = max([times[d][1] for d in t.deps] + [earliest if not (done and tid in done)
                                                     else 0.0])
        if done and tid in done:
            start, end = done[tid]
            lot, lanes = place(free_at, lots, t.gpus, start)[1:] if t.gpus else (None, ())
        else:
            start, lot, lanes = place(free_at, lots, t.gpus, ready)
            end = start + t.hours
        preds = set(t.deps) | {holder[lane] for lane in lanes if lane in holder}
        binding[tid] = preds
        for lane in lanes:
            free_at[lane] = end
            holder[lane] = tid
        times[tid] = (start, end, lanes, lot)
    e2e = max((v[1] for v in times.values()), default=0.0)
    window = plan.window_hours
    latest = _latest_starts(order, by_id, binding, times, window)
    critical = _critical_path(order, binding, times)
    on_path = set(critical)  # `in` once per task: a set, or check is quadratic
    entries = tuple(Entry(by_id[tid], times[tid][0], times[tid][1], times[tid][2],
                          times[tid][3], latest[tid], tid in on_path) for tid in order)
    machine = sum(t.hours for t in tasks if t.who == "machine")
    chain = longest_chain_hours({t.id: t.hours for t in tasks},
                                {t.id: list(t.deps) for t in tasks})
    return Calendar(entries=entries, window_hours=window, end_to_end_hours=round(e2e, 6),
                    machine_hours=round(machine, 6),
                    gpu_hours=round(sum(t.hours * t.gpus for t in tasks), 6),
                    human_hours=round(sum(t.hours for t in tasks if t.who == "human"), 6),
                    longest_chain_hours=round(chain, 6), critical_path=tuple(critical),
                    lanes=tuple(l for lanes in lots.values() for l in lanes),
                    lot_hours=tuple((lot.id, lot.hours) for lot in plan.lots))


def _priority_topological(tasks: list[Task]) -> list[str]:
    import heapq

    deps = {t.id: set(t.deps) for t in tasks}
    users: dict[str, list[str]] = {t.id: [] for t in tasks}
    for t in tasks:
        for d in t.deps:
            users[d].append(t.id)
    key = {t.id: t.sort_key for t in tasks}
    heap = [(key[t.id], t.id) for t in tasks if not deps[t.id]]
    heapq.heapify(heap)
    order = []
    while heap:
        _, tid = heapq.heappop(heap)
        order.append(tid)
        for u in users[tid]:
            deps[u].discard(tid)
            if not deps[u]:
                heapq.heappush(heap, (key[u], u))
    return order


def _latest_starts(order, by_id, binding, times, window) -> dict[str, float]:
    successors: dict[str, list[str]] = {tid: [] for tid in order}
    for tid, preds in binding.items():
        for p in preds:
            successors[p].append(tid)
    latest: dict[str, float] = {}
    for tid in reversed(order):
        finish = min((latest[s] for s in successors[tid]), default=window)
        latest[tid] = round(finish - (times[tid][1] - times[tid][0]), 6)
    return latest


def _critical_path(order, binding, times) -> list[str]:
    if not order:
        return []
    position = {tid: i for i, tid in enumerate(order)}  # not order.index: linear
    current = max(order, key=lambda tid: (times[tid][1], -position[tid]))
    path = [current]
    while binding[current]:
        start = times[current][0]
        tight = [p for p in binding[current] if abs(times[p][1] - start) < 1e-9]
        if not tight:
            break
        current = max(tight, key=lambda p: (times[p][1] - times[p][0], p))
        path.append(current)
    return list(reversed(path))
