"""What does the SDK's save cost as users call it, next to what the disk allows?

Builds a state dict of about 256 MB (a stack of Linear layers: `sd =
model.state_dict()`), attaches to a run the way a script the engine launched
does (the ITERA_* variables the engine sets, pointing at a temporary run
directory) and, in each of five rounds, measures side by side in one process:

- the call docs/sdk.md shows, `run.save_checkpoint(model=sd, step=i)` (its
  default path `checkpoints/step-NNNNNN.pt`, temp file, fsync, rename, directory
  fsync, digest, sidecar and the acknowledgement in the metrics stream), against
  a raw sequential write + fsync of the same bytes to a new file in the same
  directory, the page cache dropped before each (root writes
  /proc/sys/vm/drop_caches; where that is refused, every file the bench wrote is
  evicted with posix_fadvise(DONTNEED) instead, and the note says so):
  throughput (goal >= 0.9x) and CPU of all threads (goal <= 1.5x);
- the two design choices that CPU goal rests on, each against the SDK as it
  is: the same save with a sha256 sidecar instead of xxh3 and with torch's
  zip CRC32 switched back on (the claim: each would cost more CPU);
- load_checkpoint into the model against the bare minimum of the same work: a
  raw read of the bytes into new tensors of the same sizes and a copy into
  existing weights (both from a warm page cache; goal <= 1.5x);
- the training stall of an async save against a bare copy of the same tensors
  into CPU memory (goal <= 1.5x).

Medians over the rounds; who goes first alternates (the box may be shared: the
load average is printed). Each round's files are removed before the next, so
every timed write makes a new file, as a run's successive saves do.

    python bench/checkpoint_bench.py [--mb 256] [--rounds 5] [--dir DIR] [--quick] [--json]

DIR: where the run directory will live (default: a temporary directory).
--quick: the defaults (256 MB, 5 rounds). --json: the figures as one JSON
list (for `python -m bench`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.figures import ratio_figure, report  # noqa: E402
from tui import training  # noqa: E402
from tui.training import atomic, checkpoint, digest  # noqa: E402


def build_state(megabytes: int) -> tuple[torch.nn.Module, dict]:
    """A stack of Linear layers of about `megabytes` of weights, and its state dict:
    the `sd` of `run.save_checkpoint(model=sd, step=i)` (docs/sdk.md)."""
    width = 1024
    layers = max(1, round(megabytes * 1e6 / (4 * width * (width + 1))))
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    return model, model.state_dict()


def attached_run(run_dir: Path):
    """`training.attach()` as a script the engine launched calls it: the ITERA_*
    variables the engine sets (tui/engine/runs/launching.py) point into `run_dir`."""
    os.environ.update({"ITERA_RUN_ID": "bench-0", "ITERA_RUN_DIR": str(run_dir),
                       "ITERA_METRICS": str(run_dir / "metrics.jsonl"),
                       "ITERA_CONTROL": str(run_dir / "control.jsonl")})
    return training.attach(checkpoint_on_sigterm=True)


def cpu_s() -> float:
    """CPU seconds of this process, every thread, user + system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def drop_page_cache() -> str | None:
    """Flush and drop the page cache; None if done, else why it could not be."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
    except OSError as error:
        return f"{type(error).__name__}: {error.strerror or error}"
    return None


def evict(directory: Path) -> None:
    """The fallback where the page cache cannot be dropped: flush every file under
    `directory` and ask the kernel to drop its pages (posix_fadvise DONTNEED)."""
    os.sync()
    for path in directory.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


class Cold:
    """Before each timed write: the page cache dropped, or where that is refused,
    every file the bench wrote evicted (`reason` says why the drop was refused)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.reason = drop_page_cache()

    def __call__(self) -> None:
        if self.reason is None:
            drop_page_cache()
        else:
            evict(self.directory)

    @property
    def how(self) -> str:
        return ("dropped before each write" if self.reason is None else
                f"NOT droppable ({self.reason}): the bench's files evicted with "
                "posix_fadvise(DONTNEED) before each write instead")


def timed(fn, cold=None, warm=None) -> tuple[float, float]:
    """(wall s, CPU s) of fn(), after `cold()` if given. `warm()` runs between
    that and the timing: dropping the cache also evicts the code and the metrics
    file's tail, which a training process has hot; `warm` touches them again with
    a tiny write of the same kind, so the timed write meets a cold cache for its
    data only, as it would in training."""
    if cold is not None:
        cold()
    if warm is not None:
        warm()
    cpu_start, start = cpu_s(), time.perf_counter()
    fn()
    return time.perf_counter() - start, cpu_s() - cpu_start


def raw_write(path: Path, blob: bytes) -> None:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(blob)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def raw_load(path: Path, sizes: list[int], weights: list[torch.Tensor]) -> None:
    """The bare minimum of a load into an existing model: read the file's bytes into
    new tensors of the checkpoint's storage sizes (a resume has no memory to read
    the optimizer state into; same allocations as torch.load, so page faults and
    allocator reuse count alike), then copy the model's share into tensors that
    stand for its weights, as load_state_dict must."""
    with open(path, "rb", buffering=0) as f:
        read = []
        for n in sizes:
            read.append(torch.empty(n, dtype=torch.uint8))
            f.readinto(memoryview(read[-1].numpy()))
    with torch.no_grad():
        for weight, data in zip(weights, read):
            weight.view(-1).copy_(data.view(weight.dtype))


@contextlib.contextmanager
def variant(*, sha256: bool = False, crc: bool = False):
    """The SDK save with one design choice undone, for a side-by-side figure."""
    saved = (digest.fast_algorithm, atomic._NoCrc32)
    if sha256:
        checkpoint.fast_algorithm = lambda: digest.SHA256
    if crc:
        atomic._NoCrc32 = contextlib.nullcontext
    try:
        yield
    finally:
        checkpoint.fast_algorithm, atomic._NoCrc32 = saved


def filesystem_of(path: Path) -> str:
    best = ("?", "")
    for line in Path("/proc/mounts").read_text().splitlines() if Path("/proc/mounts").exists() else ():
        parts = line.split()
        if len(parts) > 2 and str(path.resolve()).startswith(parts[1]) and len(parts[1]) >= len(best[1]):
            best = (parts[2], parts[1])
    return best[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=256, help="approximate state size in MB (256)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (5)")
    parser.add_argument("--dir", default=None, help="directory on the checkpoint disk")
    parser.add_argument("--quick", action="store_true", help="the defaults (256 MB, 5 rounds)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else \
        (lambda *a: print(*a, flush=True))

    model, sd = build_state(args.mb)
    work = Path(tempfile.mkdtemp(prefix="checkpoint-bench-", dir=args.dir))
    run = attached_run(work)
    cold = Cold(work)
    times: dict[str, list[float]] = {}
    load_before = os.getloadavg()[0]
    steps = iter(range(1, 1 << 30))

    def save(**how):
        return run.save_checkpoint(model=sd, step=next(steps), **how)  # the call docs/sdk.md shows

    tiny = {"w": torch.zeros(4, 4)}
    warm_save = lambda: run.save_checkpoint(model=tiny, step=0, path=work / "warm.pt")  # noqa: E731
    warm_raw = lambda: raw_write(work / "warm.bin", b"\0" * 4096)  # noqa: E731

    try:
        reference = save().path  # its bytes are the raw side's, and what the loads read
        blob = reference.read_bytes()
        sizes = [t.untyped_storage().nbytes() for t in sd.values()]
        weights = [torch.empty_like(t) for t in sd.values()]  # stand-ins: same sizes
        for round_ in range(args.rounds + 1):  # round 0 warms up the allocator (first-touch page faults)
            sample: dict[str, float] = {}
            written: list[Path] = []
            raw_path = reference.with_name(f"raw-{round_}.bin")
            sides = [("save", lambda: written.append(save().path), warm_save),
                     ("raw", lambda: raw_write(raw_path, blob), warm_raw)]
            for name, fn, warm in sides if round_ % 2 else sides[::-1]:  # alternate who goes first
                sample[name], sample[name + "_cpu"] = timed(fn, cold, warm)
            with variant(sha256=True):
                _, sample["sha256_cpu"] = timed(lambda: written.append(save().path), cold, warm_save)
            with variant(crc=True):
                _, sample["crc_cpu"] = timed(lambda: written.append(save().path), cold, warm_save)
            raw_load(reference, sizes, weights)  # both read from a warm page cache
            reads = [("raw_load", lambda: raw_load(reference, sizes, weights)),
                     ("load", lambda: training.load_checkpoint(reference, model=model, restore_rng=False))]
            for name, fn in reads if round_ % 2 else reads[::-1]:
                sample[name], _ = timed(fn)
            sample["copy"], _ = timed(lambda: [t.clone() for t in sd.values()])
            sample["stall"] = save(async_=True).block_s
            finished = run.wait_for_checkpoint()
            sample["async_write"] = finished.write_s
            written.append(finished.path)
            for path in written + [raw_path]:  # the next round writes new files, as a run does
                path.unlink(missing_ok=True)
                atomic.sidecar_path(path).unlink(missing_ok=True)
            for key, value in sample.items() if round_ else ():
                times.setdefault(key, []).append(value)
            say(f"round {round_}{' (warm-up)' if not round_ else ''}: "
                + "  ".join(f"{k} {v:.3f}" for k, v in sample.items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in times.items()}
    size_mb = len(blob) / 1e6
    figures = [
        ratio_figure(f"save_checkpoint {size_mb:.0f}MB vs raw write, MB/s",
                     round(size_mb / med["save"], 1), round(size_mb / med["raw"], 1), "MB/s", ">= 0.9x"),
        ratio_figure(f"save_checkpoint {size_mb:.0f}MB vs raw write, CPU",
                     med["save_cpu"], med["raw_cpu"], "s", "<= 1.5x"),
        ratio_figure("ckpt save CPU, xxh3 vs sha256 digest", med["save_cpu"], med["sha256_cpu"], "s", "<= 0.8x"),
        ratio_figure("ckpt save CPU, torch CRC32 off vs on", med["save_cpu"], med["crc_cpu"], "s", "<= 0.9x"),
        ratio_figure("ckpt load vs raw read + copy into model", med["load"], med["raw_load"], "s", "<= 1.5x"),
        ratio_figure("ckpt async stall vs bare copy to CPU", med["stall"], med["copy"], "s", "<= 1.5x"),
    ]
    say(f"note: checkpoint bench: run.save_checkpoint(model=sd, step=i) of a {size_mb:.0f} MB file in an "
        f"attached run, {args.rounds} rounds, medians; "
        f"{filesystem_of(Path(args.dir or tempfile.gettempdir()))} filesystem; page cache {cold.how}; "
        f"digest {digest.fast_algorithm()}; load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} CPUs; torch {torch.__version__}")
    say(f"note: sync save {size_mb / 1e3 / med['save']:.2f} GB/s, raw write {size_mb / 1e3 / med['raw']:.2f} GB/s"
        f" = throughput {med['raw'] / med['save']:.2f}x the raw write, CPU {med['save_cpu']:.3f} s vs "
        f"{med['raw_cpu']:.3f} s; async background write {med['async_write']:.3f} s")
    report(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
