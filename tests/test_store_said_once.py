"""What the mirror says about its store, said once and said true (issue 45 item 6):
a flapping store is one `store_down` and, once it holds, one `store_up`; an off-box
line with nothing waiting says up to date. In-process, against a file:// store whose
filesystem the test takes away and gives back (no process started)."""

from __future__ import annotations


from enginekit import control_only, printer_cmd, wait_for, write_plan
from tui.campaign import load_plan
from tui.engine import Engine
from tui.engine.ledger.events import StoreDown, StoreUp
from tui.store import mirror as mirror_mod
from tui.store import open_store
from tui.store.mirror import Mirror


class Clock:
    """The ledger's clock, moved by the test (the hold is measured on it)."""

    def __init__(self):
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


class FlakyStore:
    """A real file:// store whose filesystem fails while `down` (as a store that does
    not answer: every use of it raises), counting the uses refused and served."""

    def __init__(self, inner):
        self.inner = inner
        self.down = False
        self.refused = 0
        self.served = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    @property
    def fs(self):
        if self.down:
            self.refused += 1
            raise OSError("store unreachable (test)")
        self.served += 1
        return self.inner.fs


def flaky_mirror(tmp_path):
    root = tmp_path / "camp"
    root.mkdir()
    store_url = f"file://{tmp_path}/store"
    path = write_plan(root, control_only(printer_cmd()),
                      extra=f'\n[store]\nurl = "{store_url}"\n')
    plan = load_plan(path)
    clock = Clock()
    engine = Engine(plan, clock=clock, poll_interval=0.05).open()
    said: list = []
    engine.subscribe(lambda ev: said.append(ev) if isinstance(ev, (StoreDown, StoreUp))
                     else None)
    store = FlakyStore(open_store(store_url))
    mirror = Mirror(plan, engine, clock, store=store, backoff_s=0.01, push_every_s=0.01)
    return engine, mirror, store, clock, said


def test_a_flapping_store_is_said_down_once_and_up_once_when_it_holds(tmp_path):
    engine, mirror, store, clock, said = flaky_mirror(tmp_path)
    mirror.start()
    try:
        wait_for(lambda: store.served >= 3, what="the mirror reached the store")
        for _ in range(6):  # a minute of a store down 4 s in every 10
            store.down = True
            n = store.refused
            wait_for(lambda: store.refused >= n + 2, what="the mirror tried the store down")
            clock.t += 4
            store.down = False
            n = store.served
            wait_for(lambda: store.served >= n + 3, what="the mirror reached it again")
            clock.t += 6
        during = [type(ev).__name__ for ev in said]
        assert during == ["StoreDown"], during  # not 6 downs and 6 ups
        assert mirror.status().down_since is None  # the status says it answers now
        clock.t += mirror_mod.UP_HOLD_S  # then it holds
        wait_for(lambda: len(said) == 2, what="store_up once it held")
        up = said[1]
        assert isinstance(up, StoreUp) and up.down_s >= 50, up
        store.down = True  # a new outage after it held is said again
        wait_for(lambda: len(said) == 3, what="a second store_down")
        assert isinstance(said[2], StoreDown)
    finally:
        store.down = False
        mirror.close()
        engine.close()


def test_the_off_box_line_says_up_to_date_once_nothing_waits(tmp_path):
    """A run's logs stored in the closing pass (they wait a while after its exit, and the
    wrap-up closes the mirror sooner) write their store_object lines after the last
    ledger push: the status `itera-tui status` reads later said "27 s behind" (growing)
    with every object stored and the campaign over. Those lines go too, and the line
    says up to date."""
    from tui.engine.ledger.events import RunExited
    from tui.store.status import read_status

    engine, mirror, store, clock, said = flaky_mirror(tmp_path)
    run = "control-1"
    run_dir = mirror.state_dir / "runs" / run
    run_dir.mkdir(parents=True)
    for name in ("stdout.log", "stderr.log", "metrics.jsonl"):
        (run_dir / name).write_text("step 1 loss 0.5 acc=0.1\n")
    mirror.start()
    try:
        wait_for(lambda: mirror.status().stored >= 2, what="the plan and the ledger stored")
        mirror._on_event(RunExited(run=run, exit_code=0, t=clock()))  # as the engine does
        wait_for(lambda: mirror.status().total > 4, what="the exited run's files queued")
    finally:
        mirror.close()
        engine.close()
    clock.t += 27
    st = read_status(mirror.state_dir)
    assert st.stored == st.total and st.stored >= 5, st  # every object stored
    text = st.text(clock.t + 27)
    assert text.endswith("up to date"), text
