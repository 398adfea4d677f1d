"""Lot prices and the budget against the useful result.

A lot's price covers its whole duration and all of its GPUs (a B200 lot with
two GPUs is one price). Only catalog prices are known; any other GPU needs an
explicit `price_usd`, never an invented hourly rate. Other expenses stay apart
from the rental. Cost per accepted deliverable counts distinct configurations
once; with none accepted the ratio is undefined and the incurred cost and the
rejection causes are reported instead, never a zero cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

# IteraGPU catalog: (normalised gpu name, days) -> price in USD.
CATALOG: dict[tuple[str, int], float] = {
    ("rtx4090", 3): 47.14,
    ("rtx4090", 7): 110.0,
    ("rtx4090", 30): 390.0,
}


def gpu_key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum()).removeprefix("nvidia")


def catalog_price(gpu: str, days: float) -> float | None:
    if abs(days - round(days)) > 1e-9:
        return None
    return CATALOG.get((gpu_key(gpu), int(round(days))))


def catalog_durations(gpu: str) -> list[tuple[int, float]]:
    """(days, price) offers for this GPU, shortest first."""
    key = gpu_key(gpu)
    return sorted((d, p) for (g, d), p in CATALOG.items() if g == key)


def money(value: float) -> float:
    """Round to cents for display and comparisons (no float noise like 94.28000001)."""
    return round(value + 0.0, 2)


@dataclass(frozen=True)
class Cost:
    """What the campaign costs: the lots and the other expenses."""
    lots: float
    expenses: float

    @property
    def total(self) -> float:
        return money(self.lots + self.expenses)

    def to_dict(self) -> dict:
        return {"lots": money(self.lots), "expenses": money(self.expenses), "total": self.total}


def plan_cost(plan) -> Cost:
    return Cost(lots=money(sum(l.price_usd for l in plan.lots)),
                expenses=money(sum(e.usd for e in plan.expenses)))


@dataclass(frozen=True)
class Rejection:
    """A run that delivered nothing accepted, and why: the budget names it."""
    run_id: str
    cause: str


@dataclass(frozen=True)
class RetriedAttempt:
    """An attempt that failed on a hiccup and was retried (`[retry]`): the GPU time it
    burned and that time's share of its lot's price, counted against the result."""
    run_id: str
    cause: str
    gpu_hours: float
    usd: float

    def text(self) -> str:
        return (f"{self.run_id}: {self.cause} ({self.gpu_hours:.3g} GPU-h, "
                f"{self.usd:.2f} USD of the rental)")


def lot_share_usd(lot, gpu_hours: float) -> float:
    """What `gpu_hours` of a lot cost: its price over its GPU-hours (price covers all)."""
    held = lot.gpus * lot.hours
    return money(lot.price_usd * gpu_hours / held) if held > 0 else 0.0


@dataclass(frozen=True)
class DeliverableBudget:
    """Cost per accepted deliverable, or why there is none."""

    rental_usd: float
    expenses_usd: float
    accepted: tuple[str, ...]  # distinct configurations accepted
    per_deliverable_usd: float | None  # None: undefined (zero accepted)
    rejections: tuple[Rejection, ...]
    unit: str = "deliverable"
    retried: tuple[RetriedAttempt, ...] = ()  # attempts a hiccup cost (`[retry]`)

    @property
    def retried_usd(self) -> float:
        return money(sum(a.usd for a in self.retried))

    @property
    def incurred_usd(self) -> float:
        return money(self.rental_usd + self.expenses_usd)

    @property
    def defined(self) -> bool:
        return self.per_deliverable_usd is not None

    def to_dict(self) -> dict:
        return {
            "rental_usd": money(self.rental_usd),
            "expenses_usd": money(self.expenses_usd),
            "incurred_usd": self.incurred_usd,
            "unit": self.unit,
            "accepted": len(self.accepted),
            "accepted_configs": list(self.accepted),
            "per_deliverable_usd": self.per_deliverable_usd,
            "ratio": "defined" if self.defined else "undefined",
            "rejections": [{"run_id": r.run_id, "cause": r.cause} for r in self.rejections],
            # only when a hiccup cost an attempt: a budget without one reads as it always did
            **({"retried": [vars(a) for a in self.retried], "retried_usd": self.retried_usd,
                "retried_text": self.retried_text()} if self.retried else {}),
        }

    def retried_text(self) -> str:
        """The attempts hiccups cost, in one line ("" when none)."""
        if not self.retried:
            return ""
        gpu_h = sum(a.gpu_hours for a in self.retried)
        return (f"{len(self.retried)} failed attempt{'s' if len(self.retried) != 1 else ''} "
                f"retried, {gpu_h:.3g} GPU-h ({self.retried_usd:.2f} USD of the rental): "
                + "; ".join(a.text() for a in self.retried))

    def summary(self) -> str:
        if self.defined:
            return (f"{self.per_deliverable_usd:.2f} USD per accepted {self.unit} "
                    f"({len(self.accepted)} accepted, rental {self.rental_usd:.2f} USD; "
                    f"other expenses {self.expenses_usd:.2f} USD apart)")
        causes = "; ".join(f"{r.run_id}: {r.cause}" for r in self.rejections) or "no run finished"
        return (f"cost per accepted {self.unit}: undefined (0 accepted); incurred "
                f"{self.incurred_usd:.2f} USD (rental {self.rental_usd:.2f} + expenses "
                f"{self.expenses_usd:.2f}); rejected: {causes}")


def deliverable_budget(rental_usd: float, expenses_usd: float,
                       accepted_configs: Iterable[str],
                       rejections: Iterable[Rejection] = (),
                       unit: str = "deliverable",
                       retried: Iterable[RetriedAttempt] = ()) -> DeliverableBudget:
    """Accepted deliverables are identified by configuration: repeats count once."""
    distinct = tuple(dict.fromkeys(accepted_configs))
    ratio = money(rental_usd / len(distinct)) if distinct else None
    return DeliverableBudget(rental_usd=money(rental_usd), expenses_usd=money(expenses_usd),
                             accepted=distinct, per_deliverable_usd=ratio,
                             rejections=tuple(rejections), unit=unit,
                             retried=tuple(retried))
