"""Header: the campaign, the rental-window countdown, the slack and the decision.

The slack is what a person checks first: green while the projected end leaves
at least 10 % of the window, amber under that, red once the plan no longer
fits. Words say it too ('ok', 'tight', 'OVER by'), so NO_COLOR loses nothing.
Once the runs are over the third line leads with the verdict; once the bundle
is verified (`done`) the header says the cost per accepted deliverable and
that the box can be released, the values first so a narrow pane cuts only
the explanation after them.
"""

from __future__ import annotations

from rich.text import Text

from ..format import clip
from ..room import HeaderModel
from .base import ModelPanel


class RoomHeader(ModelPanel):
    COMPONENT_CLASSES = {"header--title", "header--question", "header--ok", "header--tight",
                         "header--over", "header--unknown", "header--pending",
                         "header--done", "header--paused", "header--dim", "header--yes",
                         "header--no", "header--inconclusive"}

    def render(self) -> Text:
        m: HeaderModel | None = self.model
        width = max(1, self.size.width)
        if m is None:
            return Text("itera-tui: starting…")
        s = self.style_of
        line1 = Text(no_wrap=True, overflow="ellipsis")
        line1.append(clip(m.title, width), s("header--title"))
        line1.append(clip(f" — {m.question}", max(0, width - len(m.title))),
                     s("header--question"))
        line2 = Text(no_wrap=True, overflow="ellipsis")
        if m.done:
            line2.append("✓ bundle verified", s("header--done"))
            line2.append(f" · {m.release}", s("header--ok"))
        else:
            line2.append("⏳ " + m.time_left, s(f"header--{m.level}"))
            line2.append(f" · window ends {m.window_end_local} ({m.window_end_utc})",
                         s("header--dim"))
            if m.wrapup:
                line2.append(f" · {m.wrapup}", s("header--pending"))
            elif m.checkpoint_every:
                line2.append(f" · {m.checkpoint_every}", s("header--dim"))
        if m.store:
            line2.append(f" · {m.store}", s(f"header--{m.store_level}"))
        line3 = Text(no_wrap=True, overflow="ellipsis")
        if m.verdict:
            line3.append(m.verdict, s(f"header--{m.verdict_kind}"))
            if m.budget:
                line3.append(f" · {m.budget}", s("header--done"))
            elif m.wrapup:
                line3.append(f" · {m.wrapup}", s("header--pending"))
            line3.append(f" · {m.decision}", s("header--dim"))
        else:
            line3.append(f"end {m.projected_end} · slack ", s("header--dim"))
            line3.append(m.slack, s(f"header--{m.level}"))
            if m.decision_level != "pending":
                line3.append(f" · phase {m.phase}", s("header--dim"))
            if m.paused:
                line3.append(" · PAUSED", s("header--paused"))
            line3.append(" · ")
            line3.append(m.decision, s(f"header--{m.decision_level}"
                                       if m.decision_level != "info" else "header--dim"))
        out = Text("\n").join([line1, line2, line3])
        out.no_wrap = True
        out.overflow = "ellipsis"
        return out
