"""A stand-in for the box's processes, behind the engine's process port
(tui/engine/runs/port.py): rules, restarts and graces tested with no process started.

`FakeProcesses` starts nothing. A launch makes what the launcher would (the run's
`stdout.log` and `stderr.log`) and gives the run a pid of its own numbering. The run
plays its script on the test's clock: `tests/scripts/printer.py` is understood (the
same steps, from its own `steps()`, one every `--sleep` seconds; an argument it does not
know is argparse's usage on stderr and exit status 2), any other command
writes nothing until the test writes for it (`FakeRun.print`, `FakeRun.exit`). Each
signal is recorded with the monotonic time it came (`FakeRun.signals`). A run that
does not ignore SIGTERM ends at it, as the launcher records it (`exit.json`: exit code
-15, SIGTERM seen); SIGKILL ends the whole group, the launcher with it, so no
`exit.json` is left and the launcher's own status is -9, as on a real box. A run is
only ever the fake's own: nothing here can signal a process of the machine.

    clock = FakeClock()
    procs = FakeProcesses(clock)
    engine = Engine(plan, clock=clock.wall, monotonic=clock.mono, processes=procs)
    drive_fake(engine, procs, clock)   # play, tick, advance, until the campaign is done
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tui.engine.runs.processes import Launched, read_exit

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
import printer  # noqa: E402  (tests/scripts/printer.py: the script the fake plays)

FIRST_PID = 4_000_000  # beyond any real pid_max: a fake pid never names a real process


class FakeClock:
    """The engine's two clocks, moved together by the test."""

    def __init__(self, wall: float = 1_800_000_000.1234567):  # finer than a ledger stamp
        self._wall = wall
        self._mono = 1000.0

    def wall(self) -> float:
        return self._wall

    def mono(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._wall += seconds
        self._mono += seconds

    def step_wall(self, seconds: float) -> None:
        """The wall clock alone jumps (NTP, a VM restored): the monotonic one does not."""
        self._wall += seconds


class RealClock(FakeClock):
    """The box's own clocks, for fake runs under a loop the test does not step (the
    headless loop, called in the test's process): they play their scripts in real time."""

    def wall(self) -> float:
        return time.time()

    def mono(self) -> float:
        return time.monotonic()

    def advance(self, seconds: float) -> None:
        raise AssertionError("the real clocks are not the test's to move")


def tick_until(engine, procs: "FakeProcesses", clock: FakeClock, done, what: str,
               step_s: float = 0.05, limit_s: float = 600.0):
    """Play, tick and move the clocks until `done()` is truthy (its value is returned),
    within `limit_s` of the fake clock."""
    end = clock.mono() + limit_s
    while not (value := done()):
        assert clock.mono() < end, f"timed out after {limit_s:g} s of the fake clock: {what}"
        procs.play()
        engine.tick()
        clock.advance(step_s)
    return value


class FakePopen:
    """What the watcher asks of the launcher's Popen: whether and how it ended."""

    def __init__(self):
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


@dataclass
class FakeRun:
    pid: int
    pid_start: float
    argv: list[str]
    env: dict[str, str]
    run_dir: Path
    clock: FakeClock
    popen: FakePopen = field(default_factory=FakePopen)
    signals: list[tuple[str, float]] = field(default_factory=list)  # (name, monotonic)
    ignores_sigterm: bool = False
    _script: object = None  # printer's steps, when the command is printer.py
    _args: object = None
    _next_at: float = 0.0
    _stalled: bool = False
    _held_at: float | None = None  # the monotonic time `hold` paused the script at
    _refused: int | None = None  # printer's exit status when argparse refused its argv

    @property
    def run_id(self) -> str:
        return self.env["ITERA_RUN_ID"]

    @property
    def alive(self) -> bool:
        return self.popen.returncode is None

    def print(self, line: str) -> None:
        self._append(self.run_dir / "stdout.log", line + "\n")

    def record(self, **fields) -> None:
        self._append(Path(self.env["ITERA_METRICS"]),
                     json.dumps({"t": self.clock.wall(), **fields}) + "\n")

    def _append(self, path: Path, text: str) -> None:
        """Written at the fake wall clock's time: the engine dates printed lines by
        their file's mtime, as a real process's writes would date them."""
        with open(path, "a") as out:
            out.write(text)
        os.utime(path, (self.clock.wall(), self.clock.wall()))

    def exit(self, code: int, signals_seen: tuple[int, ...] = ()) -> None:
        """The script ended with `code`: the launcher records it and ends too."""
        (self.run_dir / "exit.json").write_text(json.dumps(
            {"exit_code": code, "t": self.clock.wall(), "signals_seen": list(signals_seen)}))
        self.popen.returncode = code if code >= 0 else 128 - code

    def hold(self) -> None:
        """The script pauses where it is, whatever the clock does: on the real clocks, a
        test that closes one engine and opens the next holds the run between them, so a
        slow box cannot let the run end before the next engine has looked at it."""
        self._held_at = self.clock.mono()

    def release(self) -> None:
        """The script goes on as if the time it was held had not passed."""
        if self._held_at is not None:
            self._next_at += self.clock.mono() - self._held_at
            self._held_at = None

    def play(self) -> None:
        """What printer.py would have printed by now, one step per `--sleep` s."""
        if self._refused is not None and self.alive:  # argparse's usage, then its exit
            self.exit(self._refused)
            return
        if self._script is None or not self.alive or self._stalled or self._held_at is not None:
            return
        while self.clock.mono() >= self._next_at:
            step = next(self._script, None)
            if step is None:
                if self._args.write:
                    (self.run_dir / self._args.write).write_text("done\n")
                self.exit(0)
                return
            if step.stall:
                self._stalled = True
                return
            if self._args.jsonl:
                self.record(**{k: v for k, v in step.record(0).items() if k != "t"})
            else:
                self.print(step.printed(self._args.nan_spelling))
            self._next_at += self._args.sleep

    def _plays_printer(self) -> None:
        script = next((i for i, a in enumerate(self.argv) if a.endswith("printer.py")), None)
        if script is None:
            return
        parser = printer.parser()
        parser.prog = "printer.py"  # as the interpreter names it
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                self._args = parser.parse_args(self.argv[script + 1:])
        except SystemExit as refused:  # a flag it does not know: usage on stderr, exit 2
            self._append(self.run_dir / "stderr.log", said.getvalue())
            self._refused = refused.code
            return
        self.ignores_sigterm = self._args.ignore_sigterm
        max_steps = int(self.env.get("ITERA_MAX_STEPS") or self._args.steps)
        self._script = printer.steps(self._args, max_steps)
        self._next_at = self.clock.mono()
        if self._args.truncated is not None:
            self.print(f"truncated={self._args.truncated}")


class FakeTree:
    """A fake run leaves no process behind."""

    def track(self, mono: float) -> None:
        pass

    def pids(self) -> set[int]:
        return set()

    def find(self) -> list:
        return []


class FakeProcesses:
    """The engine's `Processes`, with runs that are the test's (see the module)."""

    def __init__(self, clock: FakeClock):
        self.clock = clock
        self.runs: list[FakeRun] = []
        self._next_pid = FIRST_PID

    # -- the test's side -------------------------------------------------------------
    def run(self, run_id: str) -> FakeRun:
        (found,) = [r for r in self.runs if r.run_id == run_id]
        return found

    def play(self) -> None:
        for run in self.runs:
            run.play()

    def signalled(self, name: str) -> list[tuple[str, float]]:
        """(run id, monotonic time) of each `name` signal sent, in order."""
        return [(r.run_id, t) for r in self.runs for sig, t in r.signals if sig == name]

    # -- the port ----------------------------------------------------------------------
    def launch(self, argv, env, run_dir, cwd) -> Launched:
        run_dir.mkdir(parents=True, exist_ok=True)
        for stream in ("stdout.log", "stderr.log"):
            (run_dir / stream).touch()
        self._next_pid += 1
        run = FakeRun(self._next_pid, self.clock.wall(), list(argv), dict(env), Path(run_dir),
                      self.clock)
        run._plays_printer()
        self.runs.append(run)
        return Launched(run.pid, run.pid_start, run.popen)

    def _find(self, pid, pid_start) -> FakeRun | None:
        return next((r for r in self.runs if r.pid == pid and r.alive and
                     (pid_start is None or abs(r.pid_start - pid_start) < 0.05)), None)

    def same_process(self, pid, pid_start) -> bool:
        return self._find(pid, pid_start) is not None

    def read_exit(self, run_dir) -> dict | None:
        return read_exit(run_dir)  # the file the launcher (or the fake) wrote

    def is_launcher(self, pid, pid_start, identity) -> bool:
        run = self._find(pid, pid_start)
        return run is not None and run.run_id == identity.run_id

    def find_launcher(self, identity) -> Launched | None:
        run = next((r for r in self.runs if r.run_id == identity.run_id and r.alive), None)
        return None if run is None else Launched(run.pid, run.pid_start, None)

    def terminate(self, pid, pid_start, identity) -> bool:
        run = self._find(pid, pid_start)
        if run is None or run.run_id != identity.run_id:
            return False
        run.signals.append(("SIGTERM", self.clock.mono()))
        if not run.ignores_sigterm:
            run.exit(-signal.SIGTERM, signals_seen=(signal.SIGTERM,))
        return True

    def kill(self, pid, pid_start, identity) -> bool:
        run = self._find(pid, pid_start)
        if run is None or run.run_id != identity.run_id:
            return False
        run.signals.append(("SIGKILL", self.clock.mono()))
        run.popen.returncode = -signal.SIGKILL  # the launcher died with its group
        return True

    def tree(self, identity, pid, pid_start) -> FakeTree:
        return FakeTree()

    def terminate_all(self, found) -> list:
        return []

    def kill_all(self, found) -> list:
        return []


class SelfPlayingProcesses(FakeProcesses):
    """Fake processes on the real clocks that play their scripts whenever the engine looks
    at them (each port call, each poll of a launcher): for a loop the test does not step,
    `itera-tui run --headless` called in the test's process (`clikit.cli`); see
    `fake_host`. `on_launch(run)`, when given, is the test's hand in each run it launches
    (a command other than printer.py writes and exits only by it)."""

    def __init__(self, on_launch=None):
        super().__init__(RealClock())
        self.on_launch = on_launch

    def launch(self, argv, env, run_dir, cwd) -> Launched:
        launched = super().launch(argv, env, run_dir, cwd)
        run = self.runs[-1]
        if self.on_launch is not None:
            self.on_launch(run)
        procs = self

        class Polled(FakePopen):
            def poll(self):
                procs.play()
                return run.popen.returncode
        return Launched(launched.pid, launched.pid_start, Polled())

    def same_process(self, pid, pid_start) -> bool:
        self.play()
        return super().same_process(pid, pid_start)

    def read_exit(self, run_dir) -> dict | None:
        self.play()
        return super().read_exit(run_dir)


def fake_host(monkeypatch, on_launch=None, wrapup=None) -> SelfPlayingProcesses:
    """Every engine the test's process opens (a headless run through `clikit.cli`) runs
    its runs on these fake processes, none on the box's, and every wrap-up it builds
    starts its git, drawer and verifier on `wrapup` (a `fakewrapup.FakeWrapup`, new
    when None): (the stand-in, to look at; its `.wrapup` is the wrap-up's)."""
    import tui.bundle.wrapup
    import tui.engine.engine
    from fakewrapup import FakeWrapup

    procs = SelfPlayingProcesses(on_launch)
    procs.wrapup = wrapup or FakeWrapup()
    monkeypatch.setattr(tui.engine.engine, "HostProcesses", lambda: procs)
    monkeypatch.setattr(tui.bundle.wrapup, "HostHelpers", lambda: procs.wrapup)
    return procs


def drive_fake(engine, procs: FakeProcesses, clock: FakeClock, *, step_s: float = 0.05,
               limit_s: float = 600.0):
    """Play, tick and move the clocks until the campaign has nothing left to run (at
    most `limit_s` of the fake clock: a campaign that never ends fails, it never hangs)."""
    tick_until(engine, procs, clock, lambda: engine.finished, "the campaign's end",
               step_s, limit_s)
    return engine



def drive_plan(path: Path, **kw):
    """A campaign file driven to its end on fake processes and clocks: (engine, procs).
    The engine is closed; its state and ledger are what the test reads."""
    from tui.campaign import load_plan
    from tui.engine import Engine

    clock = FakeClock()
    procs = FakeProcesses(clock)
    engine = Engine(load_plan(path), clock=clock.wall, monotonic=clock.mono,
                    poll_interval=0.05, processes=procs, **kw).open()
    try:
        drive_fake(engine, procs, clock)
    finally:
        engine.close()
    return engine, procs


def drive_session(path: Path, until, clock: FakeClock, procs: FakeProcesses, *,
                  timeout: float = 90.0, each=None, crash: bool = False, wrapup=None):
    """A `CampaignSession` (with its notices' thread) on the fake processes and clocks,
    stepped until `until(snapshot)` is truthy: the fake clock moves 0.05 s a step, and real
    time a little too, for the notices' sender thread. `each(session)`, when given, runs
    every step (the test's hand in the runs). The session is closed; it is returned. With
    `crash`, its engine ends as under kill -9: no `engine_stopped` in the ledger, its lock
    let go as the kernel lets it go; the fake runs live on. Its wrap-up starts its git,
    drawer and verifier on `wrapup` (a `fakewrapup.FakeWrapup`, new when None; the
    session's `wrapup_helpers`)."""
    from fakewrapup import FakeWrapup
    import time

    from tui.campaign import load_plan
    from tui.engine import Engine
    from tui.session import CampaignSession

    plan = load_plan(path)
    engine = Engine(plan, clock=clock.wall, monotonic=clock.mono, poll_interval=0.05,
                    processes=procs)
    session = CampaignSession(plan, engine, clock=clock.wall, poll_interval=0.05,
                              wrapup_helpers=wrapup or FakeWrapup()).open()
    try:
        deadline = time.monotonic() + timeout
        while not until(session.step()):
            assert time.monotonic() < deadline, "the campaign did not get there in time"
            if each is not None:
                each(session)
            procs.play()
            clock.advance(0.05)
            time.sleep(0.002)
    finally:
        if crash:
            engine.close = engine._release_lock  # no last words in the ledger
        session.close()
    return session
