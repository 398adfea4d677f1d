"""An answer to the decision point, as one typed value from the face to the ledger.

The room's keys, `itera-tui decide`, the headless `--decide` flag, the plan's
`[pilot] decide` and the deadline's default all build a `Decision`; the session,
the wire and the engine pass it on and the engine records it (`decision_taken`).
Text becomes a `Decision` at the command line and nowhere else a person types;
`text` / `parse` here are its one serialisation, the form the command line takes,
the wire's `decide` action carries and the ledger's `decision_pending.auto` holds
(`drop:a,b`), unchanged from the releases that passed strings around.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...campaign.plan import Plan
from ..errors import EngineError
from ..ledger.events import DecisionKind

DROP_PREFIX = DecisionKind.DROP.value + ":"  # `drop:ID[,ID]`: the one place it is spelt


@dataclass(frozen=True)
class Decision:
    """continue, wrap up, or drop these optional variants (then continue)."""

    kind: DecisionKind
    variants: tuple[str, ...] = ()  # only for DROP: at least one

    def __post_init__(self):
        object.__setattr__(self, "kind", DecisionKind(self.kind))
        object.__setattr__(self, "variants", tuple(self.variants))
        if self.kind is DecisionKind.DROP and not self.variants:
            raise EngineError(f"a drop needs at least one variant id ({DROP_PREFIX}ID[,ID])")
        if self.kind is not DecisionKind.DROP and self.variants:
            raise EngineError(f"{self.kind.value} names no variant")

    @classmethod
    def drop(cls, *variants: str) -> "Decision":
        return cls(DecisionKind.DROP, tuple(variants))

    @classmethod
    def parse(cls, text: str) -> "Decision":
        """`continue` | `drop:ID[,ID]` | `wrapup`; an EngineError names what is wrong."""
        if text.startswith(DROP_PREFIX):
            return cls.drop(*(v for v in text[len(DROP_PREFIX):].split(",") if v))
        if text not in (DecisionKind.CONTINUE, DecisionKind.WRAPUP):
            raise EngineError(f"unknown decision {text!r}: expected continue, "
                              f"{DROP_PREFIX}ID[,ID] or wrapup")
        return cls(DecisionKind(text))

    @property
    def text(self) -> str:
        """The form `parse` reads (the command line, the wire, the ledger's `auto`)."""
        if self.kind is DecisionKind.DROP:
            return DROP_PREFIX + ",".join(self.variants)
        return self.kind.value

    @property
    def words(self) -> str:
        """As a person reads it: `drop a,b, then continue`, `wrap up`, `continue`."""
        if self.kind is DecisionKind.DROP:
            return f"drop {','.join(self.variants)}, then continue"
        return "wrap up" if self.kind is DecisionKind.WRAPUP else self.kind.value

    def check(self, plan: Plan) -> "Decision":
        """Itself, when the plan allows it (every variant dropped is optional); else an
        EngineError. Checked before anything launches too (`--decide`), so a typo costs
        no GPU hour: it is refused at start, not after the pilot."""
        for vid in self.variants:
            check_droppable(plan, vid)
        return self


CONTINUE = Decision(DecisionKind.CONTINUE)
WRAPUP = Decision(DecisionKind.WRAPUP)


def check_droppable(plan: Plan, vid: str) -> None:
    """An EngineError unless `vid` is an optional variant of the plan."""
    try:
        variant = plan.variant(vid)
    except KeyError:
        raise EngineError(f"no variant {vid!r} to drop") from None
    if not variant.optional:
        raise EngineError(f"cannot drop {vid!r}: it is mandatory (needed to conclude); "
                          "only useful or exploratory variants can be dropped")
