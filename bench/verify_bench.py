"""How much does `itera-tui verify` cost, next to loading the same files once?

`verify` re-hashes every file of a bundle against its manifest, scans the
text it wrote for paths of this machine, and reloads every checkpoint and
artifact in one fresh verifier process. The baseline is the least a reload
check can cost: one Python that imports torch once and
`torch.load(weights_only=True)`s every checkpoint and artifact the manifest
lists (safetensors with `safetensors`). Both run as fresh processes, side by
side, alternating, for several rounds; the figures are medians.

Goal (issue 16): verify wall <= 1.5x the baseline. Also shown: CPU time, and
how many verifier processes one `verify` starts (goal: 1).

Usage: python bench/verify_bench.py [BUNDLE] [--rounds 5] [--json]
Without BUNDLE the demo campaign is run headless in a temporary copy of this
repository (about 1.5 min) and its bundle is used.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.figures import Figure, ratio_figure, report  # noqa: E402

BASELINE = r"""
import json, sys
from pathlib import Path
import torch
root = Path(sys.argv[1])
manifest = json.loads((root / "manifest.json").read_text())
loaded = 0
for entry in manifest["files"]:
    rel = entry["path"]
    if entry.get("kind") not in ("checkpoint", "artifact"):
        continue
    if rel.endswith(".safetensors"):
        from safetensors.torch import load_file
        load_file(root / rel)
    elif rel.endswith((".pt", ".pth", ".bin", ".ckpt")):
        torch.load(root / rel, map_location="cpu", weights_only=True)
    else:
        continue
    loaded += 1
print(loaded)
"""


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO))


def demo_bundle(workdir: Path) -> Path:
    """Run the demo campaign headless in a copy of this repository; its bundle."""
    copy = workdir / "demo"
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    for rel in files:
        if rel.startswith("tests/"):
            continue
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, copy / rel)
    print("running the demo campaign headless (about 1.5 min)...", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--headless", "--decide",
                           "continue"], cwd=copy, env=dict(os.environ, PYTHONPATH=str(copy)),
                          capture_output=True, text=True, timeout=900)
    bundle = copy / "outputs" / "bundle"
    if not (bundle / "manifest.json").is_file():
        sys.exit(f"the demo campaign left no bundle (exit {done.returncode}):\n"
                 f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return bundle


def count_verifiers(pid: int, seen: set[int], stop: threading.Event) -> None:
    import psutil

    while not stop.is_set():
        try:
            for child in psutil.Process(pid).children(recursive=True):
                try:
                    if "tui.training.file_check" in " ".join(child.cmdline()):
                        seen.add(child.pid)
                except psutil.Error:
                    pass
        except psutil.Error:
            return
        time.sleep(0.02)


def timed(cmd: list[str], cwd: Path, watch: bool = False) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the process tree, verifier processes seen, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    seen: set[int] = set()
    stop = threading.Event()
    watcher = threading.Thread(target=count_verifiers, args=(proc.pid, seen, stop))
    if watch:
        watcher.start()
    out, _ = proc.communicate(timeout=900)
    wall = time.perf_counter() - start
    stop.set()
    if watch:
        watcher.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} exited {proc.returncode}:\n{out[-2000:]}")
    return wall, cpu, len(seen), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", nargs="?", help="an existing bundle directory")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="verify-bench-") as tmp:
        bundle = Path(args.bundle).resolve() if args.bundle else demo_bundle(Path(tmp))
        verify_cmd = [sys.executable, "-m", "tui.cli", "verify", str(bundle), "--json"]
        base_cmd = [sys.executable, "-c", BASELINE, str(bundle)]
        timed(base_cmd, Path(tmp))  # warm the page cache for both
        rows = {"verify": [], "baseline": []}
        verifiers, loaded, reloaded = 0, 0, 0
        for _ in range(args.rounds):
            wall, cpu, seen, out = timed(verify_cmd, Path(tmp), watch=True)
            result = json.loads(out)
            if not result["verified"]:
                sys.exit(f"the bundle does not verify: {result['failures'][:3]}")
            reloaded, verifiers = result["reloaded"], max(verifiers, seen)
            rows["verify"].append((wall, cpu))
            wall, cpu, _, out = timed(base_cmd, Path(tmp))
            loaded = int(out.strip().splitlines()[-1])
            rows["baseline"].append((wall, cpu))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in rows.items()}
    figures = [
        ratio_figure(f"verify bundle ({reloaded} reloads), wall", med["verify"][0],
                     med["baseline"][0], "s", "<= 1.5x"),
        ratio_figure(f"verify bundle, CPU (baseline: {loaded} loads)", med["verify"][1],
                     med["baseline"][1], "s", "<= 2x"),
        Figure("verify: verifier processes started", verifiers, None, "", "== 1",
               verifiers == 1),
    ]
    report(figures, args.json)


if __name__ == "__main__":
    main()
