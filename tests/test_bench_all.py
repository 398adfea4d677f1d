import pytest
"""`python -m bench`'s runner: every bench in its own process, one table, and a
bench that fails, hangs or prints nothing shows up as an ERROR row with why."""

import sys
import textwrap

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))

from bench import all as bench_all  # noqa: E402

GOOD = textwrap.dedent("""
    import sys
    from bench.figures import Figure, ratio_figure, report
    assert "--quick" in sys.argv, sys.argv
    print("progress on stdout is ignored")
    print("note: 3 rounds, load 0.4", file=sys.stderr)
    report([ratio_figure("fast thing vs floor", 1.2, 1.0, "s", "<= 1.5x"),
            ratio_figure("slow thing vs floor", 3.0, 1.0, "s", "<= 1.5x"),
            Figure("memory", 120.0, None, "MB", "< 200 MB", True)], "--json" in sys.argv)
""")


def write(tmp_path, name, code):
    path = tmp_path / f"{name}_bench.py"
    path.write_text(code)
    return path


@pytest.mark.slow
def test_each_bench_gets_its_rows_and_failures_get_an_error_row(tmp_path):
    write(tmp_path, "good", GOOD)
    write(tmp_path, "crash", "raise ValueError('boom: the disk went away')\n")
    write(tmp_path, "silent", "print('measured nothing')\n")
    write(tmp_path, "slow", "import time; time.sleep(30)\n")
    (tmp_path / "helper.py").write_text("raise SystemExit('not a bench')\n")
    scripts = bench_all.discover(directory=tmp_path)
    assert [s.name for s in scripts] == ["crash_bench.py", "good_bench.py", "silent_bench.py", "slow_bench.py"]
    results = [bench_all.run_bench(s, quick=True, timeout=1 if s.name == "slow_bench.py" else 60)
               for s in scripts]
    text = "\n".join(bench_all.table(results))
    assert "crash       ERROR: exit 1: ValueError: boom: the disk went away" in text
    assert "silent      ERROR: printed no JSON figures" in text
    assert "slow        ERROR: timed out after 1 s" in text
    rows = {line.split()[1]: line for line in text.splitlines() if line.startswith("good")}
    assert rows["fast"].split()[-4:] == ["1.20x", "<=", "1.5x", "ok"] and rows["slow"].endswith("SHORT")
    assert "—" in rows["memory"] and rows["memory"].endswith("ok")
    good = results[1]
    assert good.notes == ("3 rounds, load 0.4",) and good.error is None and len(good.figures) == 3
    assert bench_all.summary(results).startswith("3 figures from 4 benches") and \
        "2 ok, 1 short; failed: crash, silent, slow" in bench_all.summary(results)


@pytest.mark.slow
def test_python_m_bench_runs_a_real_bench_through_the_json_protocol():
    import json
    import os
    import subprocess

    root = bench_all.ROOT
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run([sys.executable, "-m", "bench", "--only", "probe", "--json"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    [probe] = json.loads(done.stdout)["benches"]
    assert probe["name"] == "probe" and probe["error"] is None, probe
    assert probe["figures"] and all(f["goal"] == "<= 0.01x" and f["baseline"] == 10.0 for f in probe["figures"])
    assert any("samples per probe" in note for note in probe["notes"])
