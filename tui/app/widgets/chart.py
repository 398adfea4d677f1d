"""Loss chart of the selected run (or of every run, on one chart).

The threshold the stop rules announce is drawn as a dotted row, so a person
sees how close a curve runs to being stopped. Histories arrive already bounded
(LiveView keeps a few thousand points) and are reduced to one envelope per
pixel column here, so drawing costs the same on day three as on minute one.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from ..chart_model import render_chart
from ..format import axis, clip, number
from .base import ModelPanel

Y_LABEL_W = 7
SERIES_STYLES = 6


@dataclass(frozen=True)
class ChartModel:
    title: str
    series: tuple  # ((label, ((x, y), ...)), ...)
    thresholds: tuple  # ((value, label), ...)
    x_name: str = "step"


class LossChart(ModelPanel):
    COMPONENT_CLASSES = {"chart--title", "chart--axis", "chart--threshold"} | {
        f"chart--s{i}" for i in range(SERIES_STYLES)}

    def render(self) -> Text:
        m: ChartModel | None = self.model
        width, height = max(1, self.size.width), max(1, self.size.height)
        if m is None:
            return Text("no run selected")
        title = Text(no_wrap=True, overflow="crop")
        title.append(clip(m.title, width), self.style_of("chart--title"))
        if len(m.series) > 1:
            for i, (label, _) in enumerate(m.series):
                title.append(f" ■{label}", self.style_of(f"chart--s{i % SERIES_STYLES}"))
        for value, label in m.thresholds:
            title.append(f"  ┄ {label} {number(value)}", self.style_of("chart--threshold"))
        if height < 3:
            return title
        plot_w, plot_h = width - Y_LABEL_W, height - 2
        grid = render_chart([pts for _, pts in m.series], [v for v, _ in m.thresholds],
                            plot_w, plot_h)
        out = Text(no_wrap=True, overflow="crop")
        out.append_text(title)
        if grid is None:
            out.append("\n" + "waiting for the first record…")
            return out
        axis_style = self.style_of("chart--axis")
        for r, row in enumerate(grid.cells):
            out.append("\n")
            if r == 0:
                label = number(grid.y_max)
            elif r == len(grid.cells) - 1:
                label = number(grid.y_min)
            else:
                label = ""
            out.append(f"{label[:Y_LABEL_W - 1]:>{Y_LABEL_W - 1}}│", axis_style)
            run_owner, run = None, []
            for ch, owner in row:
                if owner != run_owner and run:
                    out.append("".join(run), self._owner_style(run_owner))
                    run = []
                run_owner = owner
                run.append(ch)
            if run:
                out.append("".join(run), self._owner_style(run_owner))
        left = f"{m.x_name} {axis(grid.x_min)}"
        right = f"{axis(grid.x_max)}" + (" (log y)" if grid.log else "")
        gap = max(1, plot_w - len(left) - len(right))
        out.append("\n" + " " * (Y_LABEL_W - 1) + "└" + left + " " * gap + right, axis_style)
        return out

    def _owner_style(self, owner):
        if owner is None:
            return None
        if owner == -1:
            return self.style_of("chart--threshold")
        return self.style_of(f"chart--s{owner % SERIES_STYLES}")
