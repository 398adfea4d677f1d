"""Notices and the decision deadline, piece by piece: `[notify]` as read, addresses
redacted, the rate limit, what each ledger event tells a person, and the deadline
on a real engine driven by a fake clock (real printer processes, time moved by hand)."""

import json
import subprocess
import sys
import time

import pytest

import fakeprocs
from clikit import cli
from conftest import REPO
from enginekit import printer_cmd, write_plan
from tui.engine.ledger.events import parse
from tui.campaign import PlanError, load_plan
from tui.campaign.notify_plan import (DEFAULT_ON, NoticeKind, redact_url, redacted_raw,
                                      scrub)
from tui.engine import Engine, read_ledger
from tui.engine.decision.answer import WRAPUP
from tui.engine.decision.deadline import decision_wait_text
from tui.notify import Composer, Notice, RateLimit, resolve_addresses

TOKEN = "s3cretTOKEN42"


# -- addresses and their secrets ---------------------------------------------------

@pytest.mark.parametrize("url, shown", [
    (f"json://127.0.0.1:8080/hook/{TOKEN}", "json://127.0.0.1:8080/***"),
    (f"ntfys://ntfy.sh/{TOKEN}", "ntfys://ntfy.sh/***"),
    (f"tgram://123456:{TOKEN}/987", "tgram://***/***"),
    (f"discord://1234/{TOKEN}", "discord://***/***"),
    (f"mailto://ann:{TOKEN}@gmail.com", "mailto://***@gmail.com"),
    (f"slack://{TOKEN}/B0/C0", "slack://***/***"),
    (f"json://localhost?token={TOKEN}", "json://localhost/***"),
    ("not a url", "***"),
])
def test_an_address_is_shown_with_its_secrets_hidden(url, shown):
    assert redact_url(url) == shown
    assert TOKEN not in redact_url(url)
    if TOKEN in url:  # a library's error message quoting the address and its token
        assert TOKEN not in scrub(f"error posting to {url}: {TOKEN} refused", [url])


def test_the_frozen_plan_form_keeps_no_token_and_leaves_the_rest():
    raw = {"campaign": {"name": "x"}, "notify": {"urls": [f"ntfys://ntfy.sh/{TOKEN}"],
                                                 "on": ["stop"]}}
    out = redacted_raw(raw)
    assert out["notify"] == {"urls": ["ntfys://ntfy.sh/***"], "on": ["stop"]}
    assert raw["notify"]["urls"] == [f"ntfys://ntfy.sh/{TOKEN}"]  # the user's, untouched
    assert redacted_raw({"campaign": {}}) == {"campaign": {}}


def notify_plan(tmp_path, notify: str, pilot: str = ""):
    variants = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", "5")}
    minutes = 1
    """
    return write_plan(tmp_path, variants, notify, pilot=pilot)


def test_notify_is_read_with_defaults_and_every_source(tmp_path, monkeypatch):
    secrets = tmp_path.parent / f"{tmp_path.name}-urls.txt"  # outside the campaign folder
    secrets.write_text(f"# mine\njson://127.0.0.1:9/a/{TOKEN}\n\nntfys://ntfy.sh/{TOKEN}\n")
    path = notify_plan(tmp_path, f"""
    [notify]
    urls = ["json://127.0.0.1:9/a/{TOKEN}"]
    urls_env = "ITERA_TEST_URLS"
    urls_file = "{secrets}"
    """)
    plan = load_plan(path)
    assert plan.notify.on == DEFAULT_ON and "stop" not in plan.notify.on
    assert plan.notify.window_lead_minutes == 60 and plan.notify.attempts == 3
    monkeypatch.setenv("ITERA_TEST_URLS", f"tgram://1:{TOKEN}/2 json://127.0.0.1:9/b")
    addresses = resolve_addresses(plan.notify)
    assert addresses.urls == (f"json://127.0.0.1:9/a/{TOKEN}", f"tgram://1:{TOKEN}/2",
                              "json://127.0.0.1:9/b", f"ntfys://ntfy.sh/{TOKEN}")
    assert not addresses.problems
    monkeypatch.delenv("ITERA_TEST_URLS")
    assert resolve_addresses(plan.notify).problems == (
        "$ITERA_TEST_URLS is not set: no address from it",)


@pytest.mark.parametrize("notify, problem", [
    ('urls = ["x"]\non = ["stopp"]', 'notify.on[0]: unknown kind "stopp" (did you mean "stop"?)'),
    ('urls = ["nourl"]', "notify.urls[0]: \"***\" is not an Apprise URL"),
    ('urls_file = "secrets.txt"', "notify.urls_file: \"secrets.txt\": give a path outside"),
    ('urls_file = "{root}/secrets.txt"', "is inside the campaign folder"),
    ('on = ["stop"]', "notify: needs urls, urls_env or urls_file"),
    ('urls = ["json://h.example/x"]\nsecret = 1', "notify.secret: unknown key"),
])
def test_a_bad_notify_table_is_one_clear_message(tmp_path, notify, problem):
    path = notify_plan(tmp_path, "[notify]\n" + notify.replace("{root}", str(tmp_path)))
    with pytest.raises(PlanError) as err:
        load_plan(path)
    assert any(problem in p for p in err.value.problems), err.value.problems


@pytest.mark.parametrize("pilot, problem", [
    ('decide = "continue"\ndecide_after_minutes = 5', "only with decide = \"ask\""),
    ('default = "wrapup"', "pilot.default: needs decide_after_minutes"),
    ('decide_after_minutes = 5\ndefault = "later"', "pilot.default: expected continue|wrapup"),
    ('decide_after_minutes = -1', "pilot.decide_after_minutes: must be greater than 0"),
])
def test_a_bad_deadline_is_refused_by_the_loader(tmp_path, pilot, problem):
    path = notify_plan(tmp_path, "", pilot="[pilot]\nsteps = 3\n" + pilot + "\n")
    with pytest.raises(PlanError) as err:
        load_plan(path)
    assert any(problem in p for p in err.value.problems), err.value.problems


# -- the rate limit ------------------------------------------------------------------

def notice(kind=NoticeKind.STOP, run="r1", t=0.0) -> Notice:
    return Notice(kind, f"title {run}", "body", f"{kind.value}:{run}", t)


def test_a_thousand_stops_of_one_run_are_one_notice_and_the_rest_is_counted():
    limit = RateLimit(quiet_s=1800)
    allowed = [limit.allow(notice(t=i * 0.001)) for i in range(1000)]
    assert allowed.count(True) == 1 and allowed[0]
    assert limit.held_back(NoticeKind.STOP) == 999 and limit.held_back(NoticeKind.STOP) == 0
    assert limit.allow(notice(t=1800.0))  # the quiet period is over: told again


def test_many_runs_of_one_kind_are_bounded_per_kind_but_other_kinds_go_on():
    limit = RateLimit(quiet_s=1800, burst=3)
    sent = [limit.allow(notice(run=f"r{i}", t=i)) for i in range(10)]
    assert sent == [True] * 3 + [False] * 7
    assert limit.allow(notice(kind=NoticeKind.FAILED, run="r9", t=11))


# -- what the events tell ----------------------------------------------------------------

class Frozen:
    """A snapshot source over a replayed ledger (the composer reads state and phase)."""

    def __init__(self, plan, events):
        from tui.engine import replay
        from tui.engine.scheduler import phase_of

        self.state = replay(events)
        self.phase = phase_of(plan, self.state)


def compose_all(plan, events, history=(), **kw):
    """`history`: the ledger as the engine read it at open, before these events."""
    composer = Composer(plan, lambda: Frozen(plan, [*history, *events]),
                        history=lambda: list(history), **kw)
    return [composer.compose(ev) for ev in events]


def ev(seq, event, t=1.8e9, **fields):
    return parse({"seq": seq, "t": t + seq, "event": event, **fields})


def test_each_event_a_person_needs_is_one_short_notice(tmp_path):
    plan = load_plan(notify_plan(tmp_path, '[notify]\nurls = ["json://h.example/x"]\n'))
    events = [ev(2, "engine_started"),  # the last start has no engine_stopped: a crash
              ev(3, "warning", message="GPU 1 is lost while r is alive"),
              ev(4, "warning", message="GPU 0 idle for 10 min while r is alive"),
              ev(5, "warning", message="notice not delivered: stop \"x\": refused"),
              ev(6, "warning", message="campaign.toml changed since the campaign started"),
              ev(7, "checkpoint_verified", run="r", ok=False, path="c.pt", problem="bad zip"),
              ev(8, "checkpoint_verified", run="r", ok=True, path="c.pt"),
              ev(9, "decision_taken", decision="continue", by="user"),
              ev(10, "decision_taken", decision="drop", drop=["b"], by="deadline",
                 note="no answer within 30 min"),
              ev(11, "warning", message="wrap-up failed: no space left on device: outputs")]
    out = compose_all(plan, events, history=[ev(1, "engine_started")])
    kinds = [n.kind if n else None for n in out]
    assert kinds == [NoticeKind.RESTART, NoticeKind.GPU, NoticeKind.GPU, None, None,
                     NoticeKind.CHECKPOINT, None, None, NoticeKind.DEADLINE,
                     NoticeKind.WRAPUP_FAILED]
    assert out[1].key != out[2].key  # lost and idle are not one rate-limit key
    assert "drop b, then continue" in out[8].title and "by = \"deadline\"" in out[8].body
    clean = [ev(1, "engine_started"), ev(2, "engine_stopped")]
    assert compose_all(plan, [ev(3, "engine_started")], history=clean) == [None]
    assert compose_all(plan, [ev(1, "engine_started")]) == [None]  # the first start
    assert all(n.title.startswith("t: ") for n in out if n)  # names the campaign


def test_a_decision_given_in_advance_waits_for_nobody_and_is_not_sent(tmp_path):
    plan = load_plan(notify_plan(tmp_path, '[notify]\nurls = ["json://h.example/x"]\n'))
    assert compose_all(plan, [ev(1, "decision_pending", pilot={}, auto="continue")]) == [None]
    (waits,) = compose_all(plan, [ev(1, "decision_pending", pilot={
        "control": {"state": "completed", "metric": 0.61, "step": 3}})])
    assert "control completed (acc 0.61, step 3)" in waits.body
    assert "The queue waits for you" in waits.body


def test_text_a_run_controls_reaches_the_notice_printable_and_bounded(tmp_path):
    plan = load_plan(notify_plan(tmp_path, '[notify]\nurls = ["json://h.example/x"]\n'))
    (n,) = compose_all(plan, [ev(1, "checkpoint_verified", run="r", ok=False, path="p",
                                 problem="\x1b[31mred\x07" + "x" * 5000)])
    assert "\x1b" not in n.body and "\x07" not in n.body and len(n.body) <= 400


# -- the deadline on a real engine with a fake clock ------------------------------------

class FakeClock(fakeprocs.FakeClock):
    """The engine's fake clocks and processes (tests/fakeprocs.py), the wall clock set by
    the test through `now` (both clocks move: time passes)."""

    def __init__(self):
        super().__init__()
        self.procs = fakeprocs.FakeProcesses(self)

    @property
    def now(self) -> float:
        return self.wall()

    @now.setter
    def now(self, t: float) -> None:
        self.advance(t - self.wall())

    def __call__(self) -> float:
        return self.wall()

    def engine(self, path) -> Engine:
        return Engine(load_plan(path), clock=self, monotonic=self.mono, poll_interval=0.05,
                      processes=self.procs).open()


PILOT = """
[pilot]
steps = 3
decide = "ask"
decide_after_minutes = 30
default = "drop-stopped"
"""


def deadline_plan(tmp_path):
    variants = "".join(f"""
    [[variant]]
    id = "{vid}"
    category = "{cat}"
    command = {printer_cmd("--steps", "6", "--sleep", "0.01", *extra)}
    minutes = 1
    """ for vid, cat, extra in (("control", "mandatory", ()), ("b", "useful", ()),
                                ("hot", "exploratory", ("--nan-at", "2"))))
    return write_plan(tmp_path, variants, '[[stop]]\nrule = "non_finite"\n', pilot=PILOT)


def at_decision(path, clock):
    engine = clock.engine(path)
    fakeprocs.tick_until(engine, clock.procs, clock, lambda: engine.snapshot().phase ==
                         "decision" and engine.state.decision_pending is not None,
                         "the decision point")
    return engine


def test_nobody_answers_so_the_engine_takes_the_default_at_the_deadline(tmp_path):
    clock = FakeClock()
    engine = at_decision(deadline_plan(tmp_path), clock)
    try:
        pending = engine.state.decision_pending
        assert pending.deadline == pytest.approx(pending.t + 30 * 60)
        assert pending.default == "drop-stopped"
        clock.now = pending.deadline - 1  # a second early: it still waits
        for _ in range(3):
            engine.tick()
        assert engine.state.decided is None and engine.snapshot().phase == "decision"
        clock.now = pending.deadline
        engine.tick()
        decided = engine.state.decided
        assert (decided.decision, decided.drop, decided.by) == ("drop", ("hot",), "deadline")
        assert decided.waited_s == pytest.approx(30 * 60)
        assert engine.state.dropped == {"hot"}  # stopped by non_finite in its pilot
        text = decision_wait_text(engine.plan, engine.state)
        assert text == "GPUs idle waiting for a decision: 30 min (50.0 % of the window)"
    finally:
        engine.close()
    ledger = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
    (taken,) = [e for e in ledger if e["event"] == "decision_taken"]
    assert taken["by"] == "deadline" and taken["note"] == "no answer within 30 min"


def test_an_answer_before_the_deadline_cancels_it(tmp_path):
    clock = FakeClock()
    engine = at_decision(deadline_plan(tmp_path), clock)
    try:
        clock.now = engine.state.decision_pending.t + 10 * 60
        engine.decide(WRAPUP)
        clock.now += 3600  # long past the deadline: nothing more is decided
        for _ in range(3):
            engine.tick()
        assert [(d.decision, d.by) for d in engine.state.decisions] == [("wrapup", "user")]
        assert engine.state.decided.waited_s == pytest.approx(600)
    finally:
        engine.close()


def test_the_deadline_outlives_a_restart_of_the_engine(tmp_path):
    clock = FakeClock()
    path = deadline_plan(tmp_path)
    engine = at_decision(path, clock)
    deadline = engine.state.decision_pending.deadline
    engine.close()
    clock.now = deadline + 5  # the engine was down when the deadline passed
    engine = clock.engine(path)
    try:
        engine.tick()
        assert engine.state.decided.by == "deadline"
        assert engine.state.decided.waited_s == pytest.approx(deadline + 5 -
                                                              engine.state.decided.pending_t)
    finally:
        engine.close()


# -- check shows and bounds the deadline ----------------------------------------------------

def test_check_shows_the_deadline_in_the_calendar_and_refuses_one_longer_than_the_slack(
        tmp_path):
    path = deadline_plan(tmp_path)  # a 1 h lot: the calendar leaves about 26 min of slack
    path.write_text(path.read_text().replace("decide_after_minutes = 30",
                                             "decide_after_minutes = 20"))
    proc = cli("check", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "decision (<= 20 min)" in proc.stdout
    path.write_text(path.read_text().replace("decide_after_minutes = 20",
                                             "decide_after_minutes = 90"))
    proc = cli("check", str(path), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "pilot.decide_after_minutes: a 1 h 30 min deadline" in proc.stderr
    assert "more than its slack" in proc.stderr


@pytest.mark.slow
def test_importing_the_notices_loads_no_apprise_textual_or_torch():
    code = ("import tui.notify, sys, json; print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    loaded = set(json.loads(out.strip().splitlines()[-1]))
    assert not {"apprise", "textual", "torch"} & loaded
