"""Timeline: the calendar against the rental window, planned beside actual.

Per GPU lane (named `lot:index`, as `check` and the events name it) one 'plan'
row (▒ machine) over one 'actual' row (█ what ran, in its state's colour); one
'off' row for time without a GPU (░ human preparation and decisions, ▒ host
work such as the wrap-up). A ▲ marks now on the axis (┊ in the rows), ┃ the
window end; anything drawn past the window end is 'over'. A legend says so:
on its own line when the pane is tall (or the panel zoomed), else in the
widest empty stretch of the off row or of the axis.
"""

from __future__ import annotations

from rich.text import Text

from ...engine.ledger.state import RunStatus

from ..timeline_model import LEGEND, TimelineModel, tick_label, tick_step
from .base import ModelPanel

LEGENDS = ("(" + "  ".join(f"{glyph} {word}" for glyph, word, _ in LEGEND) + ")",
           "(" + " ".join(f"{glyph}{word}" for glyph, word, _ in LEGEND) + ")")
TALL = 36  # from this many terminal rows the legend gets a line of its own


def _gap(chars: list[str], blocked: set[int], need: int) -> int | None:
    """Start of the widest run of blank, unblocked cells if it holds `need` + margins."""
    best, start = (0, None), None
    for i in range(len(chars) + 1):
        free = i < len(chars) and chars[i] == " " and i not in blocked
        if free and start is None:
            start = i
        elif not free and start is not None:
            if i - start > best[0]:
                best = (i - start, start)
            start = None
    length, at = best
    if at is None or length < need + 2:
        return None
    return at + (length - need) // 2


def _place_legend(chars: list[str], styles: list, blocked: set[int]) -> bool:
    """Write the legend (the long form, else the short one) into the widest gap."""
    for text in LEGENDS:
        at = _gap(chars, blocked, len(text))
        if at is not None:
            chars[at:at + len(text)] = list(text)
            styles[at:at + len(text)] = ["timeline--legend"] * len(text)
            return True
    return False


class Timeline(ModelPanel):
    can_focus = True
    # a style for every run state a bar can show (`cut` after a box went away included)
    COMPONENT_CLASSES = {"timeline--planned", "timeline--human", "timeline--over",
                         "timeline--now", "timeline--window", "timeline--label",
                         "timeline--axis", "timeline--legend",
                         *(f"timeline--{state}" for state in RunStatus)}

    def _needs_layout(self, old, new) -> bool:
        return old is None or new is None or len(old.rows) != len(new.rows)

    def legend_line(self) -> bool:
        return self.has_class("zoomed") or self.app.size.height >= TALL

    def get_content_height(self, container, viewport, width: int) -> int:
        m: TimelineModel | None = self.model
        return 1 if m is None else len(m.rows) + 1 + (1 if self.legend_line() else 0)

    def _label_w(self, m: TimelineModel) -> int:
        return max([len(r.name) for r in m.rows] + [5]) + 1

    def render(self) -> Text:
        m: TimelineModel | None = self.model
        if m is None:
            return Text("timeline: waiting for the engine…")
        label_w = self._label_w(m)
        w = max(4, self.size.width - label_w)
        col = lambda h: min(w - 1, max(0, int(h / m.span_h * w)))  # noqa: E731
        end_col = col(m.window_h) if m.window_h < m.span_h else None
        now_col = col(m.now_h) if m.now_h is not None and 0 <= m.now_h <= m.span_h else None
        own_line = self.legend_line()
        legend_placed = own_line
        out = Text(no_wrap=True, overflow="crop")
        for row in m.rows:
            chars = [" "] * w
            styles: list[str | None] = [None] * w
            for b in row.bars:
                a = col(b.start_h)
                z = max(a + 1, min(w, int(b.end_h / m.span_h * w + 0.5)))
                if row.kind == "real":
                    glyph, style = "█", f"timeline--{b.state}"
                elif b.who == "human":
                    glyph, style = "░", "timeline--human"
                else:
                    glyph, style = "▒", "timeline--planned"
                for i in range(a, z):
                    chars[i] = glyph
                    styles[i] = style
                label = b.label
                if z - a >= len(label) + 2 and row.kind != "off":
                    for k, ch in enumerate(label):
                        chars[a + 1 + k] = ch
            if row.kind == "off" and not legend_placed:
                legend_placed = _place_legend(chars, styles,
                                              {c for c in (now_col, end_col) if c is not None})
            for i in range(w):
                if chars[i] == " ":
                    if i == end_col:
                        chars[i], styles[i] = "┃", "timeline--window"
                    elif i == now_col:
                        chars[i], styles[i] = "┊", "timeline--now"
                elif end_col is not None and i > end_col and row.kind != "plan" \
                        and styles[i] != "timeline--legend":
                    styles[i] = "timeline--over"
            line = Text(f"{row.name[:label_w - 1]:<{label_w}}", self.style_of("timeline--label"))
            self._append_runs(line, chars, styles)
            out.append_text(line)
            out.append("\n")
        out.append_text(self._axis(m, w, label_w, col, now_col, end_col, legend_placed))
        if own_line:
            out.append("\n")
            out.append(" " * label_w + self.legend_words(), self.style_of("timeline--legend"))
        return out

    @staticmethod
    def legend_words() -> str:
        return "▒ planned  █ ran (colour: state)  ░ human  ┊▲ now  ┃ window end"

    def _append_runs(self, line: Text, chars, styles) -> None:
        run_style, run = None, []
        for ch, st in zip(chars, styles):
            if st != run_style and run:
                line.append("".join(run), self.style_of(run_style) if run_style else None)
                run = []
            run_style = st
            run.append(ch)
        if run:
            line.append("".join(run), self.style_of(run_style) if run_style else None)

    def _axis(self, m: TimelineModel, w: int, label_w: int, col, now_col, end_col,
              legend_placed: bool) -> Text:
        chars = [" "] * w
        styles: list[str | None] = ["timeline--axis"] * w
        reserved = {c for c in (now_col, end_col) if c is not None}
        if not legend_placed:  # the legend first: the ticks take the cells it leaves
            _place_legend(chars, styles, reserved | {0, 1})
        step = tick_step(m.span_h, w)
        k = 0
        while k * step <= m.span_h + 1e-9:
            c = col(k * step)
            label = tick_label(k * step)
            span = range(max(0, c - 1), c + len(label) + 1)
            if all(chars[i] == " " for i in span if i < w) and c + len(label) <= w \
                    and not reserved.intersection(span):
                chars[c:c + len(label)] = list(label)
            k += 1
        if end_col is not None:
            chars[end_col], styles[end_col] = "┃", "timeline--window"
        if now_col is not None:
            chars[now_col], styles[now_col] = "▲", "timeline--now"
        line = Text(" " * label_w, self.style_of("timeline--label"))
        self._append_runs(line, chars, styles)
        return line
