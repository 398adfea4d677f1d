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

VERIFY_WAIT_S = 120.0


class WrapupJob:
    def __init__(self, engine, poll_interval: float, on_line: Callable[[str], None] | None):
        self.engine = engine
        self.poll_interval = poll_interval
        self.on_line = on_line
        self._lines: list[str] = []
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
        result = build_bundle(engine.plan, progress=self._say, parts=parts)
        if result.error:  # e.g. no space left on device: staging removed, nothing half-built
            kept = (f"; the bundle verified before ({before.bundle}) is kept as it was"
                    if before is not None and before.state == "done" and before.verified
                    and before.bundle else "")
            return False, f"wrap-up failed: {result.error}{kept}"
        engine.record_wrapup(bundle=result.bundle_rel, verified=result.verified,
                             failures=len(result.failures), bytes=result.bytes,
                             unverified=result.unverified)
        for failure in result.failures:
            self._say(f"FAIL {failure['path']}: {failure['problem']}")
        if result.verified:
            return True, f"bundle verified: {result.bundle_rel}"
        return False, (f"bundle NOT verified ({len(result.failures)} failures): "
                       f"{result.bundle_rel}")

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
                                  ok=ok, text=text, attempted=True)
