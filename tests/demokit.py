"""The embedded demo campaign (the repository's campaign.toml) for process tests: a copy
of it in a folder, its full runs, and the conclusion an uninterrupted demo reaches
(tests/test_demo_e2e.py runs it whole; tests/test_demo_move.py moves it to a new box)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO


def copy_demo(root: Path, extra: str = "") -> Path:
    """campaign.toml (with `extra` TOML appended) and the demo's corpus in `root`, as a
    fresh clone holds them; the path of the copied campaign.toml."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "campaign.toml").write_text((REPO / "campaign.toml").read_text() + extra)
    shutil.copytree(REPO / "tui/demo/data", root / "tui/demo/data")
    return root / "campaign.toml"


SHORT_STEPS = {"600": "150", "500": "120"}  # the demo's full runs, a quarter as long


def short_demo(text: str) -> str:
    """The demo's campaign.toml with its full runs a quarter as long (the pilots, the
    checks and the exploratory run's non-finite stop as they are): for the tests about
    how the campaign gets to its end (with no face open), not about the answer
    it reaches, which the whole demo gives `tests/test_demo_e2e.py`. A quarter of the
    training is most of a demo's CPU in the suite."""
    for long, short in SHORT_STEPS.items():
        text = text.replace(f'"--steps", "{long}"', f'"--steps", "{short}"')
        text = text.replace(f"steps = {long}", f"steps = {short}")
    return text


def check_conclusion_from_runs(status: dict, run_dirs: dict[str, Path]) -> None:
    """`status --json`'s conclusion is the one each variant's full run (its folder in
    `run_dirs`) logged, whatever it is: the values are their final val_acc, the control's
    is the control's, and the winners are the variants over the bar."""
    conclusion = status["conclusion"]
    assert set(conclusion["values"]) == set(run_dirs)
    for variant, value in conclusion["values"].items():
        assert value == pytest.approx(final_val_acc(run_dirs[variant]), abs=1e-9), variant
    control = conclusion["control_value"]
    assert conclusion["conclusive"] is True and control == conclusion["values"]["control"]
    # the demo's bar: gain >= 0.02 and val_acc >= 0.85
    beat = sorted(v for v, x in conclusion["values"].items()
                  if v != "control" and x - control >= 0.02 - 1e-9 and x >= 0.85)
    assert sorted(conclusion["winners"]) == beat
    assert status["budget"]["accepted"] == 2


def full_run(state, variant):
    """The variant's one full run (never a pilot; never launched twice)."""
    (run,) = [r for r in state.runs if r.target == variant and r.kind == "run"]
    return run


def final_val_acc(run_dir: Path) -> float:
    """The last val_acc the run logged, read from its own metrics file."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if "val_acc" in r][-1]["val_acc"]


def check_demo_conclusion(status: dict, run_dirs: dict[str, Path]) -> None:
    """`status --json` says what the demo concludes uninterrupted: computed against the
    threshold from the final val_acc each variant's full run (its folder in `run_dirs`)
    logged, and the outcome the README promises."""
    assert set(run_dirs) == {"control", "wide"}
    check_conclusion_from_runs(status, run_dirs)
    conclusion = status["conclusion"]
    assert conclusion["control_value"] > 0.85  # the control learned the task
    # training is seeded and deterministic, and the wider GRU does not beat the control
    # by the 2 points the question asks for
    gain = conclusion["values"]["wide"] - conclusion["control_value"]
    assert gain < 0.02 - 1e-6
    assert conclusion["winners"] == []
    assert conclusion["headline"] == "no variant meets the bar"
    assert f"best wide {conclusion['values']['wide']:.4g}, gain {gain:+.4g} < 0.02" \
        in conclusion["text"]
