"""The one-word answer: yes, no, or inconclusive — a 'no' has to be earned."""

from __future__ import annotations

from test_app_support import SNAP_TOML
from tui.campaign import load_plan
from tui.engine.conclusion.outcome import Conclusion
from tui.engine.ledger.state import replay as _replay
from tui.engine.conclusion.verdict import verdict_of


def plan_of(tmp_path):
    path = tmp_path / "campaign.toml"
    path.write_text(SNAP_TOML)
    return load_plan(path, check_files=False)


def full(seq, target, end_event):
    rid = f"{target}-00000000-1"
    return [{"seq": seq, "t": 1.0, "event": "run_launched", "run": rid, "target": target,
             "kind": "run", "category": "useful", "attempt": 1, "config_hash": "00000000"},
            *end_event(seq, rid)]


def completed(seq, rid):
    return [{"seq": seq + 1, "t": 2.0, "event": "run_exited", "run": rid, "exit_code": 0}]


def stopped_by(by_rule):
    def end(seq, rid):
        if by_rule == "user":
            stop = {"seq": seq + 1, "t": 2.0, "event": "run_stop_requested", "run": rid,
                    "by": "user", "reason": "enough", "deadline": 9.0}
        else:
            stop = {"seq": seq + 1, "t": 2.0, "event": "stop_rule_fired", "run": rid,
                    "rule": by_rule, "reason": "loss=nan at step 3", "value": "nan", "step": 3}
        return [stop, {"seq": seq + 2, "t": 3.0, "event": "run_exited", "run": rid,
                       "exit_code": -15}]
    return end


def pilots_done(seq=100):
    """The check and the three pilots ended and the decision taken: full runs follow."""
    out = [{"seq": seq, "t": 0.5, "event": "run_launched", "run": "data_check-s-1",
            "target": "data_check", "kind": "step", "category": "mandatory", "attempt": 1,
            "config_hash": "s"},
           {"seq": seq + 1, "t": 0.6, "event": "run_exited", "run": "data_check-s-1",
            "exit_code": 0}]
    for i, target in enumerate(("control", "lora16", "lora64")):
        rid = f"{target}-p-1"
        out += [{"seq": seq + 2 + 2 * i, "t": 0.7, "event": "run_launched", "run": rid,
                 "target": target, "kind": "pilot", "category": "useful", "attempt": 1,
                 "config_hash": "p"},
                {"seq": seq + 3 + 2 * i, "t": 0.8, "event": "run_exited", "run": rid,
                 "exit_code": 0}]
    return out + [{"seq": seq + 9, "t": 0.9, "event": "decision_taken",
                   "decision": "continue"}]


WRAPPED = [{"seq": 90, "t": 5.0, "event": "wrapup_started"}]  # nothing more will start


def replay(events):
    return _replay(pilots_done() + events)


NO_WIN = Conclusion("no variant meets the bar", (), 0.8, {"control": 0.8, "lora16": 0.79}, True)


def test_a_challenger_stopped_by_a_person_leaves_the_question_open(tmp_path):
    plan = plan_of(tmp_path)
    state = replay(full(1, "control", completed) + full(10, "lora16", stopped_by("user"))
                   + full(20, "lora64", completed))
    v = verdict_of(plan, state, NO_WIN)
    assert v.kind == "inconclusive" and "lora16 stopped (enough)" in v.reason


def test_a_stop_rule_or_a_completed_run_is_an_answer_so_no_is_earned(tmp_path):
    plan = plan_of(tmp_path)
    state = replay(full(1, "control", completed) + full(10, "lora16", completed)
                   + full(20, "lora64", stopped_by("non_finite")))
    assert verdict_of(plan, state, NO_WIN).kind == "no"


def test_a_winner_is_yes_and_a_missing_control_is_inconclusive(tmp_path):
    plan = plan_of(tmp_path)
    state = replay(full(1, "control", completed) + full(10, "lora16", completed) + WRAPPED)
    win = Conclusion("lora16 meets the bar", ("lora16",), 0.8, {}, True)
    assert verdict_of(plan, state, win).kind == "yes"
    lost = Conclusion("inconclusive: no completed control (x)", (), None, {}, False)
    v = verdict_of(plan, state, lost)
    assert v.kind == "inconclusive" and v.reason == "no completed control (x)"


def test_a_challenger_that_never_ran_is_inconclusive(tmp_path):
    plan = plan_of(tmp_path)
    state = replay(full(1, "control", completed) + full(10, "lora16", completed) + WRAPPED)
    v = verdict_of(plan, state, NO_WIN)
    assert v.kind == "inconclusive" and "lora64 never ran" in v.reason


def test_status_json_and_text_say_the_verdict(tmp_path):
    import json

    from clikit import cli
    from enginekit import printer_cmd, write_plan
    from fakeprocs import drive_plan

    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", "5")}
    minutes = 1

    [[variant]]
    id = "b"
    category = "useful"
    command = {printer_cmd("--steps", "5", "--nan-at", "3")}
    minutes = 1

    [[stop]]
    rule = "non_finite"
    """)
    drive_plan(path)
    data = json.loads(cli("status", "--json", str(path), cwd=tmp_path).stdout)
    assert data["verdict"]["verdict"] == "no"  # b was stopped by an announced rule
    text = cli("status", str(path), cwd=tmp_path).stdout
    assert "verdict: answered no" in text and " h left" not in text and "ends in" in text


def test_the_reason_names_only_the_condition_of_the_bar_that_failed(tmp_path):
    from tui.engine.conclusion.outcome import missed_bar

    plan = plan_of(tmp_path)  # min_gain 0.01, threshold 0.80 (max)
    assert missed_bar(plan, 0.855, 0.85) == "gain +0.005 < 0.01"  # 0.855 clears 0.80
    assert missed_bar(plan, 0.79, 0.70) == "val_acc 0.79 < the threshold 0.8"
    assert missed_bar(plan, 0.75, 0.749) == ("gain +0.001 < 0.01 and val_acc 0.75 < the "
                                             "threshold 0.8")
    assert missed_bar(plan, 0.9, 0.85) == ""


def test_a_plan_with_only_a_control_does_not_read_as_every_challenger_dropped(tmp_path):
    path = tmp_path / "campaign.toml"
    path.write_text(SNAP_TOML.split("[[variant]]\nid = \"lora16\"")[0]
                    + "\n[pilot]\nsteps = 10\n")
    plan = load_plan(path, check_files=False)
    events = [e for e in pilots_done() if "lora" not in e.get("run", "")]
    state = _replay(events + full(1, "control", completed))
    only = Conclusion("no variant completed", (), 0.8, {"control": 0.8}, True)
    v = verdict_of(plan, state, only)
    assert v.kind == "inconclusive" and v.reason.startswith("the plan has no challenger")


def test_stopping_or_dropping_the_last_challenger_warns(tmp_path):
    from tui.engine.conclusion.verdict import last_challenger_warning

    plan = plan_of(tmp_path)
    state = replay(full(1, "control", completed) + full(10, "lora16", stopped_by("non_finite"))
                   + [{"seq": 30, "t": 2.0, "event": "run_launched", "run": "lora64-0-1",
                       "target": "lora64", "kind": "run", "category": "exploratory",
                       "attempt": 1, "config_hash": "0"}])
    # lora16 answered (its rule fired); lora64, still running, is the last one in play
    warning = last_challenger_warning(plan, state, ["lora64"])
    assert warning.startswith("lora64 is the last challenger: ") and "inconclusive" in warning
    assert last_challenger_warning(plan, state, ["control"]) is None  # the control's own
    both = replay(full(1, "control", completed) + [
        {"seq": 30 + i, "t": 2.0, "event": "run_launched", "run": f"{v}-0-1", "target": v,
         "kind": "run", "category": "useful", "attempt": 1, "config_hash": "0"}
        for i, v in enumerate(("lora16", "lora64"))])
    assert last_challenger_warning(plan, both, ["lora64"]) is None  # lora16 is still there
    assert "are the last challengers" in last_challenger_warning(plan, both,
                                                                 ["lora16", "lora64"])


def test_the_report_says_when_the_answer_rests_on_a_variant_the_ablation_warned(tmp_path):
    from tui.bundle.answer import ablation_caveat
    from tui.engine.conclusion.verdict import Verdict

    path = tmp_path / "campaign.toml"
    path.write_text(SNAP_TOML.replace('command = ["python", "train.py", "--lora", "16"]',
                                      'command = ["python", "train.py", "--lora", "16", '
                                      '"--lr", "3e-4", "--warmup", "100"]'))
    plan = load_plan(path, check_files=False)
    no = Conclusion("no variant meets the bar", (), 0.8, {"control": 0.8, "lora16": 0.79},
                    True)
    said = ablation_caveat(plan, no, Verdict("no", no.text))
    assert said.startswith("this answer rests on a variant whose ablation check warned "
                           "(lora16: lora16 changes 3 factors")
    assert ablation_caveat(plan, no, Verdict("inconclusive", "x")) is None
