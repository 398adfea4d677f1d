"""Timeline: the calendar against the rental window, planned beside actual.

Per GPU lane one 'plan' row (▒ machine) over one 'real' row (█ what ran, in
its state's colour); one 'off' row for time without a GPU (░ human
preparation and decisions, ▒ host work such as the wrap-up). A ▲ marks now on
the axis, ┃ the window end; anything drawn past the window end is 'over'.
"""

from __future__ import annotations

from rich.text import Text

from ..timeline_model import TimelineModel, tick_label, tick_step
from .base import ModelPanel

LABEL_W = 5


class Timeline(ModelPanel):
    COMPONENT_CLASSES = {"timeline--planned", "timeline--human", "timeline--running",
                         "timeline--completed", "timeline--stopped", "timeline--failed",
                         "timeline--dropped", "timeline--over", "timeline--now",
                         "timeline--window", "timeline--label", "timeline--axis"}

    def _needs_layout(self, old, new) -> bool:
        return old is None or new is None or len(old.rows) != len(new.rows)

    def get_content_height(self, container, viewport, width: int) -> int:
        m: TimelineModel | None = self.model
        return 1 if m is None else len(m.rows) + 1

    def render(self) -> Text:
        m: TimelineModel | None = self.model
        if m is None:
            return Text("timeline: waiting for the engine…")
        w = max(4, self.size.width - LABEL_W)
        col = lambda h: min(w - 1, max(0, int(h / m.span_h * w)))  # noqa: E731
        end_col = col(m.window_h) if m.window_h < m.span_h else None
        now_col = col(m.now_h) if m.now_h is not None and 0 <= m.now_h <= m.span_h else None
        out = Text(no_wrap=True, overflow="crop")
        for row in m.rows:
            chars = [" "] * w
            styles = [None] * w
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
            for i in range(w):
                if chars[i] == " ":
                    if i == end_col:
                        chars[i], styles[i] = "┃", "timeline--window"
                    elif i == now_col:
                        chars[i], styles[i] = "┊", "timeline--now"
                elif end_col is not None and i > end_col and row.kind != "plan":
                    styles[i] = "timeline--over"
            line = Text(f"{row.name[:LABEL_W - 1]:<{LABEL_W}}", self.style_of("timeline--label"))
            run_style, run = None, []
            for ch, st in zip(chars, styles):
                if st != run_style and run:
                    line.append("".join(run), self.style_of(run_style) if run_style else None)
                    run = []
                run_style = st
                run.append(ch)
            if run:
                line.append("".join(run), self.style_of(run_style) if run_style else None)
            out.append_text(line)
            out.append("\n")
        out.append_text(self._axis(m, w, col, now_col, end_col))
        return out

    def _axis(self, m: TimelineModel, w: int, col, now_col, end_col) -> Text:
        chars = [" "] * w
        reserved = {c for c in (now_col, end_col) if c is not None}
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
        line = Text("     ", self.style_of("timeline--label"))
        axis = Text("".join(chars), self.style_of("timeline--axis"))
        if end_col is not None:
            axis = Text("".join(chars[:end_col]) + "┃" + "".join(chars[end_col + 1:]),
                        self.style_of("timeline--axis"))
            axis.stylize(self.style_of("timeline--window"), end_col, end_col + 1)
        if now_col is not None:
            text = axis.plain
            axis = Text(text[:now_col] + "▲" + text[now_col + 1:],
                        self.style_of("timeline--axis"))
            axis.stylize(self.style_of("timeline--now"), now_col, now_col + 1)
            if end_col is not None and end_col != now_col:
                axis.stylize(self.style_of("timeline--window"), end_col, end_col + 1)
        line.append_text(axis)
        return line
