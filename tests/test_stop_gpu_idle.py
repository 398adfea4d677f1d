"""`[[stop]] rule = "gpu_idle"` (issue 43): a run that holds its rented GPUs at ~0 %
(a deadlocked data loader, a hung NCCL collective, a script waiting on input) burns the
window while every metric rule waits. The rule reads NVML's per-device utilisation of
the run's own GPUs (through the NVML stand-in here), on the engine's monotonic clock,
and stops a run idle for the whole window; a busy one is not stopped. Its window has a
floor (refused below it at `check`, never silently ignored: dstack#2384), `check` says
what it watches, and on a CPU lot that it has no effect.
"""

import json
from types import SimpleNamespace

import pytest

from clikit import check
from enginekit import control_only, printer_cmd, write_plan
from fake_pynvml import FakeGpu, FakeNvml
from fakeprocs import FakeClock, FakeProcesses, tick_until
from test_probes_gpu import HAS_DRIVER, NEEDS_A_GPU
from tui.campaign import load_plan
from tui.campaign.plan import StopRule
from tui.engine.rules import RuleSet
from tui.engine.watching.watchdog import run_utils
from tui.probes import ProbeSample
from tui.probes.gpu import NvmlProbe
from tui.probes.host import HostSample

IDLE = '[[stop]]\nrule = "gpu_idle"\nbelow_percent = 5\nminutes = 3\n'


def rules(below=5.0, minutes=3.0) -> RuleSet:
    return RuleSet((StopRule("gpu_idle", below_percent=below, minutes=minutes),), "v", "run")


def sample(nvml: FakeNvml, t: float = 0.0) -> ProbeSample:
    """One sample as the session takes it: NVML (the stand-in) through the real probe."""
    return ProbeSample(NvmlProbe(nvml).sample(now=t), HostSample(t))


def test_its_gpus_under_the_floor_for_the_whole_window_stop_it_and_one_busy_sample_restarts():
    rs = rules()
    assert rs.watches_gpu and not rules().on_gpu(0.0, (0.0,))
    assert rs.on_gpu(1000.0, (0.0, 2.0)) is None      # the window opens
    assert rs.on_gpu(1120.0, (4.0, 0.0)) is None      # 2 min: not yet
    assert rs.on_gpu(1150.0, (0.0, 30.0)) is None     # one GPU busy: the window restarts
    assert rs.on_gpu(1160.0, (0.0, 0.0)) is None
    assert rs.on_gpu(1330.0, (1.0, 0.0)) is None      # 2.8 min since the restart
    stop = rs.on_gpu(1340.0, (3.0, 0.0))              # 3 min: stopped
    assert (stop.rule, stop.value, stop.step, stop.t) == ("gpu_idle", 3.0, None, 1340.0)
    assert stop.reason == ("all 2 of its GPUs under 5 % for 3.0 min (window 3 min, busiest "
                           "sample 3 %) while the process lives")


@pytest.mark.parametrize("unjudged", [(), (None,), (0.0, None)])
def test_a_sample_it_cannot_judge_never_counts_as_idle(unjudged):
    """No GPU of the run in the sample (a CPU box, no driver), a utilisation NVML did
    not give or a lost GPU (None): the window starts again, the run is not stopped."""
    rs = rules()
    rs.on_gpu(0.0, (0.0,))
    assert rs.on_gpu(170.0, unjudged) is None
    assert rs.on_gpu(200.0, (0.0,)) is None  # a new window from 200
    assert rs.on_gpu(379.0, (0.0,)) is None
    assert rs.on_gpu(380.0, (0.0,)).rule == "gpu_idle"


def test_its_gpus_are_its_lanes_and_where_nvml_lists_its_processes():
    nvml = FakeNvml([FakeGpu(util=0), FakeGpu(util=70, compute_pids=[4242]),
                     FakeGpu(util=0, compute_pids=[999]), FakeGpu(util=0, lost=True)])
    snap = sample(nvml)
    run = SimpleNamespace(id="r1", devices="0")
    assert run_utils(run, snap, set()) == (0.0,)
    assert run_utils(run, snap, {4242}) == (0.0, 70.0)  # its process on GPU 1: busy
    assert run_utils(SimpleNamespace(id="r2", devices="3"), snap, set()) == (None,)  # lost
    assert run_utils(SimpleNamespace(id="r3", devices=""), snap, set()) == ()
    missing = ProbeSample(NvmlProbe(FakeNvml(init_error=9)).sample(now=0.0), HostSample(0.0))
    assert run_utils(run, missing, set()) == ()  # no driver: nothing to judge


def _gpu_plan(tmp_path, extra=IDLE, gpu="H100"):
    variants = control_only(printer_cmd("--steps", "100000", "--sleep", "0.05")) + f"""
[[variant]]
id = "wide"
category = "useful"
command = {printer_cmd("--steps", "100000", "--sleep", "0.05")}
minutes = 1
"""
    path = write_plan(tmp_path, variants, extra, gpus=2)
    path.write_text(path.read_text().replace('gpu = "cpu"', f'gpu = "{gpu}"'))
    return path


def test_check_explains_the_rule_and_says_it_has_no_effect_on_a_cpu_lot(tmp_path):
    gpu = tmp_path / "gpu"
    gpu.mkdir()
    out = check(str(_gpu_plan(gpu)))
    assert out.returncode == 0, out.stderr
    assert ("stop rule: gpu_idle (every run): a run whose own GPUs (its lanes' devices, and "
            "any GPU NVML lists one of its processes on) all stay under 5 % utilisation in "
            "every NVML sample for 3 min is asked for a checkpoint and stopped, named "
            "\"GPU idle\"") in out.stdout
    assert "no effect" not in out.stdout
    (rule,) = load_plan(gpu / "campaign.toml").stops
    assert (rule.rule, rule.below_percent, rule.minutes) == ("gpu_idle", 5.0, 3.0)
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    out = check(str(_gpu_plan(cpu, '[[stop]]\nrule = "gpu_idle"\nminutes = 10\n', gpu="CPU")))
    assert out.returncode == 0, out.stderr
    assert ("stop rule: gpu_idle (every run): no effect here: every lot is gpu = \"CPU\", "
            "there is no GPU utilisation to watch") in out.stdout
    data = json.loads(check("--json", str(cpu / "campaign.toml")).stdout)
    assert len(data["gpu_idle_limits"]) == 1
    assert load_plan(cpu / "campaign.toml").stops[0].below_percent == 5.0  # the default


@pytest.mark.parametrize("stop, said", [
    ('[[stop]]\nrule = "gpu_idle"\nminutes = 1\n',
     "stop[0].minutes: must be at least 3 (got 1)"),
    ('[[stop]]\nrule = "gpu_idle"\nminutes = 2.5\n', "stop[0].minutes: must be at least 3"),
    ('[[stop]]\nrule = "gpu_idle"\n', "stop[0].minutes"),
    ('[[stop]]\nrule = "gpu_idle"\nminutes = 5\nbelow_percent = 150\n',
     "stop[0].below_percent: is a utilisation in percent, at most 100"),
    ('[[stop]]\nrule = "gpu_idl"\nminutes = 5\n', 'did you mean "gpu_idle"'),
    (IDLE + 'below_pct = 3\n', 'stop[0].below_pct: unknown key (did you mean '
                               '"below_percent"?)'),
    (IDLE + 'minute = 3\n', 'stop[0].minute: unknown key (did you mean "minutes"?)'),
    (IDLE + 'factor = 3\n', 'stop[0].factor: unknown key'),
])
def test_a_short_window_or_a_misspelt_key_is_refused_with_exit_2(tmp_path, stop, said):
    out = check(str(_gpu_plan(tmp_path, stop)))
    assert out.returncode == 2 and said in out.stderr, out.stderr


def test_a_challenger_stopped_by_gpu_idle_leaves_the_verdict_open_and_views_say_gpu_idle(
        tmp_path):
    """A run stuck on its GPUs says nothing of how its variant trains: not a firm "no"."""
    from test_engine_verdict import NO_WIN, completed, full, plan_of, replay, stopped_by
    from tui.app.rows import stop_short
    from tui.engine.conclusion.verdict import verdict_of

    state = replay(full(1, "control", completed) + full(10, "lora16", completed)
                   + full(20, "lora64", stopped_by("gpu_idle")))
    verdict = verdict_of(plan_of(tmp_path), state, NO_WIN)
    assert verdict.kind == "inconclusive" and "lora64 stopped" in verdict.reason
    assert stop_short(state.run("lora64-00000000-1").stop) == "GPU idle nan"
    from tui.engine.ledger.events import StopRuleFired

    line = StopRuleFired(run="r1", rule="gpu_idle", reason="its GPU under 5 %").describe()
    assert line == "STOP r1: GPU idle — its GPU under 5 %"  # the room's events log


def _drive_idle(path, nvml: FakeNvml):
    """Two runs launched on two lanes (the engine's fake processes: tests/fakeprocs.py),
    then NVML samples every 30 s for 3 min of the engine's fake clocks."""
    from tui.engine import Engine

    clock = FakeClock()
    procs = FakeProcesses(clock)
    engine = Engine(load_plan(path), poll_interval=0.05, clock=clock.wall,
                    monotonic=clock.mono, processes=procs).open()
    engine.tick()
    for _ in range(7):
        engine.observe_probe(sample(nvml, clock.mono()))
        clock.advance(30.0)
    engine.observe_probe(sample(nvml, clock.mono()))
    return engine, procs, clock


def _stop_all(engine, procs, clock):
    for run in engine.state.running:
        engine.stop_run(run.id, "test over")
    tick_until(engine, procs, clock, lambda: not engine.state.running, "the runs stopped",
               limit_s=60)


def test_on_a_cpu_lot_idle_gpus_stop_no_run(tmp_path):
    """A CPU lot's lanes still carry a device index: NVML's GPU 0 at 0 % on the box is
    not the run's, and the rule has no effect there (as `check` says)."""
    from tui.engine import read_ledger

    engine, procs, clock = _drive_idle(_gpu_plan(tmp_path, gpu="CPU"),
                                       FakeNvml([FakeGpu(util=0), FakeGpu(util=0)]))
    try:
        engine.tick()
        assert len(engine.state.running) == 2
        assert all(r.stop is None for r in engine.state.runs)
        _stop_all(engine, procs, clock)
    finally:
        engine.close()
    events = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
    assert not [e for e in events if e["event"] == "stop_rule_fired"]


def test_the_run_on_an_idle_gpu_is_stopped_by_gpu_idle_and_the_busy_one_is_not(tmp_path):
    """Two runs on two lanes of a GPU lot; NVML (the stand-in) says GPU 0 is at 0 % and
    GPU 1 at 90 % for 3 min of the engine's (fake) monotonic clock."""
    from tui.bundle.actual import compare
    from tui.engine import read_ledger
    from tui.service.status import status_dict

    path = _gpu_plan(tmp_path)
    engine, procs, clock = _drive_idle(path, FakeNvml([FakeGpu(util=0), FakeGpu(util=90)]))
    try:
        running = {r.devices: r.id for r in engine.state.running}
        assert set(running) == {"0", "1"}, running
        idle, busy = running["0"], running["1"]
        tick_until(engine, procs, clock, lambda: engine.state.run(idle).state != "running",
                   "the idle run stopped", limit_s=60)
        assert engine.state.run(busy).state == "running"  # busy: never stopped
        _stop_all(engine, procs, clock)
    finally:
        engine.close()
    stopped = engine.state.run(idle)
    assert stopped.state == "stopped" and stopped.stop.rule == "gpu_idle"
    assert stopped.stop.value == 0.0 and "its GPU under 5 % for 3.0 min" in stopped.stop.reason
    assert engine.state.run(busy).stop.rule != "gpu_idle"
    events = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
    fired = [(e["run"], e["rule"]) for e in events if e["event"] == "stop_rule_fired"]
    assert fired == [(idle, "gpu_idle")]
    asked = [(e["run"], e["by"]) for e in events if e["event"] == "checkpoint_requested"]
    assert (idle, "rule") in asked  # asked for a checkpoint before it is stopped
    (row,) = [r for r in status_dict(path)["runs"] if r["id"] == idle]
    assert row["stop"]["rule"] == "gpu_idle"
    report = compare(load_plan(path), engine.state, events)
    outcomes = {r.target: r.outcome for r in report.rows}
    target = engine.state.run(idle).target
    assert outcomes[target] == "stopped (GPU idle)"
    assert any(text.startswith(f"{idle} (run) stopped by GPU idle: its GPU under 5 %")
               for _, text in report.deviations)


@pytest.mark.skipif(not HAS_DRIVER, reason=NEEDS_A_GPU)
def test_on_a_gpu_box_the_real_nvml_gives_the_rule_a_figure_for_the_run_s_gpu():
    """The real path beside the stand-in: pynvml's sample of GPU 0 gives the rule a
    figure it judges (not None), so a window of such samples can stop a run."""
    with NvmlProbe() as probe:
        snaps = [ProbeSample(probe.sample(now=float(t)), HostSample(float(t)))
                 for t in range(3)]
    run = SimpleNamespace(id="r1", devices="0")
    figures = [run_utils(run, snap, set()) for snap in snaps]
    assert all(len(f) == 1 and f[0] is not None and 0.0 <= f[0] <= 100.0 for f in figures), \
        figures
    rs = rules(below=100.5, minutes=3)  # above any figure: every sample counts as idle
    assert rs.on_gpu(0.0, figures[0]) is None and rs.on_gpu(100.0, figures[1]) is None
    assert rs.on_gpu(180.0, figures[2]).rule == "gpu_idle"
