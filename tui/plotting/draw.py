"""Draw the figures a spec describes: `python -m tui.plotting.draw SPEC.json OUT_DIR`.

The spec (tui.bundle.plots) has already chosen the scale, the y range and
what is clipped; this draws exactly that with matplotlib (Agg, no display),
as PNG and SVG, and writes OUT_DIR/figures.json saying what it drew (legend
labels, y limits, scale) so the bundle's tests read the figure, not the spec.
Pilot runs are dashed, full runs solid, one colour per variant; a clipped
value is a marker at the top edge with its value, never a data point; the
legend sits outside the axes and the figure is saved with a tight bounding
box, so nothing is cut. The output carries no date and no path: SVG ids use
a fixed salt, so the same spec gives the same bytes. Exit 3: no matplotlib.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
REF_STYLE = {"control": ("#444444", ":"), "bar": ("#000000", "--"),
             "threshold": ("#aa5500", "-.")}


def _series(ax, panel: dict, colours: dict) -> None:
    top = panel["ylim"][1] if panel["ylim"] else None
    for s in panel["series"]:
        colour = colours.setdefault(s["variant"], COLOURS[len(colours) % len(COLOURS)])
        pilot = s["kind"] == "pilot"
        xs = [p[0] for p in s["points"]]
        ys = [float("nan") if p[1] is None else p[1] for p in s["points"]]
        label = s["label"] + (" (clipped: diverged)" if s["clipped"] else "")
        ax.plot(xs, ys, color=colour, linestyle="--" if pilot else "-",
                linewidth=1.2 if pilot else 1.8, alpha=0.8 if pilot else 1.0, label=label)
        if top is None:
            continue
        for step, text in s["clipped"]:  # at the top edge, in axes units: no y data
            ax.plot([step], [1.0], marker="^", markersize=8, color=colour, clip_on=False,
                    transform=ax.get_xaxis_transform(), linestyle="none")
            ax.annotate(f"{s['label']}: {text}", (step, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(3, -12), textcoords="offset points", fontsize=7, color=colour)


def draw_panel(plt, ticker, panel: dict, out: Path) -> dict:
    fig, ax = plt.subplots(figsize=(8.5, 4.6), dpi=100)
    colours: dict = {}
    _series(ax, panel, colours)
    for line in panel["lines"]:
        colour, style = REF_STYLE.get(line["role"], ("#000000", "--"))
        ax.axhline(line["y"], color=colour, linestyle=style, linewidth=1.2, label=line["label"])
    if panel["log"]:
        ax.set_yscale("log")
    if panel["ylim"]:
        ax.set_ylim(*panel["ylim"])
    else:
        ax.text(0.5, 0.5, f"no finite {panel['ylabel']} recorded", ha="center", va="center",
                transform=ax.transAxes)
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.set_xlabel("global step")
    ax.set_ylabel(panel["ylabel"])
    ax.set_title(panel["title"] + (f"\n{panel['note']}" if panel["note"] else ""), fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    legend = ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                       fontsize=8, frameon=False) if handles else None
    for ext, meta in (("png", {"Software": None}),
                      ("svg", {"Date": None, "Creator": None, "Format": None, "Type": None})):
        fig.savefig(out / f"{panel['name']}.{ext}", bbox_inches="tight", metadata=meta)
    drawn = {"legend": [t.get_text() for t in legend.get_texts()] if legend else [],
             "ylim": list(ax.get_ylim()), "yscale": ax.get_yscale(),
             "xlim": list(ax.get_xlim()), "title": ax.get_title()}
    plt.close(fig)
    return drawn


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
    drawn = {name: draw_panel(plt, ticker, panel, out)
             for panel in spec["panels"] for name in [panel["name"]]}
    (out / "figures.json").write_text(json.dumps(
        {"format": "itera-figures/1", "matplotlib": matplotlib.__version__,
         "figures": drawn}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
