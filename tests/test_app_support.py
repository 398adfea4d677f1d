"""Helpers for the control-room tests (no tests here): campaigns, clocks, waits.

Behaviour tests drive a real Engine on a tiny real campaign (printer-style
scripts, tests/enginekit.py) with a fake clock and a fake NVML; snapshot tests
use a FrozenEngine whose snapshot is replayed from a ledger the test writes,
so no process timing reaches a screenshot.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from enginekit import printer_cmd, script_cmd, write_plan  # noqa: F401 (re-exported)
from fake_pynvml import FakeGpu, FakeNvml
from tui.engine.ledger.events import WarningEvent, parse
from tui.campaign import load_plan
from tui.engine import Engine, EngineSnapshot, read_ledger, replay
from tui.session import CampaignSession
from tui.engine.watching.live import LiveView
from tui.probes import HostProbe, NvmlProbe, Probes, ProbeSample
from tui.probes.host import HostSample

SCRIPTS = Path(__file__).parent / "scripts"
T0 = 1_764_500_000.0  # 2025-11-30 10:53:20 UTC

PILOT = """
[pilot]
steps = 3
decide = "ask"
"""


class FakeClock:
    """A clock the test moves by hand (starts at T0)."""

    def __init__(self, t: float = T0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds




def variants(spec, command=None) -> str:
    """spec: [(id, category, [printer args])]."""
    out = ""
    for vid, cat, args in spec:
        cmd = command(args) if command else printer_cmd(*args)
        out += f"""
[[variant]]
id = "{vid}"
category = "{cat}"
command = {cmd}
minutes = 1
steps = 400
"""
    return out


def campaign(tmp_path: Path, spec, pilot: str = "", extra: str = "", gpus: int = 1,
             command=None) -> Path:
    return write_plan(tmp_path, variants(spec, command), extra=extra, gpus=gpus, pilot=pilot)


def fake_probes(plan, gpus=None, **kw) -> Probes:
    nvml = FakeNvml(gpus if gpus is not None else [FakeGpu()], **kw)
    return Probes(NvmlProbe(nvml=nvml), HostProbe({"state": plan.state_dir}))


def open_session(path: Path, clock, probes=None) -> CampaignSession:
    plan = load_plan(path)
    engine = Engine(plan, clock=clock, poll_interval=0.05)
    return CampaignSession(plan, engine, probes, clock, poll_interval=0.05,
                           sample_interval=0.2).open()


def ledger(path_or_plan) -> list[dict]:
    root = path_or_plan.parent if isinstance(path_or_plan, Path) else path_or_plan.root
    return read_ledger(root / ".itera" / "ledger.jsonl")


def events_of(path: Path, kind: str) -> list[dict]:
    return [e for e in ledger(path) if e["event"] == kind]


async def wait_for(pilot, cond, timeout: float = 25.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.05)


async def shown(pilot, app, *parts: str, timeout: float = 25.0) -> list[str]:
    """The screen's rows (`screen_lines`) once one of them holds every one of `parts`:
    the barrier before reading a screen whose content arrives from a thread (a snapshot,
    a tail, a worker), instead of a fixed pause."""
    lines: list[str] = []

    def drawn():
        nonlocal lines
        lines = screen_lines(app)
        return any(all(p in line for p in parts) for line in lines)

    await wait_for(pilot, drawn, timeout, what=f"a row showing {parts}")
    return lines


async def actions_done(app) -> None:
    """Wait until every action a key started (its worker thread) is over: the barrier
    before a check that a key did nothing, instead of a fixed pause."""
    await app.workers.wait_for_complete([w for w in app.workers if w.group == "action"])


def kill_runs(engine_or_state) -> None:
    """Clean up: kill every run process group a test left behind."""
    state = engine_or_state.state if hasattr(engine_or_state, "state") else engine_or_state
    for run in state.runs:
        if run.pid:
            try:
                os.killpg(run.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


# -- frozen engine for snapshots ---------------------------------------------------------

class FixedProbes:
    """Probes that always return the same sample (fake NVML, fixed host figures)."""

    def __init__(self, gpus, driver_error=None):
        self.gpu = NvmlProbe(nvml=FakeNvml(gpus, init_error=driver_error))
        self.host = HostSample(T0, cpu_pct=12.0, load1=0.52, ram_used_bytes=10 * 2**30,
                               ram_total_bytes=64 * 2**30,
                               disk_free_bytes={"state": 120 * 2**30})

    def sample(self, now=None):
        from dataclasses import replace

        return ProbeSample(self.gpu.sample(now), replace(self.host, t=now or T0))

    def close(self):
        pass


class FrozenEngine:
    """An engine stand-in that shows a fixed state: replayed ledger + given live views.

    The real CampaignSession drives it, so snapshot tests cover the session's
    wiring (probes, GPU holders, its projection over a pinned estimator) with no
    process timing."""

    def __init__(self, plan, events: list[dict], live: dict, phase: str, clock):
        from types import SimpleNamespace

        self.plan = plan
        self.clock = clock
        self.listeners = []
        self.actions: list[tuple] = []
        path = plan.state_dir / "ledger.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(e) + "\n" for e in events))
        typed = [parse(e) for e in events]  # the room reads events as the engine hands them
        self.journal = SimpleNamespace(path=path, recent=lambda limit: typed[-limit:])
        self.state = replay(events)
        self.live = live
        self.phase = phase
        self.finished = False

    def open(self):
        return self

    def close(self):
        pass

    def tick(self):
        pass

    def subscribe(self, listener):
        self.listeners.append(listener)

    def pending_verifications(self):
        return 0

    def snapshot(self):
        return EngineSnapshot(t=self.clock(), state=self.state, phase=self.phase,
                              live=dict(self.live), checkpoint_interval_min=30.0,
                              finished=self.finished)

    def observe_probe(self, sample):
        """As the engine does: the watchdog's warnings become ledger events."""
        from tui.engine.watching.watchdog import Watchdog

        if not hasattr(self, "_watchdog"):
            self._watchdog = Watchdog()
            self._seq = 10_000
        messages = self._watchdog.check(self.clock(), sample, self.state.running)
        for message in messages:
            self._seq += 1
            for listener in self.listeners:
                listener(WarningEvent(seq=self._seq, t=self.clock(), message=message))
        return messages

    def __getattr__(self, name):  # actions are recorded, never performed
        if name in ("decide", "drop_variant", "stop_run", "request_checkpoint", "set_paused"):
            return lambda *a, **k: self.actions.append((name, a, k))
        raise AttributeError(name)


def run(coro):
    """Run a pilot scenario (the suite has no async pytest plugin)."""
    import asyncio

    return asyncio.run(coro)


# -- a fixed campaign for snapshots and panel tests -----------------------------------------

SNAP_TOML = """
[campaign]
name = "nli-adapters"
question = "Does a rank-16 adapter beat full fine-tuning on MNLI within 3 days?"
metric = "val_acc"
direction = "max"
min_gain = 0.01
threshold = 0.80
control = "control"

[[lot]]
gpu = "b200"
hours = 72
price_usd = 390.0
gpus = 2

[[step]]
id = "prepare"
who = "human"
hours = 2

[[step]]
id = "data_check"
who = "machine"
hours = 0.5
after = ["prepare"]
command = ["python", "check.py"]

[[variant]]
id = "control"
category = "mandatory"
command = ["python", "train.py"]
hours = 20
steps = 20000

[[variant]]
id = "lora16"
category = "useful"
command = ["python", "train.py", "--lora", "16"]
hours = 16
steps = 20000

[[variant]]
id = "lora64"
category = "exploratory"
command = ["python", "train.py", "--lora", "64"]
hours = 14
steps = 20000

[pilot]
steps = 500
decide = "ask"
decision_hours = 1

[[stop]]
rule = "non_finite"
metrics = ["loss"]

[[stop]]
rule = "threshold"
metric = "val_acc"
below = 0.5
from_step = 300
"""

WS = T0 - 26 * 3600  # the window started 26 h before "now"
PIDS = {"control": 4142001, "lora16": 4142002}  # under pid_max (2**22)


def _launch(seq, t, rid, target, kind, category, lane, max_steps=None):
    return {"seq": seq, "t": t, "event": "run_launched", "run": rid, "target": target,
            "kind": kind, "category": category, "attempt": 1, "config_hash": rid.split("-")[1],
            "config": {}, "pid": PIDS[target] if kind == "run" else 4141000 + seq,
            "pid_start": 1.0, "lanes": [f"lot1:{lane}"] if lane is not None else [],
            "devices": str(lane) if lane is not None else "", "lot": "lot1",
            "max_steps": max_steps}


def snapshot_events(decided: bool) -> list[dict]:
    h = 3600.0
    ev = [
        {"seq": 1, "t": WS, "event": "campaign_started", "plan_sha256": "x"},
        {"seq": 2, "t": WS, "event": "window_started", "start": WS, "end": WS + 72 * h,
         "hours": 72},
        _launch(3, WS + 2 * h, "data_check-0a1b2c3d-1", "data_check", "step", "mandatory", 0),
        {"seq": 4, "t": WS + 2.4 * h, "event": "run_exited", "run": "data_check-0a1b2c3d-1",
         "exit_code": 0},
        _launch(5, WS + 2.5 * h, "control-11aa22bb-1", "control", "pilot", "mandatory", 0, 500),
        _launch(6, WS + 2.5 * h, "lora16-33cc44dd-1", "lora16", "pilot", "useful", 1, 500),
        {"seq": 7, "t": WS + 4.1 * h, "event": "run_exited", "run": "lora16-33cc44dd-1",
         "exit_code": 0},
        _launch(8, WS + 4.1 * h, "lora64-55ee66ff-1", "lora64", "pilot", "exploratory", 1, 500),
        {"seq": 9, "t": WS + 4.4 * h, "event": "run_exited", "run": "control-11aa22bb-1",
         "exit_code": 0},
        {"seq": 10, "t": WS + 4.9 * h, "event": "stop_rule_fired", "run": "lora64-55ee66ff-1",
         "rule": "threshold", "reason": "val_acc=0.41 below 0.5 at step 320 (bound from step 300)",
         "value": 0.41, "step": 320},
        {"seq": 11, "t": WS + 4.9 * h, "event": "run_stop_requested", "run": "lora64-55ee66ff-1",
         "by": "rule", "reason": "threshold", "signal": "SIGTERM", "deadline": WS + 4.9 * h + 30},
        {"seq": 12, "t": WS + 4.91 * h, "event": "run_exited", "run": "lora64-55ee66ff-1",
         "exit_code": -15},
        {"seq": 13, "t": WS + 5.0 * h, "event": "decision_pending", "pilot": {
            "control": {"run": "control-11aa22bb-1", "state": "completed", "stop": None,
                        "metric": 0.842, "last_loss": 0.512, "step": 500},
            "lora16": {"run": "lora16-33cc44dd-1", "state": "completed", "stop": None,
                       "metric": 0.857, "last_loss": 0.488, "step": 500},
            "lora64": {"run": "lora64-55ee66ff-1", "state": "stopped",
                       "stop": {"rule": "threshold", "value": 0.41, "step": 320},
                       "metric": 0.41, "last_loss": 1.93, "step": 320}}},
    ]
    if not decided:
        return ev
    return ev + [
        {"seq": 14, "t": WS + 6.0 * h, "event": "decision_taken", "decision": "continue",
         "drop": [], "by": "user", "note": None},
        _launch(15, WS + 6.0 * h, "control-77aa88bb-1", "control", "run", "mandatory", 0, 20000),
        _launch(16, WS + 6.0 * h, "lora16-99cc00dd-1", "lora16", "run", "useful", 1, 20000),
        {"seq": 17, "t": T0 - 1500, "event": "checkpoint_requested", "run": "control-77aa88bb-1",
         "seq_no": 1, "by": "schedule"},
        {"seq": 18, "t": T0 - 1490, "event": "checkpoint_acknowledged",
         "run": "control-77aa88bb-1", "path": "checkpoints/step-16800.pt", "sha256": "ab",
         "bytes": 1_400_000_000, "write_s": 2.1, "block_s": 0.3, "step": 16800, "mode": "async"},
        {"seq": 19, "t": T0 - 1470, "event": "checkpoint_verified", "run": "control-77aa88bb-1",
         "path": "checkpoints/step-16800.pt", "ok": True, "problem": None, "step": 16800},
        {"seq": 20, "t": T0 - 600, "event": "warning",
         "message": "lora16 logged no record for 4 min"},
    ]


def ending_events(verdict: str) -> list[dict]:
    """After `snapshot_events(True)`: the runs end, lora64 is dropped, the bundle verifies.
    verdict "yes": lora16's full run completes and beats the control; "inconclusive":
    a person stops it (a challenger stopped by hand leaves the question open)."""
    ev = [{"seq": 21, "t": T0 - 400, "event": "variant_dropped", "variant": "lora64",
           "reason": "dropped by user"},
          {"seq": 22, "t": T0 - 300, "event": "run_exited", "run": "control-77aa88bb-1",
           "exit_code": 0}]
    if verdict == "yes":
        ev.append({"seq": 23, "t": T0 - 200, "event": "run_exited", "run": "lora16-99cc00dd-1",
                   "exit_code": 0})
    else:
        ev += [{"seq": 23, "t": T0 - 210, "event": "run_stop_requested",
                "run": "lora16-99cc00dd-1", "by": "user",
                "reason": "stopped by hand from the control room", "signal": "SIGTERM",
                "deadline": T0 - 180},
               {"seq": 24, "t": T0 - 200, "event": "run_exited", "run": "lora16-99cc00dd-1",
                "exit_code": -15}]
    return ev + [{"seq": 30, "t": T0 - 120, "event": "wrapup_started"},
                 {"seq": 31, "t": T0 - 30, "event": "wrapup_done", "bundle": "outputs/bundle",
                  "verified": True, "failures": 0, "bytes": 2_400_000}]


# the decision metric's last (final) value and its best, per run: the room shows the final
FINALS = {"control-11aa22bb-1": (0.839, 0.842), "lora16-33cc44dd-1": (0.853, 0.857),
          "lora64-55ee66ff-1": (0.41, 0.52), "control-77aa88bb-1": (0.861, 0.866),
          "lora16-99cc00dd-1": (0.874, 0.879)}


def snapshot_live(decided: bool) -> dict:
    def view(rid, steps, loss0, last_t):
        final, best = FINALS[rid]
        stride = max(1, steps // 400)
        loss = tuple((s, loss0 * (0.25 + 0.75 / (1 + s / 600)) + 0.03 * ((s * 7919) % 13) / 13)
                     for s in range(stride, steps + 1, stride))
        acc = tuple((s, best * (0.7 + 0.3 * min(1.0, s / max(1, steps))))
                    for s in range(stride * 10, steps, stride * 10)) + ((steps, final),)
        return LiveView(rid, steps, 0, steps, loss[-1][1],
                        {"loss": loss[-1][1], "val_acc": final}, best,
                        last_t, last_t - 3600, loss, acc, final_metric=final)

    live = {"control-11aa22bb-1": view("control-11aa22bb-1", 500, 2.1, WS + 4.4 * 3600),
            "lora16-33cc44dd-1": view("lora16-33cc44dd-1", 500, 2.2, WS + 4.1 * 3600),
            "lora64-55ee66ff-1": view("lora64-55ee66ff-1", 320, 2.6, WS + 4.9 * 3600)}
    if decided:
        live["control-77aa88bb-1"] = view("control-77aa88bb-1", 17240, 2.1, T0 - 2)
        live["lora16-99cc00dd-1"] = view("lora16-99cc00dd-1", 15120, 2.2, T0 - 3)
    return live


LONG_IDS = {"control": "full-finetune-baseline-lr3e-5",
            "lora16": "lora-rank16-alpha32-dropout0.1",
            "lora64": "lora-rank64-alpha128-dropout0"}


def _renamed(text: str, names: dict) -> str:
    for old, new in names.items():
        text = text.replace(f'"{old}-', f'"{new}-').replace(f'"{old}"', f'"{new}"')
    return text


def snapshot_room(tmp_path: Path, decided: bool = True, size=None, gpus=None,
                  ending: str | None = None, names: dict | None = None, **kw):
    """A ControlRoom over a FrozenEngine showing the fixed campaign at T0.

    `ending` ("yes" | "inconclusive"): the runs are over and the bundle verified
    (phase done). `names`: variant ids renamed (LONG_IDS: ids a table must not cut)."""
    from dataclasses import replace

    from tui.app.app import ControlRoom

    names = names or {}
    path = tmp_path / "campaign.toml"
    path.write_text(_renamed(SNAP_TOML, names))
    plan = load_plan(path, check_files=False)
    clock = FakeClock(T0)
    events = snapshot_events(decided) + (ending_events(ending) if ending else [])
    events = json.loads(_renamed(json.dumps(events), names))
    live = {}
    for rid, view in snapshot_live(decided).items():
        new = json.loads(_renamed(json.dumps(rid), names))
        live[new] = replace(view, run_id=new)
    for rid, (final, _) in FINALS.items():  # what the conclusion reads: the runs' own files
        run_dir = plan.state_dir / "runs" / json.loads(_renamed(json.dumps(rid), names))
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "metrics.jsonl").write_text(json.dumps({"t": T0, "step": 1,
                                                           "val_acc": final}) + "\n")
        (run_dir / "stdout.log").write_text("".join(f"step {s} loss {1 / s:.4f}\n"
                                                    for s in range(1, 41)))
        (run_dir / "stderr.log").write_text("warning: tokenizers fork\n")
    phase = "done" if ending else ("runs" if decided else "decision")
    engine = FrozenEngine(plan, events, live, phase, clock)
    engine.finished = bool(ending)
    pids = {names.get(k, k): v for k, v in PIDS.items()}
    if gpus is None:
        gpus = [FakeGpu(name="NVIDIA B200", util=97, mem_used=141 * 2**30 // 2,
                        mem_total=180 * 2**30, temp=71, power_mw=812_000,
                        compute_pids=[pids[names.get("control", "control")]]
                        if decided else []),
                FakeGpu(name="NVIDIA B200", uuid="GPU-1", util=88, mem_used=96 * 2**30,
                        mem_total=180 * 2**30, temp=66, power_mw=745_000,
                        compute_pids=[pids[names.get("lora16", "lora16")]] if decided else [])]
    probes = FixedProbes(gpus, kw.pop("driver_error", None))
    session = CampaignSession(plan, engine, probes, clock, sample_interval=0.05).open()
    app = ControlRoom(plan, session, clock, tick_interval=0.05, refresh_interval=0.05, **kw)
    return app, engine, clock


async def settle(pilot, app, probe: bool = True):
    """Wait until the first snapshot, probe sample and ledger history are drawn."""
    await wait_for(pilot, lambda: app.room is not None and (app.room.probe is not None
                                                            or not probe)
                   and app.events_panel.texts, what="the first refresh")
    await pilot.pause()  # the messages that refresh posted: handled (its panels drawn)


def screen_lines(app) -> list[str]:
    """What a person sees, cell by cell: the screenshot's text, one string per row.

    Panel texts (`plain()`) hold more than their region shows; this is the
    screen after cropping, so 'whole on screen' is asserted on what is drawn."""
    import html
    import re

    svg = app.export_screenshot()
    rows: dict[int, list[tuple[float, str]]] = {}
    pattern = (r'<text class="[^"]*" x="([\d.]+)" y="[\d.]+" textLength="[\d.]+" '
               r'clip-path="url\(#[^)]*-line-(\d+)\)">(.*?)</text>')
    for x, line, text in re.findall(pattern, svg):
        rows.setdefault(int(line), []).append((float(x), html.unescape(text)))
    out = []
    for line in range(max(rows, default=-1) + 1):
        text = ""
        for x, part in sorted(rows.get(line, [])):
            col = round(x / 12.2)  # the export's cell width
            text = text.ljust(col)[:col] + part
        out.append(text.replace("\xa0", " "))
    return out


def line_with(lines: list[str], *parts: str) -> str:
    """The screen row holding every one of `parts`, whole (an AssertionError if none)."""
    for line in lines:
        if all(p in line for p in parts):
            return line
    raise AssertionError(f"no row shows {parts} whole:\n" + "\n".join(lines))
