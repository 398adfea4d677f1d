"""The control room when nothing can change, and its first paint, side by side.

Both measured against a minimal Textual app (Header + Static + Footer) in the
same run, each in its own process on the real terminal driver (a pty drained
by a thread, so drawing is counted). The room is the real `itera-tui PATH`, a
client of the campaign's engine process (started once before the rounds, as
the first `itera-tui` starts it, and stopped at the end), nothing injected:

1. idle CPU: the room open on a finished campaign (bundle verified: no live
   run, no verification, no wrap-up) against the minimal app, over
   `--seconds`, percent of one core (user + system, every thread). Goal:
   <= 2x the minimal app.
2. first full paint at 80x24: from process start until the terminal has been
   sent the runs table's rows (the minimal app: its text), ANSI codes
   stripped; against the minimal app's first paint; the
   median of `--paints` rounds (default 7), the two apps alternating, so a
   noisy neighbour hits both alike. Goal: <= 1.3x (the room imports no
   engine: it draws the engine's snapshot).
3. the CPU the room spent until that paint (user + system, read when the rows
   reach the terminal), median of the same rounds: what its first paint takes
   on a quiet box, whatever else the box runs meanwhile (the wall-clock ratio
   above moves with the load). Goal: < 0.5 s, the minimal app's shown beside.

    python bench/room_idle_bench.py [--seconds 20] [--paints 7] [--json]
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.figures import Figure, ratio_figure, report  # noqa: E402

MINIMAL = textwrap.dedent("""
    from textual.app import App
    from textual.widgets import Footer, Header, Static
    class Minimal(App):
        def compose(self):
            yield Header(); yield Static("minimal app painted"); yield Footer()
    Minimal().run()
""")
MINIMAL_MARK = b"minimal app painted"
# a row of the runs table, or the ending a finished campaign opens on at once
ROOM_MARK = ("control·run".encode(), b"The campaign is over")
ANSI = re.compile(rb"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")

CAMPAIGN = """
[campaign]
name = "idle"
question = "is the room calm when nothing can change?"
metric = "acc"

[[lot]]
gpu = "cpu"
hours = 1
price_usd = 1.0
gpus = 2

[metrics]
step = 'step (\\d+)'
loss = 'loss[:=]? *(\\S+)'
acc = 'acc=(\\S+)'
"""


def finished_campaign(root: Path) -> Path:
    printer = ROOT / "tests" / "scripts" / "printer.py"
    text = CAMPAIGN + "".join(f"""
[[variant]]
id = "{vid}"
category = "{cat}"
command = {[sys.executable, str(printer), "--steps", "30"]!r}
minutes = 1
""".replace("'", '"') for vid, cat in (("control", "mandatory"), ("b", "useful")))
    path = root / "campaign.toml"
    path.write_text(text)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "tui.cli", "run", "--headless", str(path)],
                   cwd=root, env=env, check=True, capture_output=True, timeout=300)
    return path


def start(argv: list[str], cwd: Path, mark):
    """`argv` in a fresh 80x24 pty; returns the process, its start time and an Event
    set (with `.t`, and `.cpu`: the process's CPU seconds then) once the bytes it
    wrote, ANSI codes stripped, hold `mark`."""
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    os.set_blocking(master, True)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color")
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, *argv], cwd=cwd, env=env,
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = threading.Event()
    watched = psutil.Process(proc.pid)

    def drain():
        text = b""
        try:
            while data := os.read(master, 65536):
                if not seen.is_set():
                    text += data
                    plain = ANSI.sub(b"", text)
                    if any(m in plain for m in (mark if isinstance(mark, tuple) else (mark,))):
                        seen.t = time.time()
                        times = watched.cpu_times()
                        seen.cpu = times.user + times.system
                        seen.set()
        except OSError:
            pass

    threading.Thread(target=drain, daemon=True).start()
    return proc, t0, seen


def cpu_pct(proc, seconds: float) -> float:
    p = psutil.Process(proc.pid)
    def cpu():
        times = p.cpu_times()
        return times.user + times.system
    before, t = cpu(), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (cpu() - before) / (time.monotonic() - t)


def measure(argv: list[str], cwd: Path, mark, seconds: float) -> tuple[float, float, float]:
    """First paint (wall, and the CPU spent until it), then (with `seconds` > 0) the CPU
    over `seconds` once settled."""
    proc, t0, seen = start(argv, cwd, mark)
    try:
        if not seen.wait(60):
            raise RuntimeError(f"no first paint in time: {argv}")
        paint = seen.t - t0
        if seconds <= 0:
            return paint, seen.cpu, 0.0
        time.sleep(3.0)  # settle: history loaded, first timers ran
        return paint, seen.cpu, cpu_pct(proc, seconds)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true", help="8 s of CPU sampling")
    parser.add_argument("--paints", type=int, default=7, help="first-paint rounds (median)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    seconds = 8.0 if args.quick else args.seconds
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = finished_campaign(root)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        subprocess.run([sys.executable, "-m", "tui.cli", "engine", "start", str(path)],
                       cwd=root, env=env, check=True, capture_output=True, timeout=120)
        try:
            paint_min, paint_room, cpu_min, cpu_room, spent_min, spent_room = rounds(
                root, path, seconds, args.paints)
        finally:
            subprocess.run([sys.executable, "-m", "tui.cli", "engine", "stop", str(path)],
                           cwd=root, env=env, capture_output=True, timeout=120)
    figures = [
        ratio_figure("room idle CPU (finished campaign)", cpu_room, max(cpu_min, 0.05),
                     "%", "<= 2x"),
        ratio_figure("room first full paint 80x24 (a client)", paint_room, paint_min, "s",
                     "<= 1.3x"),
        Figure("room first paint 80x24, CPU until drawn", spent_room, spent_min, "s",
               "< 0.5 s", spent_room < 0.5),
    ]
    report(figures, as_json=args.json)
    return 0


def rounds(root: Path, path: Path, seconds: float, paints: int):
    """The minimal app and the room, alternating: first paints (wall, and the CPU until
    them) and idle CPU."""
    minimal, room = ["-c", MINIMAL], ["-m", "tui.cli", str(path)]
    first_min = measure(minimal, root, MINIMAL_MARK, seconds)
    first_room = measure(room, root, ROOM_MARK, seconds)
    cpu_min, cpu_room = first_min[2], first_room[2]
    rounds_min, rounds_room = [first_min], [first_room]
    for _ in range(max(0, paints - 1)):  # alternating, the same noise for both
        rounds_min.append(measure(minimal, root, MINIMAL_MARK, 0))
        rounds_room.append(measure(room, root, ROOM_MARK, 0))
    def median(rs, i):
        return statistics.median(r[i] for r in rs)
    return (median(rounds_min, 0), median(rounds_room, 0), cpu_min, cpu_room,
            median(rounds_min, 1), median(rounds_room, 1))


if __name__ == "__main__":
    sys.exit(main())
