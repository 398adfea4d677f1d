"""The room's update thread (`tui/app/pump.py`) on a fake session and a fake clock.

README: "a finished campaign left open for days costs next to nothing": when
nothing can change by itself the pump steps only every `idle_interval`, until a
key or an event (an urgent request) wakes it. Each step records the fake clock,
and the pump's reads of the clock tell when it has handled a request (it reads
the clock once per wake-up), so no check waits a fixed time."""

from types import SimpleNamespace

from enginekit import wait_for
from tui.app.pump import SessionPump


class FakeSession:
    """Counts steps (at the fake clock's time); every snapshot says `idle`."""

    def __init__(self, clock: list[float], idle: bool):
        self.clock, self.idle, self.steps = clock, idle, []

    def step(self, tick: bool = True, sample: bool = True):
        self.steps.append((self.clock.now, tick))
        engine = SimpleNamespace(state=SimpleNamespace(events=len(self.steps)), phase="done",
                                 live={})
        return SimpleNamespace(tick_error=None, idle=self.idle, state=engine.state,
                               engine=engine, probe=None, wrapup=None)


class FakeClock:
    def __init__(self):
        self.now, self.reads = 0.0, 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


def pump_on(idle: bool):
    clock = FakeClock()
    session = FakeSession(clock, idle)
    delivered: list = []
    pump = SessionPump(session, delivered.append, lambda text: None, idle_interval=15.0,
                       monotonic=clock)
    pump.start()
    wait_for(lambda: delivered, what="the first frame")  # the step before any tick
    return pump, session, clock


def handled(pump, clock, urgent: bool = False) -> None:
    """Request a step and wait until the pump has woken up for it and read the clock."""
    before = clock.reads
    pump.request(urgent)
    wait_for(lambda: clock.reads > before, what="the pump to handle the request")


def ticked_at(session) -> list[float]:
    return [t for t, tick in session.steps if tick]


def test_an_idle_room_steps_once_per_idle_interval_until_a_key_wakes_it():
    pump, session, clock = pump_on(idle=True)
    try:
        pump.request()
        wait_for(lambda: ticked_at(session) == [0.0], what="the first tick")
        clock.now = 5.0
        for _ in range(3):
            handled(pump, clock)  # timer ticks inside the idle interval: no step
        clock.now = 6.0
        pump.request(urgent=True)  # a key: steps at once
        wait_for(lambda: 6.0 in ticked_at(session), what="the urgent step")
        assert ticked_at(session) == [0.0, 6.0]
        clock.now = 21.5  # the idle interval is over: a timer tick steps again
        pump.request()
        wait_for(lambda: 21.5 in ticked_at(session), what="the step after the interval")
        assert ticked_at(session) == [0.0, 6.0, 21.5]
    finally:
        pump.stop()


def test_a_live_room_steps_on_every_timer_tick():
    pump, session, clock = pump_on(idle=False)
    try:
        for t in (1.0, 2.0, 3.0):
            clock.now = t
            pump.request()
            wait_for(lambda t=t: t in ticked_at(session), what=f"the step at {t}")
        assert ticked_at(session) == [1.0, 2.0, 3.0]
    finally:
        pump.stop()


class PushingSession(FakeSession):
    """A source in another process: it pushes, and says so (the engine's client)."""

    def __init__(self, clock, idle):
        super().__init__(clock, idle)
        self.callbacks = []

    def on_snapshot(self, callback) -> bool:
        self.callbacks.append(callback)
        return True


def test_a_pushing_source_is_stepped_on_each_push_even_while_idle():
    clock = FakeClock()
    session = PushingSession(clock, idle=True)
    delivered: list = []
    pump = SessionPump(session, delivered.append, lambda text: None, idle_interval=15.0,
                       monotonic=clock)
    assert pump.follow_pushes() and pump.pushed and len(session.callbacks) == 1
    pump.start()
    try:
        wait_for(lambda: delivered, what="the first frame")
        clock.now = 1.0  # well inside the idle interval: a timer's request would be skipped
        before = len(session.steps)
        session.callbacks[0]()  # the engine's snapshot arrives
        wait_for(lambda: len(session.steps) > before, what="a step for the push")
        wait_for(lambda: len(delivered) >= 2, what="the pushed snapshot delivered")
    finally:
        pump.stop()


def test_a_source_that_must_be_stepped_is_not_taken_for_a_pushing_one():
    clock = FakeClock()
    pump = SessionPump(FakeSession(clock, idle=False), lambda snap: None, lambda text: None,
                       monotonic=clock)
    assert not pump.follow_pushes() and not pump.pushed
