"""The campaign plan as frozen dataclasses.

A Plan is what `campaign.toml` means once validated: every other layer reads
these objects, never the raw TOML, so a key is interpreted in one place only.
Durations are stored in hours (floats); the loader converts minutes/days.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .retry import RetryPolicy

CATEGORIES = ("mandatory", "useful", "exploratory")
THIS_BOX = "this box"  # the box itera-tui was started on: every lot without `host`
CATEGORY_RANK = {name: rank for rank, name in enumerate(CATEGORIES)}


@dataclass(frozen=True)
class Campaign:
    """`[campaign]`: the question, the decision metric and the bar a variant must clear."""
    name: str
    question: str
    metric: str
    direction: str  # "max" | "min"
    min_gain: float
    threshold: float | None
    control: str  # id of the control variant
    outputs: str
    wrapup_hours: float
    retrieval_hours: float
    link_mbps: float
    prior: str | None = None  # bundle of an earlier campaign to calibrate from
    calibrated: bool = False  # plan with the prior's calibrated durations


@dataclass(frozen=True)
class Window:
    """The rental window's start; its length is the lots' duration."""
    start: Any | None  # datetime or None (first launch on the box)


@dataclass(frozen=True)
class Lot:
    """One `[[lot]]`: a rented GPU type for a duration and a price, split into lanes."""
    id: str
    gpu: str
    hours: float
    price_usd: float
    gpus: int
    devices: tuple[int, ...]  # CUDA device indices on the box, one per lane
    price_source: str  # "catalog" | "explicit"
    order: str | None = None  # the rental's order reference, for the notebook
    host: Any = None  # campaign.destination.Destination; None: this box
    dir: str | None = None  # the campaign folder on `host` (relative: from its home)
    python: str | None = None  # the interpreter itera-tui is installed in on `host`
    # (None: `python3` on the PATH of a non-interactive ssh session there)

    @property
    def days(self) -> float:
        return self.hours / 24.0

    @property
    def cpu(self) -> bool:
        """`gpu = "CPU"`: a lot without a GPU (the starter template's, a test's), where a
        rule on GPU utilisation (`gpu_idle`) has nothing to watch and no effect."""
        return self.gpu.strip().lower() == "cpu"

    @property
    def box(self) -> str:
        """Which box the lot is: its ssh destination as written, or "this box"."""
        return self.host.label if self.host is not None else THIS_BOX


@dataclass(frozen=True)
class Expense:
    """One `[[expense]]`: money spent outside the lots, counted in the budget."""
    name: str
    usd: float


@dataclass(frozen=True)
class Corpus:
    """`[corpus]`: the fixed input every variant reads, each file pinned by its sha256."""
    root: str
    files: tuple[tuple[str, str], ...]  # (relative path, pinned sha256)
    max_len: int | None
    read_only: bool = False  # declared input kept outside the campaign folder


@dataclass(frozen=True)
class Step:
    """One `[[step]]`: a check, a preparation or a post task, done by a machine or a person."""
    id: str
    who: str  # "human" | "machine"
    hours: float
    after: tuple[str, ...]
    command: tuple[str, ...]
    kind: str  # "prepare" | "data_check" | "resume_check" | "wrapup"
    gpus: int


@dataclass(frozen=True)
class Variant:
    """One `[[variant]]`: a training command with its category, priority and duration."""
    id: str
    category: str
    priority: int
    command: tuple[str, ...]
    params: tuple[tuple[str, Any], ...]
    hours: float
    steps: int | None
    gpus: int
    after: tuple[str, ...]
    pilot_hours: float | None = None  # calibrated from a prior bundle; None: derived
    # `[retry]` with this variant's own `retry = {...}` keys over it (None: no [retry])
    retry: RetryPolicy | None = None

    @property
    def optional(self) -> bool:
        return self.category != "mandatory"

    @property
    def params_dict(self) -> dict[str, Any]:
        return dict(self.params)


@dataclass(frozen=True)
class Pilot:
    """`[pilot]`: how long each variant's pilot runs, and who takes the decision after."""
    steps: int | None
    hours: float | None
    decide: str  # "ask" | "continue"
    decision_hours: float
    # with decide = "ask": the engine takes `default` when nobody answered this long
    # after the decision point opened (None: it waits for a person, however long)
    decide_after_minutes: float | None = None
    default: str = "continue"  # continue | wrapup | drop-stopped


DEFAULT_STARTUP_MINUTES = 30.0  # `[[stop]] rule = "stall"`'s start-up limit when none given
DEFAULT_BASELINE_RECORDS = 5  # `[[stop]] rule = "diverged"`: the first figures it judges by
# `[[stop]] rule = "gpu_idle"`: the shortest window it accepts (a few NVML samples of a
# checkpoint write or an evaluation pass sit at 0 % for a minute or two: a shorter window
# would stop healthy runs), and the floor when `below_percent` is not given
GPU_IDLE_MIN_MINUTES = 3.0
DEFAULT_IDLE_PERCENT = 5.0


@dataclass(frozen=True)
class StopRule:
    """One `[[stop]]`: a rule the engine applies to every record of the runs it names."""
    rule: str  # non_finite | threshold | truncation | resume | stall | diverged | gpu_idle
    metrics: tuple[str, ...] = ()
    metric: str | None = None
    below: float | None = None
    above: float | None = None
    from_step: int = 0
    max: float = 0.0
    within_minutes: float | None = None
    minutes: float | None = None
    variants: tuple[str, ...] = ()  # empty: applies to every run
    # `stall` only: how long a process may go without its FIRST record (importing,
    # loading a model, a torchrun rendezvous); None: `startup_limit_minutes`' default
    startup_minutes: float | None = None
    # `diverged` only: `metric` above `factor` times its baseline, the median of its
    # first `baseline_records` finite figures
    factor: float | None = None
    baseline_records: int = DEFAULT_BASELINE_RECORDS
    # `gpu_idle` only (with `minutes`, its window): the run's GPUs all under this
    # utilisation, in percent, for the whole window
    below_percent: float | None = None

    def applies_to(self, variant_id: str) -> bool:
        return not self.variants or variant_id in self.variants

    @property
    def startup_limit_minutes(self) -> float:
        """The start-up limit a `stall` rule applies before the first record: the plan's
        `startup_minutes`, else a generous default (30 min, or the stall limit when that
        is longer), so a slow import or model load is never taken for a stall."""
        if self.startup_minutes is not None:
            return self.startup_minutes
        return max(DEFAULT_STARTUP_MINUTES, self.minutes or 0.0)




STREAMS = ("stdout", "stderr")  # the run's printed streams, as files in its directory


@dataclass(frozen=True)
class MetricPattern:
    """One metric read from printed text: group 1 (or the first group that took part)."""

    name: str
    pattern: str
    streams: tuple[str, ...] = STREAMS


@dataclass(frozen=True)
class PairPattern:
    """A preset's catch-all: every `name`, `value` pair (the two groups of `pair`)
    found in group 1 of `within`, so metrics a user named themselves are read too."""

    within: str
    pair: str
    streams: tuple[str, ...] = STREAMS
    ignore: tuple[str, ...] = ()


@dataclass(frozen=True)
class MetricsSpec:
    """How a run's metrics are read besides the SDK's JSONL: `[metrics]` resolved,
    a preset's patterns merged with the user's (the user's win, name by name)."""

    preset: str | None = None
    patterns: tuple[MetricPattern, ...] = ()
    pairs: tuple[PairPattern, ...] = ()
    aliases: tuple[tuple[str, tuple[str, ...]], ...] = ()  # name <- first of these present
    watch: tuple[str, ...] = ("loss",)  # what `non_finite` watches when it names none
    tensorboard: str | None = None  # glob relative to the run directory
    tags: tuple[tuple[str, str], ...] = ()  # explicit TensorBoard tag -> metric name

    @property
    def printed(self) -> bool:
        return bool(self.patterns or self.pairs)

    @property
    def names(self) -> frozenset[str]:
        """Every metric name this spec can produce by name (pairs add more at run time)."""
        return frozenset([p.name for p in self.patterns] + list(self.watch)
                         + [name for name, _ in self.aliases] + [n for _, n in self.tags])

    @classmethod
    def from_pairs(cls, pairs) -> "MetricsSpec":
        """From `(name, regex)` pairs (the form `[metrics]` had before presets)."""
        return cls(patterns=tuple(MetricPattern(name, pattern) for name, pattern in pairs))


@dataclass(frozen=True)
class Checkpoint:
    """`[checkpoint]`: how often runs are asked to checkpoint, and what to watch for."""
    every_minutes: float | None  # None with auto=True: Young/Daly from measured cost
    auto: bool
    tolerable_loss_minutes: float | None
    mtbf_hours: float
    # globs, relative to each run directory, of checkpoints the user's code writes itself
    watch: tuple[str, ...] = ()


@dataclass(frozen=True)
class Deliverables:
    """`[deliverables]`: the files an accepted run must leave, and what one is called."""
    files: tuple[str, ...]
    unit: str


@dataclass(frozen=True)
class StorePlan:
    """`[store]`: where the campaign is kept off the box as it happens, one fsspec URL
    (`s3://bucket/prefix`, `sftp://user@host/path`, `file:///mnt/volume/x`) and the
    filesystem's options (endpoint, profile, region: never a secret; credentials come
    from where the storage library already looks). Each lot's box writes under
    `<url>/<lot>/` (tui.store.layout)."""
    url: str
    options: tuple[tuple[str, Any], ...] = ()
    bundle_mb: float | None = None  # the bundle's expected size: `check --store` times it
    # the delivery (upload + read-back at the store) in hours, once measured (check --store,
    # or the mirror's own transfers): the calendar's last interval and the engine's margin
    delivery_hours: float | None = None

    @property
    def options_dict(self) -> dict[str, Any]:
        return dict(self.options)

    @property
    def scheme(self) -> str:
        return self.url.split("://", 1)[0] if "://" in self.url else "file"


@dataclass(frozen=True)
class Plan:
    """A whole campaign file, checked: what the engine drives and every face shows."""
    path: Path  # the campaign.toml it came from
    campaign: Campaign
    window: Window
    lots: tuple[Lot, ...]
    expenses: tuple[Expense, ...]
    corpus: Corpus | None
    steps: tuple[Step, ...]
    variants: tuple[Variant, ...]
    pilot: Pilot | None
    stops: tuple[StopRule, ...]
    metrics: MetricsSpec  # `[metrics]`: printed patterns, preset, TensorBoard
    checkpoint: Checkpoint
    deliverables: Deliverables
    grace_seconds: float
    # a box that announces its end (a system SIGTERM): how long the engine waits for each
    # live run's checkpoint before it goes (systemd gives 90 s, a spot notice 30 s to 2 min)
    shutdown_grace_seconds: float = 60.0
    # `[engine] preemption`: where the provider posts its notice that the box is to go
    # ("aws", "gcp", "azure" or an http(s) URL; tui.service.preemption polls it), or None
    preemption: str | None = None
    raw: dict = field(repr=False, compare=False, hash=False, default_factory=dict)
    calibration: Any = None  # campaign.calibration.Calibration, when a prior was read
    notify: Any = None  # campaign.notify_plan.NotifyPlan: `[notify]`, when given
    store: StorePlan | None = None  # `[store]`: the off-box copy, when given
    retry: RetryPolicy | None = None  # `[retry]`: the hiccups a failed run is retried on
    # after the start, the plan is the frozen one (.itera/plan.toml); these keys of
    # campaign.toml were edited since (campaign.frozen), named wherever results are shown
    edited_keys: tuple[str, ...] = field(default=(), compare=False)

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def state_dir(self) -> Path:
        return self.root / ".itera"

    @property
    def outputs_dir(self) -> Path:
        return self.root / self.campaign.outputs

    def variant(self, variant_id: str) -> Variant:
        for v in self.variants:
            if v.id == variant_id:
                return v
        raise KeyError(variant_id)

    def retry_for(self, target: str) -> RetryPolicy | None:
        """The retry policy of a variant (its own keys over `[retry]`), or of a step
        (`[retry]` itself); None when nothing is retried."""
        try:
            return self.variant(target).retry
        except KeyError:
            return self.retry

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    @cached_property
    def _post_step_ids(self) -> frozenset[str]:
        from .graph import steps_after_variants

        return frozenset(steps_after_variants(self.steps, {v.id for v in self.variants}))

    def post_step_ids(self) -> frozenset[str]:
        """Steps that run after the variants; the rest run before the pilot.
        Asked on every engine tick, computed once per (frozen) plan."""
        return self._post_step_ids

    def split_steps(self) -> tuple[list[Step], list[Step]]:
        """(steps before the pilot, steps after the variants), in file order."""
        post = self.post_step_ids()
        return ([s for s in self.steps if s.id not in post],
                [s for s in self.steps if s.id in post])

    @property
    def window_hours(self) -> float:
        return max((lot.hours for lot in self.lots), default=0.0)

    def without_variants(self, dropped: set[str]) -> "Plan":
        """A copy with some optional variants removed (advice, re-planning)."""
        from dataclasses import replace

        kept = tuple(v for v in self.variants if v.id not in dropped)
        cleaned = tuple(
            replace(v, after=tuple(a for a in v.after if a not in dropped)) for v in kept
        )
        return replace(self, variants=cleaned)

    def order_references(self) -> list[dict]:
        """Each lot's order reference (None when not given), for check, report, manifest."""
        return [{"lot": lot.id, "gpu": lot.gpu, "gpus": lot.gpus, "days": round(lot.days, 4),
                 "price_usd": lot.price_usd, "order": lot.order} for lot in self.lots]

    def with_lots(self, lots: tuple[Lot, ...]) -> "Plan":
        from dataclasses import replace

        return replace(self, lots=lots)
