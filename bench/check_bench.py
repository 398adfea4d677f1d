"""Check bench: `itera-tui check` stays linear in the number of variants.

    python bench/check_bench.py [--variants 2000] [--json]

Builds a campaign of N variants (and one of N/10 beside it, in the same run)
and times `check_summary` + `render_check` in this process (process start and
imports left out: they do not grow with N). Goals: N variants in under 5 s
(2 000 took 46 s when identical configurations were found by comparing every
pair), and the N-variant check at most 15x the N/10 one (linear is 10x;
quadratic would be 100x).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.figures import Figure, ratio_figure, report  # noqa: E402
from tui.campaign import check_summary, load_plan, render_check  # noqa: E402


def campaign_text(n: int) -> str:
    out = ['[campaign]\nname = "big"\nquestion = "q"\n\n[[lot]]\ngpu = "RTX 4090"\ndays = 30\n']
    for i in range(n):
        out.append(f'[[variant]]\nid = "v{i}"\ncategory = "{"mandatory" if i == 0 else "useful"}"'
                   f'\ncommand = ["python", "train.py", "--lr", "{i}e-4"]\nhours = 0.1\n')
    return "\n".join(out)


def timed_check(n: int, folder: Path) -> float:
    path = folder / f"campaign-{n}.toml"
    path.write_text(campaign_text(n))
    start = time.perf_counter()
    plan = load_plan(path, check_files=False)
    render_check(check_summary(plan))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    n = args.variants
    with tempfile.TemporaryDirectory() as tmp:
        small = timed_check(max(1, n // 10), Path(tmp))
        big = timed_check(n, Path(tmp))
    report([Figure(f"check, {n} variants", big, None, "s", "< 5 s", big < 5.0),
            ratio_figure(f"check, {n} vs {n // 10} variants", big, small, "s", "<= 15x")],
           args.json)


if __name__ == "__main__":
    main()
