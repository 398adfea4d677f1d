"""The bundle's figures: drawn by matplotlib in a fresh process, readable whatever a run did.

A real campaign (pilots, then full runs, one of which diverges to 5.9e35
without a NaN; each logs a validation loss every 2 steps) is driven through the engine and bundled; the drawing
process says what it drew (figures.json: legend labels, y limits), which is
checked against the runs' own metrics files.
"""

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from bundlekit import deliver_cmd, manifest, write_campaign  # noqa: E402
from enginekit import drive  # noqa: E402
from tui.bundle import plots  # noqa: E402
from tui.bundle.wrapup import build_bundle  # noqa: E402
from tui.campaign import load_plan  # noqa: E402


VARIANTS = f"""
    [pilot]
    steps = 3
    decide = "continue"

    [[variant]]
    id = "control"
    category = "mandatory"
    command = {deliver_cmd("--label", "control", "--steps", "6", "--val-every", "2",
                             "--acc-end", "0.70")}
    minutes = 2

    [[variant]]
    id = "wide"
    category = "useful"
    command = {deliver_cmd("--label", "wide", "--steps", "6", "--val-every", "2",
                             "--acc-end", "0.80")}
    minutes = 2

    [[variant]]
    id = "hot"
    category = "useful"
    command = {deliver_cmd("--label", "hot", "--steps", "6", "--val-every", "2",
                                     "--blowup-at", "4")}
    minutes = 2
"""
FIGURE_FILES = ("loss_curves.png", "loss_curves.svg", "quality.png", "quality.svg",
                "figures.json")


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    path = write_campaign(tmp_path_factory.mktemp("plots"), VARIANTS)
    drive(path, timeout=120)
    result = build_bundle(load_plan(path, check_files=False))
    assert result.verified, result.failures
    return path, result.bundle_dir


def losses(bundle: Path, run_id: str) -> list[float]:
    lines = (bundle / "runs" / run_id / "metrics.jsonl").read_text().splitlines()
    return [r["loss"] for r in map(json.loads, lines) if "loss" in r]


@pytest.mark.slow  # a real campaign, drawn by the real drawer process
def test_figures_are_listed_embedded_and_name_every_run(bundled):
    _, bundle = bundled
    from types import SimpleNamespace

    from tui.app.ending_view import figures_text  # the ending names them
    assert figures_text(SimpleNamespace(root=bundled[0].parent), "outputs/bundle") == (
        "outputs/bundle/loss_curves.png, outputs/bundle/quality.png (their series: "
        "figures.json)")
    listed = {f["path"]: f for f in manifest(bundle)["files"]}
    for name in FIGURE_FILES:
        assert listed[name]["kind"] == "figure", name
    assert (bundle / "loss_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    runs = manifest(bundle)["runs"]
    assert sorted(r["kind"] for r in runs) == ["pilot"] * 3 + ["run"] * 3
    drawn = json.loads((bundle / "figures.json").read_text())["figures"]
    for figure in ("loss_curves", "quality"):
        legend = drawn[figure]["legend"]
        for r in runs:  # every full run, and every pilot, by its readable label
            assert any(t.startswith(f"{r['variant']}·{r['kind']}") for t in legend), (figure, r)
    quality = drawn["quality"]["legend"]
    assert "control final acc: 0.7" in quality and "the bar (gain >= 0.01): 0.71" in quality
    lo, hi = drawn["quality"]["ylim"]
    assert lo < 0.7 < 0.71 < hi
    report = (bundle / "report.md").read_text()
    assert "![loss per run, log scale](loss_curves.png)" in report
    assert "![acc per run](quality.png)" in report


@pytest.mark.slow  # a real campaign, drawn by the real drawer process
def test_a_diverged_run_is_clipped_and_does_not_set_the_y_range(bundled):
    _, bundle = bundled
    ids = {(r["variant"], r["kind"]): r["id"] for r in manifest(bundle)["runs"]}
    hot = losses(bundle, ids["hot", "run"])
    assert max(hot) == 5.9e35  # the run really diverged, finite: no stop rule saw it
    sane = [v for key, rid in ids.items() if key != ("hot", "run") for v in losses(bundle, rid)]
    sane += [v for v in hot if v < 1e30]
    drawn = json.loads((bundle / "figures.json").read_text())["figures"]["loss_curves"]
    lo, hi = drawn["ylim"]
    assert drawn["yscale"] == "log"
    assert lo <= min(sane) and max(sane) <= hi < 10 * max(sane)  # the real curves fill it
    assert "hot·run (clipped: diverged, 5.9e+35 at step 4)" in drawn["legend"]
    assert "hot·run clipped from step 4 (5.9e+35)" in drawn["title"]
    assert not any("clipped" in t for t in drawn["legend"] if not t.startswith("hot·run"))


@pytest.mark.slow  # a real campaign, drawn by the real drawer process
def test_figures_json_carries_raw_smoothed_and_validation_series_to_redraw(bundled):
    """The data, not the pixels: every run's raw loss as its metrics file has it, an EMA
    over it, the validation loss beside it where a run logs one, clipped runs marked."""
    from tui.bundle.plots import ema

    _, bundle = bundled
    figures = json.loads((bundle / "figures.json").read_text())["figures"]
    loss = figures["loss_curves"]
    assert loss["panels"] == ["pilots", "full runs"]  # pilot and full run told apart
    assert loss["smoothing"]["kind"] == "ema" and loss["smoothing"]["debiased"]
    series = {(s["label"], s["role"]): s for s in loss["series"]}
    ids = {(r["variant"], r["kind"]): r["id"] for r in manifest(bundle)["runs"]}
    for (variant, kind), rid in ids.items():
        train = series[f"{variant}·{kind}", "train"]
        raw = losses(bundle, rid)
        assert train["run"] == rid and train["kind"] == kind and train["metric"] == "loss"
        kept = [v for _, v in train["raw"]]
        assert [v for v in kept if v is not None] == [v for v in raw if v < 1e30]
        assert train["clipped"] is ((variant, kind) == ("hot", "run")), (variant, kind)
        weight = train["ema_weight"]
        assert 0.6 <= weight <= 0.95
        smooth = [v for _, v in train["smoothed"]]
        assert len(smooth) == len(kept) and smooth[0] == pytest.approx(kept[0])
        assert [None if v is None else pytest.approx(v) for v in smooth] == \
            [v for _, v in ema([tuple(p) for p in train["raw"]], weight)]
        finite = [v for v in kept if v is not None]
        if len(finite) > 2 and max(finite) > min(finite):  # smoother: never past the raw range
            assert min(finite) <= min(v for v in smooth if v is not None)
            assert max(v for v in smooth if v is not None) <= max(finite)
        val = series[f"{variant}·{kind} validation", "validation"]  # deliver.py logs val_loss
        assert val["metric"] == "val_loss" and val["raw"] and val["smoothed"] is None
    hot = series["hot·run", "train"]
    assert hot["clipped_from"] == [[4, "5.9e+35"]]
    assert hot["raw"][3] == [4, None]  # null where clipped: the line breaks
    assert "validation loss" in loss["legend"]
    assert "train loss, smoothed (EMA)" in loss["legend"]
    quality = {s["label"]: s for s in figures["quality"]["series"]}
    assert quality["control·run"]["metric"] == "acc" and quality["control·run"]["raw"]
    assert {line["role"] for line in figures["quality"]["lines"]} == {"control", "bar"}


def test_ema_is_tensorboards_debiased_average_and_restarts_after_a_clip():
    from tui.bundle.plots import ema, ema_weight

    out = ema([(1, 4.0), (2, 2.0), (3, None), (4, 1.0)], 0.5)
    assert out[0] == (1, 4.0)  # debiased: the first value is itself, not 0.5 x it
    assert out[1] == (2, pytest.approx((0.5 * 4.0 * 0.5 + 0.5 * 2.0) / 0.75))
    assert out[2] == (3, None) and out[3] == (4, 1.0)
    assert ema_weight(10) == 0.6 and ema_weight(40) == 0.75 and ema_weight(100_000) == 0.95


def test_clipping_rule_keeps_the_others_range_and_breaks_the_line():
    raw = {"a": [(1, 2.0), (2, 1.0), (3, 0.5)], "b": [(1, 2.2), (2, 1.1), (3, 0.6)],
           "c": [(1, 2.1), (2, 3e7), (3, float("nan")), (4, 0.9)]}
    clipped = plots._clip(raw)
    points, starts = clipped["c"]
    assert points == ((1, 2.1), (2, None), (3, None), (4, 0.9))
    assert starts == ((2, "3e+07"),)  # one stretch, marked once
    assert clipped["a"][1] == () and clipped["b"][1] == ()


@pytest.mark.slow  # a real campaign, drawn by the real drawer process
def test_figures_are_deterministic_and_carry_no_date_or_path(bundled, tmp_path):
    path, bundle = bundled
    plan = load_plan(path, check_files=False)
    from tui.engine.ledger.file import read_ledger
    from tui.engine.ledger.state import replay

    state = replay(read_ledger(plan.state_dir / "ledger.jsonl"))
    panels = plots.build_spec(plan, list(state.runs), plan.state_dir / "runs")
    first = plots.draw(panels, tmp_path / "one")
    second = plots.draw(panels, tmp_path / "two")
    assert first.problem is None and set(first.files) == set(FIGURE_FILES)
    for name in first.files:
        a, b = (tmp_path / "one" / name).read_bytes(), (tmp_path / "two" / name).read_bytes()
        assert a == b, name
        assert b"/tmp" not in a and str(path.parent).encode() not in a, name
    svg = (tmp_path / "one" / "loss_curves.svg").read_text()
    assert "<dc:date>" not in svg and "/tmp" not in svg
    # the bundle's copies are the same drawing (the SVG hashed into the manifest as drawn)
    assert (bundle / "loss_curves.png").read_bytes() == (tmp_path / "one" / "loss_curves.png"
                                                         ).read_bytes()


@pytest.mark.slow  # a real campaign, drawn by the real drawer process
def test_without_matplotlib_the_bundle_verifies_and_the_report_says_so(bundled, tmp_path,
                                                                      monkeypatch):
    path, _ = bundled
    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    real_env = plots.isolated_env
    monkeypatch.setattr(plots, "isolated_env", lambda base=None: real_env(base) | {
        "PYTHONPATH": os.pathsep.join((str(shadow.parent), real_env(base)["PYTHONPATH"]))})
    said = []
    result = build_bundle(load_plan(path, check_files=False), said.append)
    assert result.verified, result.failures
    report = (result.bundle_dir / "report.md").read_text()
    assert "No figures in this bundle: matplotlib is not installed" in report
    assert not any("drawing the figures" in line or line.startswith("figures:")
                   for line in said)  # the log never claims a drawing that did not happen
    assert any(line.startswith("no figures: matplotlib is not installed") for line in said)
    figures = manifest(result.bundle_dir)["figures"]
    assert figures["files"] == [] and "matplotlib is not installed" in figures["problem"]
    from types import SimpleNamespace

    from tui.app.ending_view import figures_text  # the ending says why, from the manifest
    plan = SimpleNamespace(root=path.parent)
    assert figures_text(plan, "outputs/bundle").startswith(
        "none drawn: matplotlib is not installed")
    assert not (result.bundle_dir / "loss_curves.png").exists()
    assert not [f for f in manifest(result.bundle_dir)["files"] if f["kind"] == "figure"]


@pytest.mark.slow  # a real campaign, drawn by the real drawer process
def test_report_states_the_verdict_in_human_units(bundled):
    import re

    _, bundle = bundled
    report = (bundle / "report.md").read_text()
    assert "- **Verdict:** **answered yes**: wide (acc 0.8 vs control 0.7) meets the bar " \
           "(gain >= 0.01)" in report
    assert "**Conclusion.** **answered yes**" in report
    assert "threshold" not in report
    assert "3 d rental window" in report and "(RTX 4090 x2, 3 d)" in report
    assert not re.search(r"\d\.\d{3,} h\b", report) and " days" not in report


def test_matplotlib_is_a_dependency_of_the_package_not_an_extra():
    """README command 1 (`pip install torch==2.13.0 -e .`) must bring matplotlib: figures
    are part of every bundle."""
    import tomllib

    from conftest import REPO

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert any(d.split(">")[0].split("=")[0].strip() == "matplotlib"
               for d in project["dependencies"])
