"""What real training code prints, read right: spellings, `\\r` bars, ANSI, both streams.

Pure core tests (no torch): each writes the bytes a real script writes into a
run directory and reads them through the engine's own feeds.
"""

import math

import pytest

from tui.campaign.numbers import is_finite_number, parse_number
from tui.campaign.plan import MetricPattern, StopRule
from tui.campaign.presets import build_spec
from tui.engine.reading.feeds import FeedKind, RunFeeds, StdoutFeed, recorded_sources
from tui.engine.watching.live import RunLive
from tui.engine.reading.printed import StepClock
from tui.engine.rules import RuleSet

SPELLINGS = [  # what real code prints -> the number it means
    ("nan", math.nan), ("nan.0", math.nan), ("NaN", math.nan), ("inf", math.inf),
    ("inf.0", math.inf), ("-Infinity", -math.inf), ("1e309", math.inf),
    ("'2.97'", 2.97), ('"2.97"', 2.97), ("tensor(2.31)", 2.31), ("tensor(nan)", math.nan),
    ("2.31e+00", 2.31), ("tensor(0.5, device='cuda:0', grad_fn=<NllLossBackward0>)", 0.5),
]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _printed(tmp_path, stdout: bytes, spec, stderr: bytes = b"") -> list[dict]:
    (tmp_path / "stdout.log").write_bytes(stdout)
    (tmp_path / "stderr.log").write_bytes(stderr)
    return list(recorded_sources(tmp_path, spec)[FeedKind.PRINTED])


@pytest.mark.parametrize("text,expected", SPELLINGS)
def test_every_printed_spelling_is_read_as_its_number(tmp_path, text, expected):
    records = _printed(tmp_path, f"step 3 loss={text}\n".encode(),
                       build_spec(None, (MetricPattern("loss", r"loss=(.+)$"),
                                         MetricPattern("step", r"step (\d+)"))))
    (record,) = records
    assert _same(record["loss"], expected) and record["step"] == 3
    assert _same(parse_number(text), expected)


def test_a_value_that_is_not_a_number_is_counted_never_raised(tmp_path):
    (tmp_path / "stdout.log").write_bytes(b"loss=abc\nloss=\nloss=tensor(oops)\nloss=0.5\n")
    feed = StdoutFeed(tmp_path / "stdout.log", (("loss", r"loss=(\S*)"),))
    assert [r["loss"] for r in feed.poll()] == [0.5]
    assert feed.bad_lines == 3


def test_is_finite_number_is_one_definition(tmp_path):
    assert is_finite_number(2) and is_finite_number(2.5)
    assert not any(is_finite_number(v) for v in (True, math.nan, math.inf, 10 ** 400, "2", None))


def test_a_carriage_return_bar_gives_its_last_value_not_its_first(tmp_path):
    """tqdm rewrites one line with \\r; the old feed took the first match of a line."""
    bar = "".join(f"\rEpoch 0: {i}/300 [00:01, 30it/s, train_loss={44.7 / i:.3f}]"
                  for i in range(1, 301))
    records = _printed(tmp_path, bar.encode() + b"\n",
                       build_spec(None, (MetricPattern("loss", r"train_loss=([^\],]+)"),)))
    assert len(records) == 300
    assert records[-1]["loss"] == pytest.approx(44.7 / 300, abs=1e-3)


def test_within_a_segment_the_last_match_wins(tmp_path):
    records = _printed(tmp_path, b"loss 9.0 ... loss 8.0 ... loss 0.41\n",
                       build_spec(None, (MetricPattern("loss", r"loss (\S+)"),)))
    assert [r["loss"] for r in records] == [0.41]


def test_ansi_colours_glued_to_numbers_are_removed_before_matching(tmp_path):
    line = (b"\x1b[1m\x1b[32mstep\x1b[0m \x1b[36m12\x1b[0m | loss \x1b[31m0.4210\x1b[0m"
            b" | \x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b[2K\x1b[1A\n")
    records = _printed(tmp_path, line, build_spec(None, (
        MetricPattern("loss", r"loss (\S+)"), MetricPattern("step", r"step (\d+)"))))
    assert records[0]["loss"] == 0.421 and records[0]["step"] == 12


def test_both_streams_are_read_and_a_pattern_can_keep_to_one(tmp_path):
    spec = build_spec(None, (MetricPattern("loss", r"loss (\S+)"),
                             MetricPattern("acc", r"acc (\S+)", ("stderr",))))
    records = _printed(tmp_path, b"loss 0.5 acc 0.1\n", spec,
                       stderr=b"INFO loss 0.25 acc 0.9\n")
    assert [(r["source"], r.get("loss"), r.get("acc")) for r in records] == [
        ("stdout", 0.5, None), ("stderr", 0.25, 0.9)]


def test_a_backwards_printed_step_keeps_its_value_and_the_global_step_goes_on(tmp_path):
    """pytorch/examples' word_language_model restarts its batch count every epoch."""
    lines = [f"| epoch {e:3d} | {b:5d}/ 2983 batches | lr 20.00 | ms/batch 5.00 | "
             f"loss {7 - e - b / 3000:5.2f} | ppl  1012.32" for e in (1, 2) for b in
             range(200, 3000, 200)]
    records = _printed(tmp_path, ("\n".join(lines) + "\n").encode(),
                       build_spec("pytorch_examples"))
    printed = [r["step"] for r in records]
    glob = [r["global_step"] for r in records]
    assert printed[13:15] == [2800, 200]  # the printed step went backwards...
    assert glob == sorted(glob) and glob[14] == 2983 + 200  # ...the global one did not
    assert records[0]["epoch"] == 1 and records[0]["loss"] == 5.93


def test_a_step_clock_without_a_total_continues_from_the_last_printed_step():
    clock = StepClock()
    seen = [clock.observe(s) for s in (10, 20, 30, 10, 20, 5)]
    assert seen == [10, 20, 30, 40, 50, 55]
    other_bar = StepClock()
    other_bar.observe(5, 30)
    assert other_bar.observe(8, 8) == 5  # an evaluation bar (another total) is not the step


def test_threshold_from_step_and_the_live_view_use_the_global_step(tmp_path):
    lines = [f"| epoch {e:3d} | {b:5d}/  100 batches | lr 1.00 | ms/batch 5.00 | "
             f"loss  1.00 | ppl     2.72" for e in (1, 2, 3) for b in (50, 100)]
    (tmp_path / "stdout.log").write_text("\n".join(lines) + "\n")
    rules = RuleSet((StopRule("threshold", metric="loss", above=0.5, from_step=250),), "v",
                    "run")
    live = RunLive("v", tmp_path, rules, build_spec("pytorch_examples"), "loss", "min", 0.0)
    stop = live.poll(1.0)
    assert stop is not None and stop.step == 250  # printed 50 of epoch 3, never < 250
    assert "(printed 50)" in stop.reason
    view = live.view()
    assert view.global_step == 300 and view.last_step == 100
    xs = [x for x, _ in view.loss_history]
    assert xs == sorted(xs) and xs[-1] == 300


def test_nanogpt_lines_through_its_preset(tmp_path):
    out = (b"tokens per iteration will be: 8,192\n"
           b"step 0: train loss 4.2874, val loss 4.2823\n"
           b"iter 0: loss 4.2649, time 12011.42ms, mfu -100.00%\n"
           b"iter 10: loss 3.1442, time 101.20ms, mfu 1.23%\n"
           b"iter 20: loss nan, time 100.10ms, mfu 1.24%\n")
    records = _printed(tmp_path, out, build_spec("nanogpt"))
    assert records[0] == {"step": 0, "train_loss": 4.2874, "val_loss": 4.2823,
                          "global_step": 0, "source": "stdout"}
    assert records[2]["loss"] == 3.1442 and records[2]["mfu"] == 1.23
    rules = RuleSet((StopRule("non_finite", metrics=build_spec("nanogpt").watch),), "v", "run")
    stops = [rules.on_record(r, 0.0) for r in records]
    assert stops[:3] == [None] * 3 and stops[3].step == 20


def test_lightning_rich_bar_of_a_max_steps_run_is_read_and_its_nan_stops_it(tmp_path):
    """A Trainer given `max_steps` and no `max_epochs` (max_epochs -1) draws its Rich bar
    as `Epoch 0/-2`: its `train_loss: nan` was not read (only the step), so no rule saw
    the NaN until a continuation line's val_loss (issue 41's Lightning run)."""
    bar = "\x1b[35m\u2501\u2501\u2578\x1b[0m\x1b[90m\u2501\u2501\x1b[0m"
    frame = ("\r\x1b[2KEpoch 0/-2 " + bar + " {n}/128 \x1b[2m0:00:00 \u2022 0:00:01\x1b[0m "
             "\x1b[2;4m711.07it/s\x1b[0m \x1b[3mtrain_loss: {loss}\x1b[0m")
    out = "".join(frame.format(n=n, loss=loss) for n, loss in ((4, "15.212"), (6, "nan")))
    records = _printed(tmp_path, out.encode() + b"\n", build_spec("lightning"))
    assert [(r["global_step"], r.get("train_loss")) for r in records][0] == (4, 15.212)
    assert math.isnan(records[1]["loss"]) and records[1]["global_step"] == 6
    rules = RuleSet((StopRule("non_finite", metrics=build_spec("lightning").watch),), "v", "run")
    stops = [rules.on_record(r, 0.0) for r in records]
    assert stops[0] is None and stops[1].step == 6 and stops[1].reason.startswith("loss=nan")


def test_mnist_and_imagenet_lines_through_the_pytorch_examples_preset(tmp_path):
    out = (b"Train Epoch: 1 [640/60000 (1%)]\tLoss: 2.300000\n"
           b"\nTest set: Average loss: 0.0500, Accuracy: 9839/10000 (98%)\n\n"
           b"Epoch: [0][  10/5005]\tTime  0.123 ( 0.456)\tData  0.010 ( 0.020)\t"
           b"Loss 6.9063e+00 (6.9100e+00)\tAcc@1   0.00 (  0.10)\tAcc@5   0.39 (  0.50)\n"
           b" * Acc@1 76.130 Acc@5 92.862\n")
    r = _printed(tmp_path, out, build_spec("pytorch_examples"))
    assert r[0]["loss"] == 2.3 and r[0]["epoch"] == 1 and "step" not in r[0]
    assert r[1]["test_loss"] == 0.05 and r[1]["test_acc"] == 98
    assert r[2]["step"] == 10 and r[2]["loss"] == 6.9063 and r[2]["acc1"] == 0.0
    assert r[3]["val_acc1"] == 76.13


def test_user_patterns_add_to_and_override_a_preset():
    spec = build_spec("nanogpt", (MetricPattern("loss", r"LOSS=(\S+)"),
                                  MetricPattern("tokens", r"tok (\d+)")))
    names = [p.name for p in spec.patterns]
    assert names.count("loss") == 1 and "tokens" in names and "val_loss" in names
    assert spec.watch == ("loss", "train_loss", "val_loss")
    mine = build_spec("lightning", (MetricPattern("step", r"it (\d+)"),))
    assert [p.name for p in mine.patterns if p.name.startswith("step")] == ["step"]


def test_feeds_of_a_run_count_bad_lines_of_every_source(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\nnot json\n')
    (tmp_path / "stdout.log").write_text("loss zzz\n")
    feeds = RunFeeds(tmp_path, (("loss", r"loss (\S+)"),))
    batches = list(feeds.poll())
    assert [len(b) for _, b in batches] == [1]
    assert feeds.bad_lines == 2 and feeds.records == 1


def test_hf_trainer_dicts_of_transformers_4_and_5_and_the_bar_step(tmp_path):
    out = (b"{'loss': 2.972, 'grad_norm': nan, 'learning_rate': 5e-05, 'epoch': 0.1}\n"
           b"{'loss': '0', 'grad_norm': 'nan', 'learning_rate': '1e-05', 'epoch': '1.25'}\n")
    err = (b"\r 33%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x8e      | 10/30 "
           b"[00:00<00:00, 313.10it/s]\r  0%|          | 0/8 [00:00<?, ?it/s]\x1b[A\n")
    records = _printed(tmp_path, out, build_spec("hf_trainer"), stderr=err)
    v4, v5, bar, eval_bar = records
    assert v4["loss"] == 2.972 and math.isnan(v4["grad_norm"]) and v4["learning_rate"] == 5e-05
    assert v5["loss"] == 0.0 and math.isnan(v5["grad_norm"]) and v5["epoch"] == 1.25
    assert bar["step"] == 10 and bar["global_step"] == 10 and bar["source"] == "stderr"
    assert eval_bar["step"] == 0 and eval_bar["global_step"] == 10  # the eval bar's count


def test_a_printed_dict_that_names_its_step_takes_it_not_the_lagging_bar(tmp_path):
    out = b"{'loss': 'nan', 'grad_norm': 'nan', 'global_step': 20, 'epoch': 0.5}\n"
    err = b"\r 25%|\xe2\x96\x88\xe2\x96\x8e      | 10/40 [00:00<00:00, 313.10it/s]\n"
    records = _printed(tmp_path, out, build_spec("hf_trainer"), stderr=err)
    nan = next(r for r in records if r["source"] == "stdout")
    assert nan["step"] == 20 and nan["global_step"] == 20 and "global_step" in nan
    assert math.isnan(nan["loss"])
