"""Loss chart of the selected run (or of every run, on one chart).

The threshold the stop rules announce is drawn as a dotted row, so a person
sees how close a curve runs to being stopped. A diverged run is clipped (its
clipped values never set the scale) and marked ▲ at the top edge. Histories arrive already bounded
(LiveView keeps a few thousand points) and are reduced to one envelope per
pixel column here, so drawing costs the same on day three as on minute one.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from ..chart_model import render_chart
from ..format import axis, clip, number
from .base import ModelPanel

Y_LABEL_W = 6  # most cells a y label takes (numbers shorten to fit)
SERIES_STYLES = 6


@dataclass(frozen=True)
class ChartModel:
    """What the chart shows: its series and thresholds, built off the UI thread."""
    title: str
    series: tuple  # ((label, ((x, y), ...)), ...)
    thresholds: tuple  # ((value, label), ...)
    x_name: str = "step"
    clip_marks: tuple = ()  # ((series index, x), ...): where a diverged run was clipped
    unscaled: tuple = ()  # series indices that do not set the y range (diverged runs)
    empty: str = "waiting for the first record…"  # said when there is no point to draw


class LossChart(ModelPanel):
    can_focus = True
    COMPONENT_CLASSES = {"chart--title", "chart--axis", "chart--threshold"} | {
        f"chart--s{i}" for i in range(SERIES_STYLES)}

    def _title(self, m: ChartModel, width: int) -> Text:
        """The title, then legend items and bounds, each whole or left out ('+2 more')."""
        title = Text(no_wrap=True, overflow="crop")
        title.append(clip(m.title, width), self.style_of("chart--title"))
        items = []
        if len(m.series) > 1:
            items += [(f" ■{label}", f"chart--s{i % SERIES_STYLES}")
                      for i, (label, _) in enumerate(m.series)]
        items += [(f"  ┄ {label} {number(value)}", "chart--threshold")
                  for value, label in m.thresholds]
        used = len(title.plain)
        for k, (text, style) in enumerate(items):
            left = len(items) - k - 1
            reserve = len(f" +{left}") if left else 0
            if used + len(text) + reserve > width:
                title.append(f" +{len(items) - k}", self.style_of("chart--axis"))
                break
            title.append(text, self.style_of(style))
            used += len(text)
        return title

    def render(self) -> Text:
        m: ChartModel | None = self.model
        width, height = max(1, self.size.width), max(1, self.size.height)
        if m is None:
            return Text("no run selected")
        title = self._title(m, width)
        if height < 3:
            return title
        out = Text(no_wrap=True, overflow="crop")
        out.append_text(title)
        label_w = Y_LABEL_W
        grid = None
        for _ in range(2):  # the labels' width depends on the range, the range on the width
            grid = render_chart([pts for _, pts in m.series], [v for v, _ in m.thresholds],
                                max(1, width - label_w - 1), height - 2,
                                clip_marks=m.clip_marks, unscaled=m.unscaled)
            if grid is None:
                break
            need = max(len(number(grid.y_max, Y_LABEL_W)), len(number(grid.y_min, Y_LABEL_W)))
            if need == label_w:
                break
            label_w = need
        if grid is None:
            out.append("\n" + m.empty)
            return out
        plot_w = width - label_w - 1
        axis_style = self.style_of("chart--axis")
        for r, row in enumerate(grid.cells):
            out.append("\n")
            if r == 0:
                label = number(grid.y_max, label_w)
            elif r == len(grid.cells) - 1:
                label = number(grid.y_min, label_w)
            else:
                label = ""
            out.append(f"{label:>{label_w}}│", axis_style)
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
        out.append("\n" + " " * label_w + "└" + left + " " * gap + right, axis_style)
        return out

    def _owner_style(self, owner):
        if owner is None:
            return None
        if owner == -1:
            return self.style_of("chart--threshold")
        return self.style_of(f"chart--s{owner % SERIES_STYLES}")
