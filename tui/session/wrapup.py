"""The wrap-up as one job: stop what runs, wait, build and verify the bundle.

Its life is here and nowhere else: the session starts it (in a thread for
the control room, inline for the command line), it ticks the engine itself
until the runs have exited and their checkpoints are verified, builds the
bundle, records the verdict in the ledger, and keeps its progress lines and
result for whichever face asks.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from .snapshot import WrapupProgress
from ..engine.ledger.events import StoreDelivered

VERIFY_WAIT_S = 120.0
DELIVERY_ATTEMPTS = 3
DELIVERY_PAUSE_S = 5.0


class WrapupJob:
    def __init__(self, engine, poll_interval: float, on_line: Callable[[str], None] | None,
                 mirror=None, helpers=None):
        self.engine = engine
        self.helpers = helpers  # tui.bundle.helpers.WrapupHelpers; the box's own when None
        self.mirror = mirror  # tui.store.mirror.Mirror with [store]: the bundle is delivered
        self.poll_interval = poll_interval
        self.on_line = on_line
        self._lines: list[str] = []
        self._times: list[float] = []
        self.started_t = time.time()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._result: tuple[bool, str] | None = None
        self._thread: threading.Thread | None = None

    # -- running it -------------------------------------------------------
    def start(self) -> None:
        # a plain daemon thread: quitting the room never hangs on a bundle being built
        self._thread = threading.Thread(target=self.run, name="itera-wrapup", daemon=True)
        self._thread.start()

    def run(self) -> bool:
        ok, text = False, "wrap-up failed"
        try:
            ok, text = self._build()
        except ImportError as exc:
            text = (f"wrap-up unavailable: the bundle builder cannot be imported ({exc}). "
                    "Runs were not touched; run `itera-tui wrapup` once it is installed.")
        except OSError as exc:
            text = f"wrap-up failed: {exc.strerror or exc} ({exc.filename or 'bundle'})"
        except Exception as exc:  # a wrap-up must end with words, never a silent thread
            text = f"wrap-up failed: {type(exc).__name__}: {exc}"
        if not ok and text.startswith("wrap-up"):  # no wrapup_done says it: the ledger does
            try:
                self.engine.warn(text)  # (a bundle that did not verify has its wrapup_done)
            except OSError:  # LedgerUnwritable: the engine stops on it and says so; the
                pass  # result below still carries the words
        with self._lock:
            self._result = (ok, text)
        self._done.set()
        return ok

    def _say(self, line: str) -> None:
        with self._lock:
            self._lines.append(str(line))
            self._times.append(time.time())
        if self.on_line is not None:
            self.on_line(str(line))

    def _build(self) -> tuple[bool, str]:
        from ..bundle.wrapup import build_bundle

        engine = self.engine
        before = engine.state.wrapup  # a verified bundle a failed rebuild leaves in place
        engine.begin_wrapup()
        if engine.state.running:
            self._say("stopping the runs still going (a checkpoint first)…")
        while engine.state.running:
            engine.tick()
            time.sleep(self.poll_interval)
        engine.tick()  # collect checkpoint acknowledgements written on the way out
        engine.end_leftovers()  # what the runs left behind gets its SIGKILL before we go
        deadline = time.monotonic() + VERIFY_WAIT_S
        if engine.pending_verifications():
            self._say(f"waiting for {engine.pending_verifications()} checkpoint "
                      "verification(s)…")
        while engine.pending_verifications() and time.monotonic() < deadline:
            engine.tick()
            time.sleep(self.poll_interval)
        parts = ()
        if getattr(engine, "share", None) is not None and engine.share.runs_steps:
            from ..remote.pull import pull_parts  # the first box merges the others' parts

            parts = pull_parts(engine.plan, say=self._say)
        result = build_bundle(engine.plan, progress=self._say, parts=parts,
                              store_url=self.mirror.bundle_url if self.mirror else None,
                              helpers=self.helpers)
        if result.error:  # e.g. no space left on device: staging removed, nothing half-built
            kept = (f"; the bundle verified before ({before.bundle}) is kept as it was"
                    if before is not None and before.state == "done" and before.verified
                    and before.bundle else "")
            if kept:  # the ledger says again what is true: that bundle stands verified
                engine.record_wrapup(bundle=before.bundle, verified=True,
                                     failures=before.failures, bytes=before.bytes,
                                     unverified=dict(before.unverified) or None)
            return False, f"wrap-up failed: {result.error}{kept}"
        engine.record_wrapup(bundle=result.bundle_rel, verified=result.verified,
                             failures=len(result.failures), bytes=result.bytes,
                             unverified=result.unverified)
        for failure in result.failures:
            self._say(f"FAIL {failure['path']}: {failure['problem']}")
        if result.verified:
            where = ""
            if self.mirror is not None:
                where = "; " + self._deliver(result.bundle_rel)
            return True, f"bundle verified: {result.bundle_rel}{where}"
        return False, (f"bundle NOT verified ({len(result.failures)} failures): "
                       f"{result.bundle_rel}")

    def _deliver(self, bundle_rel: str) -> str:
        """The verified bundle to the store, then verified there (tui.store.deliver);
        a store that fails is retried a few times; the verdict is one ledger event."""
        from ..bundle.wrapup import write_fetch_file
        from ..store.deliver import StoredBundleCheck, deliver_bundle, delivery_bound_s
        from ..store.lease import Superseded
        from ..store.status import BundleAtStore
        from ..store.transfer import StoreNotAnswering

        mirror = self.mirror
        bundle = self.engine.plan.root / bundle_rel
        url = mirror.bundle_url
        check = None
        if mirror.kept:  # the store's ledger is the record: its bundle is not replaced
            check = StoredBundleCheck(url, False, 0, 0, (
                "not delivered: the store keeps its own ledger, which this box's does "
                "not extend (see the warning)",), 0.0)
        within_s = delivery_bound_s(mirror.delivery_estimate_s())  # never a hung wrap-up
        for attempt in range(0 if check else DELIVERY_ATTEMPTS):
            try:
                check = deliver_bundle(mirror.store, mirror.layout.bundle, bundle, self._say,
                                       fence=mirror.fence, within_s=within_s)
                break
            except Superseded as exc:  # another box drives the campaign: never retried
                check = StoredBundleCheck(url, False, 0, 0, (f"not delivered: {exc}",), 0.0)
                break
            except StoreNotAnswering as exc:  # it hung past its bound: not tried again
                check = StoredBundleCheck(url, False, 0, 0, (f"delivery failed: {exc}",), 0.0)
                self._say(f"{exc}")
                break
            except Exception as exc:  # down, refused, full: said, retried, then recorded
                problem = f"delivery failed: {type(exc).__name__}: {exc}"[:300]
                check = StoredBundleCheck(url, False, 0, 0, (problem,), 0.0)
                self._say(f"{problem} (attempt {attempt + 1} of {DELIVERY_ATTEMPTS})")
                if attempt + 1 < DELIVERY_ATTEMPTS:
                    time.sleep(DELIVERY_PAUSE_S * (attempt + 1))
        # the status file and FETCH.txt first, the ledger event last: the ending is
        # rebuilt once per ledger event, and reads the status the event announces
        stored = BundleAtStore(check.url, check.verified, check.files, check.bytes,
                               check.failures[:20], check.seconds, time.time())
        try:
            mirror.record_bundle(stored)
        except Exception as exc:  # the index cannot be written there either (the bucket
            # is gone): the delivery's verdict below still stands, and the bundle here too
            self._say(f"the store's index not updated: {type(exc).__name__}: {exc}"[:300])
        if check.verified:  # outputs/FETCH.txt now names the store's copy, as the ending
            write_fetch_file(self.engine.plan, bundle_rel, stored)
        self.engine.note(StoreDelivered(url=check.url, verified=check.verified,
                         files=check.files, bytes=check.bytes, seconds=check.seconds,
                         problems=list(check.failures[:20])))
        for failure in check.failures[:20]:
            self._say(f"FAIL at the store: {failure}")
        if check.verified:
            self._say(f"bundle delivered and verified at {check.url}")
            return f"delivered and verified at {check.url}"
        return f"delivery to the store failed: {stored.why_not} ({check.url})"

    # -- asking about it -------------------------------------------------------
    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def progress(self) -> WrapupProgress:
        with self._lock:
            ok, text = self._result if self._result else (None, None)
            return WrapupProgress(running=not self._done.is_set(), lines=tuple(self._lines),
                                  ok=ok, text=text, attempted=True,
                                  started_t=self.started_t, times=tuple(self._times))
