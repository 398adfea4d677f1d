"""How much does checkpointing cost, next to what the disk and memory allow?

Builds about 500 MB of training state (a stack of Linear layers and its AdamW
state) and, in each of several rounds, measures side by side in one process:

- a synchronous save_checkpoint against a raw sequential write + fsync of the
  same bytes in the same directory, the page cache dropped before each (where
  this user may: root writes /proc/sys/vm/drop_caches): time (goal <= 1.11x,
  i.e. throughput >= 0.9x) and CPU of all threads (goal <= 1.5x);
- the two design choices that CPU goal rests on, each against the SDK as it
  is: the same save with a sha256 sidecar instead of xxh3 and with torch's
  zip CRC32 switched back on (the claim: each would cost more CPU);
- load_checkpoint into the model and optimizer against the bare minimum of
  the same work: a raw read of the bytes into new tensors of the same sizes and
  a copy of the model's share into existing weights (both from a warm page
  cache; goal <= 1.5x);
- the training stall of an async save against a bare copy of the same tensors
  into CPU memory (goal <= 1.5x).

Medians over the rounds (the box may be shared: the load average is printed).

    python bench/checkpoint_bench.py [--mb 500] [--rounds 7] [--dir DIR] [--quick] [--json]

DIR: where checkpoints will live (default: a temporary directory). --quick:
256 MB instead of 500. --json: the figures as one JSON list (for `python -m bench`).
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


def build_state(megabytes: int):
    width = 2048
    layers = max(1, round(megabytes * 1e6 / (3 * 4 * width * (width + 1))))  # params + 2 Adam moments
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model(torch.randn(8, width)).square().mean().backward()
    optimizer.step()
    return model, optimizer


def state_tensors(model, optimizer) -> list[torch.Tensor]:
    tensors = list(model.state_dict().values())
    for per_param in optimizer.state_dict()["state"].values():
        tensors += [v for v in per_param.values() if isinstance(v, torch.Tensor)]
    return tensors


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


def timed(fn, drop: bool, warm=None) -> tuple[float, float]:
    """(wall s, CPU s) of fn(), after dropping the page cache if asked. `warm()`
    runs between the drop and the timing: the drop also evicts the code (torch's
    shared libraries), which a training process has hot; `warm` touches it again
    with a tiny write of the same kind, so the timed write meets a cold cache for
    its data only, as it would in training."""
    if drop:
        drop_page_cache()
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
    parser.add_argument("--mb", type=int, default=None, help="approximate state size in MB (500)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (7)")
    parser.add_argument("--dir", default=None, help="directory on the checkpoint disk")
    parser.add_argument("--quick", action="store_true", help="256 MB instead of 500")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    megabytes = args.mb or (256 if args.quick else 500)
    rounds = args.rounds or 7
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else \
        (lambda *a: print(*a, flush=True))

    model, optimizer = build_state(megabytes)
    work = Path(tempfile.mkdtemp(prefix="checkpoint-bench-", dir=args.dir))
    cannot_drop = drop_page_cache()
    drop = cannot_drop is None
    run = training.attach(env={"ITERA_RUN_DIR": str(work), "ITERA_METRICS": str(work / "metrics.jsonl")},
                          checkpoint_on_sigterm=False)
    sync_path, async_path, raw_path = work / "sync.pt", work / "async.pt", work / "raw.bin"
    times: dict[str, list[float]] = {}
    load_before = os.getloadavg()[0]

    def save(path=sync_path, step=0):
        run.save_checkpoint(model=model, optimizer=optimizer, step=step, path=path)

    tiny = torch.nn.Linear(4, 4)
    warm_save = lambda: run.save_checkpoint(model=tiny, step=0, path=work / "warm.pt")  # noqa: E731
    warm_raw = lambda: raw_write(work / "warm.bin", b"\0" * 4096)  # noqa: E731

    try:
        save()  # the file gives the raw side its bytes
        blob = sync_path.read_bytes()
        sizes = [t.untyped_storage().nbytes() for t in state_tensors(model, optimizer)]
        weights = [torch.empty_like(t) for t in model.state_dict().values()]  # stand-ins: same sizes
        for round_ in range(rounds + 1):  # round 0 warms up the allocator (first-touch page faults)
            sample: dict[str, float] = {}
            sides = [("save", lambda: save(step=round_), warm_save),
                     ("raw", lambda: raw_write(raw_path, blob), warm_raw)]
            for name, fn, warm in sides if round_ % 2 else sides[::-1]:  # alternate who goes first
                sample[name], sample[name + "_cpu"] = timed(fn, drop, warm)
            with variant(sha256=True):
                _, sample["sha256_cpu"] = timed(lambda: save(work / "sha.pt"), drop, warm_save)
            with variant(crc=True):
                _, sample["crc_cpu"] = timed(lambda: save(work / "crc.pt"), drop, warm_save)
            raw_load(sync_path, sizes, weights)  # both read from a warm page cache
            reads = [("raw_load", lambda: raw_load(sync_path, sizes, weights)),
                     ("load", lambda: training.load_checkpoint(sync_path, model=model, optimizer=optimizer,
                                                               restore_rng=False))]
            for name, fn in reads if round_ % 2 else reads[::-1]:
                sample[name], _ = timed(fn, False)
            sample["copy"], _ = timed(lambda: [t.clone() for t in state_tensors(model, optimizer)], False)
            info = run.save_checkpoint(model=model, optimizer=optimizer, step=round_, path=async_path,
                                       async_=True)
            sample["stall"] = info.block_s
            sample["async_write"] = run.wait_for_checkpoint().write_s
            for key, value in sample.items() if round_ else ():
                times.setdefault(key, []).append(value)
            say(f"round {round_}{' (warm-up)' if not round_ else ''}: " + "  ".join(f"{k} {v:.3f}" for k, v in sample.items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in times.items()}
    size_mb = len(blob) / 1e6
    cache = "cold" if drop else "warm"
    figures = [
        ratio_figure(f"ckpt save {size_mb:.0f}MB vs raw write+fsync, {cache}",
                     med["save"], med["raw"], "s", "<= 1.11x"),
        ratio_figure(f"ckpt save {size_mb:.0f}MB vs raw write+fsync, CPU", med["save_cpu"], med["raw_cpu"],
                     "s", "<= 1.5x"),
        ratio_figure("ckpt save CPU, xxh3 vs sha256 digest", med["save_cpu"], med["sha256_cpu"], "s", "<= 0.8x"),
        ratio_figure("ckpt save CPU, torch CRC32 off vs on", med["save_cpu"], med["crc_cpu"], "s", "<= 0.9x"),
        ratio_figure("ckpt load vs raw read + copy into model", med["load"], med["raw_load"], "s", "<= 1.5x"),
        ratio_figure("ckpt async stall vs bare copy to CPU", med["stall"], med["copy"], "s", "<= 1.5x"),
    ]
    say(f"note: checkpoint bench: {size_mb:.0f} MB file, {rounds} rounds, medians; "
        f"{filesystem_of(Path(args.dir or tempfile.gettempdir()))} filesystem; page cache "
        f"{'dropped before each write' if drop else 'NOT dropped (' + cannot_drop + ')'}; "
        f"digest {digest.fast_algorithm()}; load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} CPUs; torch {torch.__version__}")
    say(f"note: sync save {size_mb / 1e3 / med['save']:.2f} GB/s, raw write {size_mb / 1e3 / med['raw']:.2f} GB/s"
        f" = throughput {med['raw'] / med['save']:.2f}x the raw write; async background write "
        f"{med['async_write']:.3f} s")
    report(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
