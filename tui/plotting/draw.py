"""Draw the figures a spec describes: `python -m tui.plotting.draw SPEC.json OUT_DIR`.

The spec (tui.bundle.plots) has already chosen the scale, the y range, what
is clipped and the smoothing; this draws exactly that with matplotlib (Agg,
no display), as PNG and SVG, and writes OUT_DIR/figures.json: what it drew
(legend labels, y limits, scale) and every series it drew (raw, smoothed,
clipped stretches), so any other tool can redraw the figures and the
bundle's tests read the data, not the pixels.

The loss figure: pilots and full runs in two panels side by side (a pilot is
the first steps of the same curve: on one axes it hid under the full run),
sharing the y axis; one colour per variant; the smoothed train loss solid
over the raw one faint; a validation loss dashed with markers. A clipped
value is a ▲ at the top edge, never a data point, and its value goes into
the run's legend entry, never a label on the axes, so no two labels can
overlap. Legends sit under the axes and the figure is saved with a tight
bounding box, so nothing is cut. The output carries no date and no path: SVG
ids use a fixed salt, so the same spec gives the same bytes. Exit 3: no
matplotlib.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
REF_STYLE = {"control": ("#444444", ":"), "bar": ("#000000", "--"),
             "threshold": ("#aa5500", "-.")}
RAW_ALPHA = 0.25
KIND_TITLE = {"pilot": "pilots", "run": "full runs"}


def _xy(points):
    return ([p[0] for p in points], [float("nan") if p[1] is None else p[1] for p in points])


def _label(s: dict) -> str:
    if not s["clipped"]:
        return s["label"]
    step, text = s["clipped"][0]
    return f"{s['label']} (clipped: diverged, {text} at step {step:g})"


def _clip_marks(ax, s: dict, colour: str) -> None:
    for step, _ in s["clipped"]:  # at the top edge, in axes units: no y data, no text
        ax.plot([step], [0.985], marker="^", markersize=8, color=colour, clip_on=False,
                transform=ax.get_xaxis_transform(), linestyle="none")


def _draw_series(ax, series: list, colours: dict, top) -> None:
    for s in series:
        colour = colours.setdefault(s["variant"], COLOURS[len(colours) % len(COLOURS)])
        xs, ys = _xy(s["points"])
        if s.get("role") == "validation":
            ax.plot(xs, ys, color=colour, linestyle="--", marker="o", markersize=3,
                    linewidth=1.2, label=_label(s))
        elif s.get("smoothed"):
            ax.plot(xs, ys, color=colour, linewidth=0.8, alpha=RAW_ALPHA)
            sx, sy = _xy(s["smoothed"])
            ax.plot(sx, sy, color=colour, linewidth=1.8, label=_label(s))
        else:
            pilot = s["kind"] == "pilot"
            ax.plot(xs, ys, color=colour, linestyle="--" if pilot else "-",
                    linewidth=1.2 if pilot else 1.8, alpha=0.8 if pilot else 1.0,
                    label=_label(s))
        if top is not None:
            _clip_marks(ax, s, colour)


def _finish_axes(ax, ticker, panel: dict) -> None:
    if panel["log"]:
        ax.set_yscale("log")
    if panel["ylim"]:
        ax.set_ylim(*panel["ylim"])
    else:
        ax.text(0.5, 0.5, f"no finite {panel['ylabel']} recorded", ha="center", va="center",
                transform=ax.transAxes)
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.set_xlabel("global step")
    ax.grid(True, which="major", alpha=0.3)


def _style_key(plt, panel: dict) -> list:
    """Legend entries that say what the line styles mean (the loss figure)."""
    from matplotlib.lines import Line2D

    key = [Line2D([], [], color="#555555", linewidth=1.8,
                  label="train loss, smoothed (EMA)"),
           Line2D([], [], color="#555555", linewidth=0.8, alpha=RAW_ALPHA * 2,
                  label="train loss, raw")]
    if any(s.get("role") == "validation" for s in panel["series"]):
        key.append(Line2D([], [], color="#555555", linestyle="--", marker="o", markersize=3,
                          label="validation loss"))
    return key


def _save(fig, out: Path, name: str) -> None:
    for ext, meta in (("png", {"Software": None}),
                      ("svg", {"Date": None, "Creator": None, "Format": None, "Type": None})):
        fig.savefig(out / f"{name}.{ext}", bbox_inches="tight", metadata=meta)


def draw_loss(plt, ticker, panel: dict, out: Path) -> dict:
    """Pilots and full runs side by side, sharing y; smoothed over faint raw."""
    kinds = [k for k in ("pilot", "run") if any(s["kind"] == k for s in panel["series"])]
    kinds = kinds or ["run"]
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.0 * len(kinds) + 1, 5.2), dpi=100,
                             sharey=True, squeeze=False)
    colours: dict = {}
    for s in panel["series"]:  # one colour per variant, the same in both panels
        colours.setdefault(s["variant"], COLOURS[len(colours) % len(COLOURS)])
    legend_texts, legends = [], []
    for ax, kind in zip(axes[0], kinds):
        series = [s for s in panel["series"] if s["kind"] == kind]
        _draw_series(ax, series, colours, panel["ylim"])
        _finish_axes(ax, ticker, panel)
        ax.set_title(KIND_TITLE.get(kind, kind), fontsize=9, pad=10)
        handles, labels = ax.get_legend_handles_labels()
        if ax is axes[0][0]:
            ax.set_ylabel(panel["ylabel"])
            if panel.get("smoothing") is not None:
                key = _style_key(plt, panel)
                handles, labels = handles + key, labels + [k.get_label() for k in key]
        if handles:
            legends.append(ax.legend(handles, labels, loc="upper left",
                                     bbox_to_anchor=(0.0, -0.14), fontsize=8, frameon=False,
                                     ncol=1))
    title = panel["title"] + (f"\n{panel['note']}" if panel["note"] else "")
    fig.suptitle(title, fontsize=10, y=1.0 + 0.035 * title.count("\n"))
    _save(fig, out, panel["name"])
    legend_texts = [t.get_text() for legend in legends for t in legend.get_texts()]
    ax0 = axes[0][0]
    drawn = {"legend": legend_texts, "ylim": list(ax0.get_ylim()), "yscale": ax0.get_yscale(),
             "xlim": list(ax0.get_xlim()), "title": title,
             "panels": [KIND_TITLE.get(k, k) for k in kinds]}
    plt.close(fig)
    return drawn


def draw_panel(plt, ticker, panel: dict, out: Path) -> dict:
    if panel["name"] == "loss_curves":
        return draw_loss(plt, ticker, panel, out)
    fig, ax = plt.subplots(figsize=(8.5, 4.6), dpi=100)
    colours: dict = {}
    _draw_series(ax, panel["series"], colours, panel["ylim"])
    for line in panel["lines"]:
        colour, style = REF_STYLE.get(line["role"], ("#000000", "--"))
        ax.axhline(line["y"], color=colour, linestyle=style, linewidth=1.2, label=line["label"])
    _finish_axes(ax, ticker, panel)
    ax.set_ylabel(panel["ylabel"])
    ax.set_title(panel["title"] + (f"\n{panel['note']}" if panel["note"] else ""), fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    legend = ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                       fontsize=8, frameon=False) if handles else None
    _save(fig, out, panel["name"])
    drawn = {"legend": [t.get_text() for t in legend.get_texts()] if legend else [],
             "ylim": list(ax.get_ylim()), "yscale": ax.get_yscale(),
             "xlim": list(ax.get_xlim()), "title": ax.get_title()}
    plt.close(fig)
    return drawn


def series_record(panel: dict) -> list[dict]:
    """What figures.json carries of each series: enough to redraw it with any tool."""
    return [{"run": s["run_id"], "label": s["label"], "variant": s["variant"],
             "kind": s["kind"], "role": s.get("role", "train"), "metric": s.get("source", ""),
             "raw": s["points"], "smoothed": s.get("smoothed") or None,
             "ema_weight": s.get("ema_weight"),
             "clipped": bool(s["clipped"]), "clipped_from": s["clipped"]}
            for s in panel["series"]]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tui.plotting.draw SPEC.json OUT_DIR", file=sys.stderr)
        return 2
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed in the Python that built the bundle "
              "(pip install matplotlib, then `itera-tui wrapup` again to get the plots)",
              file=sys.stderr)
        return 3
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "itera-figures"
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    spec = json.loads(Path(argv[0]).read_text())
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    drawn = {}
    for panel in spec["panels"]:
        drawn[panel["name"]] = draw_panel(plt, ticker, panel, out) | {
            "ylabel": panel["ylabel"], "note": panel["note"],
            "smoothing": None if panel.get("smoothing") is None else {
                "kind": "ema", "debiased": True,
                "weight": "per series (ema_weight): 1 - 10/points, within 0.6 and 0.95"},
            "lines": panel["lines"], "series": series_record(panel)}
    (out / "figures.json").write_text(json.dumps(
        {"format": "itera-figures/2", "matplotlib": matplotlib.__version__,
         "x": "global step", "null": "a clipped value (non-finite, or a divergence)",
         "figures": drawn}, indent=1, allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
