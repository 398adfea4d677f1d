"""A run that attacks the engine from its own directory, for the hardening tests.

Usage: hostile.py MODE [--seconds S]
  swap-files   replace metrics.jsonl, control.jsonl and samples.jsonl with FIFOs
               and stdout.log with a link to /dev/zero, then sleep S seconds
  orphans      leave a child in the run's process group and a setsid() child (its
               own session, and it ignores SIGTERM), both sleeping an hour; print
               their pids; exit 0 after S seconds
  flood        print `step K loss X` lines as fast as it can for S seconds, then
               one `loss nan` line, then sleep (the engine must stop it)
  flood-jsonl  the same as SDK JSONL records into metrics.jsonl
"""

import argparse
import json
import os
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("mode")
p.add_argument("--seconds", type=float, default=3.0)
args = p.parse_args()
run_dir = os.environ.get("ITERA_RUN_DIR", ".")


def replace_with_fifo(name: str) -> None:
    path = os.path.join(run_dir, name)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.mkfifo(path)


SLEEPER = [sys.executable, "-c", "import time; time.sleep(3600)"]
# it says "ready" once SIGTERM is ignored: on a loaded box its interpreter can take
# seconds to start, and a SIGTERM before that would end it (no SIGKILL to see)
STUBBORN = [sys.executable, "-c", "import signal, sys, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
            "sys.stdout.close(); time.sleep(3600)"]

if args.mode == "swap-files":
    print("step 1 loss 0.5", flush=True)
    for name in ("metrics.jsonl", "control.jsonl", "samples.jsonl"):
        replace_with_fifo(name)
    os.unlink(os.path.join(run_dir, "stdout.log"))
    os.symlink("/dev/zero", os.path.join(run_dir, "stdout.log"))
    time.sleep(args.seconds)
elif args.mode == "orphans":
    stay = subprocess.Popen(SLEEPER)  # same group, same session: a killpg would reach it
    away = subprocess.Popen(STUBBORN, start_new_session=True,  # setsid(): neither would
                            stdout=subprocess.PIPE)
    away.stdout.readline()  # it ignores SIGTERM from here on
    away.stdout.close()
    print(f"step 1 loss 0.5 group-child {stay.pid} setsid-child {away.pid}", flush=True)
    time.sleep(args.seconds)
elif args.mode in ("flood", "flood-jsonl"):
    end = time.monotonic() + args.seconds
    step = 0
    if args.mode == "flood":
        write = sys.stdout.write
        while time.monotonic() < end:
            for _ in range(1000):
                step += 1
                write(f"step {step} loss {1.0 / step:.6f} lr 3.0e-04 | some words of a log\n")
        print(f"step {step + 1} loss nan", flush=True)
    else:
        with open(os.environ["ITERA_METRICS"], "a") as out:
            while time.monotonic() < end:
                for _ in range(1000):
                    step += 1
                    out.write(json.dumps({"t": time.time(), "step": step,
                                          "loss": 1.0 / step}) + "\n")
            out.write(json.dumps({"t": time.time(), "step": step + 1, "loss": float("nan")})
                      + "\n")
    sys.stdout.flush()
    with open(os.path.join(run_dir, "nan_written_at"), "w") as f:
        f.write(repr(time.time()))
    time.sleep(3600)
else:
    sys.exit(f"unknown mode {args.mode}")
