"""Records from TensorBoard event files a run writes (`[metrics] tensorboard`).

A Lightning or Hugging Face user who already logs to TensorBoard should need
no regex at all. The event files are tailed incrementally with the
tensorboard package's own reader (`EventFileLoader`: it keeps its offset and
waits for a torn record to be completed), one loader per file; new files that
match the glob are picked up every few polls, and at the run's last read. Only scalars are read; each
event becomes a record `{"t": wall_time, "step": step, name: value}`.

Tag names become metric names: an explicit `[metrics.tags]` entry first;
else `train/X` -> `X`, `eval/X` -> `eval_X`, `val/X` -> `val_X`, any other
`A/B` -> `A_B`, and a tag without a slash stays as it is (Lightning's
`train_loss`). So HF's `train/loss` is `loss` and `eval/loss` is `eval_loss`,
the names its printed dicts use.

tensorboard is an optional extra and is imported only when a campaign asks
for it (never by `import tui.engine`); its reader needs no torch. If it is
missing, the feed reports one problem and yields nothing, it never raises.
"""

from __future__ import annotations

from pathlib import Path

RESCAN_EVERY = 8  # polls between two looks for new event files
MAX_EVENTS = 20_000  # events read per poll: bounds one poll's work
MISSING = ("metrics.tensorboard: the tensorboard package is not installed; "
           "pip install 'itera-tui[tensorboard]'")


def metric_name(tag: str, tags: dict[str, str]) -> str:
    if tag in tags:
        return tags[tag]
    head, sep, tail = tag.partition("/")
    if not sep:
        return tag
    if head == "train":
        return tail.replace("/", "_")
    return tag.replace("/", "_")


class TensorBoardFeed:
    def __init__(self, run_dir: Path, glob: str, tags: tuple[tuple[str, str], ...] = ()):
        self.run_dir = Path(run_dir)
        self.glob = glob
        self.tags = dict(tags)
        self.records = 0
        self.bad_lines = 0
        self.problems: list[str] = []
        self.more = False
        self._loaders: dict[Path, object] = {}
        self._polls = 0
        self._look = False
        self._api = None

    def _load_api(self):
        if self._api is None:
            try:
                from tensorboard.backend.event_processing.event_file_loader import (
                    EventFileLoader)
                from tensorboard.util import tensor_util
            except ImportError:
                if MISSING not in self.problems:
                    self.problems.append(MISSING)
                self._api = False
            else:
                self._api = (EventFileLoader, tensor_util)
        return self._api

    def _scan(self, loader_cls) -> None:
        try:
            paths = sorted(p for p in self.run_dir.glob(self.glob) if p.is_file())
        except (OSError, ValueError):
            return
        for path in paths:
            if path not in self._loaders:
                try:
                    self._loaders[path] = loader_cls(str(path))
                except Exception as exc:  # the reader's own errors: report, go on
                    self.problems.append(f"tensorboard: cannot read {path.name}: {exc}")
                    self._loaders[path] = None

    def poll(self) -> list[dict]:
        api = self._load_api()
        if not api:
            return []
        loader_cls, tensor_util = api
        if self._polls % RESCAN_EVERY == 0 or self.more or self._look:
            self._scan(loader_cls)
            self._look = False
        self._polls += 1
        out: list[dict] = []
        budget = MAX_EVENTS
        self.more = False
        for path, loader in self._loaders.items():
            if loader is None:
                continue
            try:
                for event in loader.Load():
                    record = self._record(event, tensor_util)
                    if record is not None:
                        out.append(record)
                    budget -= 1
                    if budget <= 0:
                        self.more = True
                        break
            except Exception as exc:  # a damaged file: count it, keep the engine alive
                self.bad_lines += 1
                self.problems.append(f"tensorboard: {path.name}: {exc}")
                self._loaders[path] = None
            if self.more:
                break
        self.records += len(out)
        return out

    def look_again(self) -> None:
        """Look for new event files at the next poll, whatever the rescan period: the
        run's last read (a short run whose SummaryWriter made its file after the last
        look would otherwise end with none of its scalars read)."""
        self._look = True

    def _record(self, event, tensor_util) -> dict | None:
        record: dict = {}
        for value in event.summary.value:
            number = _scalar(value, tensor_util)
            if number is None:
                continue
            record[metric_name(value.tag, self.tags)] = number
        if not record:
            return None
        record["t"] = float(event.wall_time)
        if 0 <= event.step < 2 ** 63:
            record["step"] = int(event.step)
        record["source"] = "tensorboard"
        return record


def _scalar(value, tensor_util) -> float | None:
    """A scalar summary's value (old-style simple_value or a 0-d numeric tensor)."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor" or value.tensor.tensor_shape.dim:
        return None
    try:
        array = tensor_util.make_ndarray(value.tensor)
    except (ValueError, TypeError):  # a tensor proto with a dtype or content numpy refuses
        return None
    if array.dtype.kind not in "fiu" or array.size != 1:
        return None
    return float(array.item())
