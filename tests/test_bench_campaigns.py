"""The campaigns the benches write are ones `check` accepts: a bench whose campaign is
refused at start measures nothing (issue 42: bench/flood_bench.py's plan had no
`metric`, so the default `val_acc`, which its run never reports, made every start
refuse it and the bench died on a ledger with no run_launched)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import flood_bench  # noqa: E402
from tui.campaign import load_plan  # noqa: E402
from tui.campaign.preflight import start_refusal  # noqa: E402


@pytest.mark.parametrize("mode", ["printed", "jsonl"])
@pytest.mark.parametrize("ends_well", [False, True])
def test_the_flood_bench_campaign_is_not_refused_at_start(tmp_path, mode, ends_well):
    path = flood_bench.campaign(tmp_path, mode, 1.0, flood_bench.POLL, ends_well=ends_well)
    plan = load_plan(path)
    assert start_refusal(plan) == []
    assert plan.campaign.metric == "loss"  # what the flood reports, printed or as JSONL
