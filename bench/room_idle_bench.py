"""The control room when nothing can change, and its first paint, side by side.

Both measured against a minimal Textual app (Header + Static + Footer) in the
same run, each in its own process on the real terminal driver (a pty drained
by a thread, so drawing is counted):

1. idle CPU: the room open on a finished campaign (bundle verified: no live
   run, no verification, no wrap-up) against the minimal app, over
   `--seconds`, percent of one core (user + system, every thread). Goal:
   <= 2x the minimal app.
2. first full paint at 80x24: from process start to the runs table holding
   the replayed campaign's rows, against the minimal app's first paint.
   Goal: <= 1.5x.

    python bench/room_idle_bench.py [--seconds 20] [--json]
"""

from __future__ import annotations

import argparse
import os
import pty
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

from bench.figures import ratio_figure, report  # noqa: E402

MINIMAL = textwrap.dedent("""
    import os, sys, time
    from textual.app import App
    from textual.widgets import Footer, Header, Static
    class Minimal(App):
        def compose(self):
            yield Header(); yield Static("minimal"); yield Footer()
        def on_mount(self):
            self.call_after_refresh(self.painted)
        def painted(self):
            os.write(int(os.environ["PAINT_FD"]), f"{time.time()}\\n".encode())
    Minimal().run()
""")

ROOM = textwrap.dedent("""
    import os, sys, time
    from tui.app.app import ControlRoom
    from tui.session import CampaignSession, load_campaign
    plan = load_campaign(sys.argv[1])
    session = CampaignSession(plan, probes=None).open()
    app = ControlRoom(plan, session)
    def check():
        if app.rows:
            os.write(int(os.environ["PAINT_FD"]), f"{time.time()}\\n".encode())
            timer.stop()
    def mounted():
        global timer
        timer = app.set_interval(0.01, check)
    app.call_later(mounted)
    try:
        app.run()
    finally:
        session.close()
""")

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
step = 'step (\\\\d+)'
loss = 'loss[:=]? *(\\\\S+)'
acc = 'acc=(\\\\S+)'
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


def start(code: str, args: list[str], cwd: Path):
    master, slave = pty.openpty()
    os.set_blocking(master, True)
    import fcntl
    import struct
    import termios

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    paint_r, paint_w = os.pipe()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color",
               PAINT_FD=str(paint_w))
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=cwd, env=env,
                            stdin=slave, stdout=slave, stderr=slave, pass_fds=(paint_w,),
                            start_new_session=True)
    os.close(slave)
    os.close(paint_w)

    def drain():
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass

    threading.Thread(target=drain, daemon=True).start()
    return proc, t0, paint_r


def painted_after(paint_r: int, t0: float, timeout: float = 60) -> float:
    import select

    ready, _, _ = select.select([paint_r], [], [], timeout)
    if not ready:
        raise RuntimeError("no first paint in time")
    return float(os.read(paint_r, 100).decode().split()[0]) - t0


def cpu_pct(proc, seconds: float) -> float:
    p = psutil.Process(proc.pid)
    def cpu():
        times = p.cpu_times()
        return times.user + times.system
    before, t = cpu(), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (cpu() - before) / (time.monotonic() - t)


def measure(code: str, args: list[str], cwd: Path, seconds: float) -> tuple[float, float]:
    proc, t0, paint_r = start(code, args, cwd)
    try:
        paint = painted_after(paint_r, t0)
        time.sleep(3.0)  # settle: history loaded, first timers ran
        return paint, cpu_pct(proc, seconds)
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
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    seconds = 8.0 if args.quick else args.seconds
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = finished_campaign(root)
        paint_min, cpu_min = measure(MINIMAL, [], root, seconds)
        paint_room, cpu_room = measure(ROOM, [str(path)], root, seconds)
    figures = [
        ratio_figure("room idle CPU (finished campaign)", cpu_room, max(cpu_min, 0.05),
                     "%", "<= 2x"),
        ratio_figure("room first full paint 80x24", paint_room, paint_min, "s", "<= 1.5x"),
    ]
    report(figures, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
