"""What a damaged ledger lost, and whether the engine may go on from it.

Reading a ledger yields its replayable events *and* a `LedgerDamage` per line
that could not be replayed: which line, which seq (read from the line, or
inferred from its neighbours: "seq 14?"), and what it was, when that is still
recognisable. Seqs are consecutive, so a line deleted outright shows as a gap.

Most losses are survivable and only reported (a warning lost, a checkpoint the
run's metrics will acknowledge again). Some are not: without its
`run_launched` a finished run is launched again into its old directory,
without `window_started` the rental window restarts, and an empty ledger
beside run directories would silently start the campaign over. For those,
`LedgerReport.fatal` says why, and `check_can_open` refuses with a message a
user can act on: the engine never guesses what a lost line said.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .events import CRITICAL_KINDS as CRITICAL, EVENT_TYPES

# events whose `run` field says the ledger knows that run's directory
CLAIMING_EVENTS = frozenset({"run_launched", "run_launch_intent"})


@dataclass(frozen=True)
class Decoded:
    """One line as read: a replayable event, or the problem and a best guess."""

    event: dict | None = None
    problem: str | None = None
    checked: bool = False  # carried a checksum that matched
    seq_guess: int | None = None
    event_guess: str | None = None


@dataclass(frozen=True)
class LedgerDamage:
    """One damaged or missing stretch of the ledger, with what it cost."""
    line: int | None  # 1-based line of ledger.jsonl; None for lines deleted outright
    seq: int | None  # the seq it had (the first one missing, for deleted lines)
    seq_sure: bool  # False when read from a damaged line or inferred ("seq 14?")
    problem: str  # "checksum mismatch", "field 'start' must be a finite number, ..."
    event: str | None  # the event type the line was (or seems to have been)
    lost_count: int  # events lost: 0 (junk, a duplicate), 1, or N lines deleted

    @property
    def unknown_loss(self) -> bool:
        return self.lost_count > 0 and (self.event is None or self.event not in EVENT_TYPES)

    @property
    def consequence(self) -> str | None:
        """What going on would do wrong, when the lost event matters that much."""
        return CRITICAL.get(self.event) if self.lost_count else None

    @property
    def text(self) -> str:
        if self.line is None:
            seqs = (f"seq {self.seq}" if self.lost_count == 1 else
                    f"seqs {self.seq}-{self.seq + self.lost_count - 1}" if self.seq is not None
                    else f"{self.lost_count} seqs")
            return f"{seqs}: {self.problem}; {_events(self.lost_count)} lost"
        where = f"line {self.line}"
        if self.seq is not None:
            where += f" (seq {self.seq}{'' if self.seq_sure else '?'})"
        if self.lost_count == 0:
            seems = f" (a {self.event} line)" if self.event else ""
            return f"{where}: {self.problem}{seems}; nothing lost"
        what = f"a {self.event} event" if self.event else "an unknown event"
        return f"{where}: {self.problem}; {what} lost"

    def to_dict(self) -> dict:
        return {"line": self.line, "seq": self.seq, "seq_sure": self.seq_sure,
                "problem": self.problem, "event": self.event, "lost_count": self.lost_count,
                "text": self.text}


def _events(n: int) -> str:
    return "an unknown event" if n == 1 else f"{n} unknown events"


@dataclass(frozen=True)
class LedgerReport:
    """What reading the ledger found: the events, the damage, and whether going on is safe."""
    exists: bool = False
    events: tuple[dict, ...] = ()
    damage: tuple[LedgerDamage, ...] = ()
    torn_tail_bytes: int = 0  # after the last newline: being written, or cut on next open
    legacy_lines: int = 0  # replayable lines from before checksums
    last_seq: int = 0  # the highest seq the file holds or held (damaged lines count)
    unknown_run_dirs: tuple[str, ...] = ()  # non-empty run directories no event claims
    fatal: str | None = None  # why going on from this ledger would relaunch or reset

    @property
    def empty(self) -> bool:
        return not self.events and not self.damage

    def to_dict(self) -> dict:
        return {"events": len(self.events), "legacy_lines": self.legacy_lines,
                "damage": [d.to_dict() for d in self.damage],
                "torn_tail_bytes": self.torn_tail_bytes,
                "unknown_run_dirs": list(self.unknown_run_dirs), "fatal": self.fatal}


def assess(lines: list[tuple[int, Decoded]], exists: bool, runs_dir: Path | None = None,
           torn_tail_bytes: int = 0) -> LedgerReport:
    """Fold decoded lines (in file order) into events, damage and the verdict."""
    events: list[dict] = []
    damage: list[LedgerDamage] = []
    pending: list[tuple[int, Decoded]] = []  # damaged lines since the last good event
    last = highest = 0
    for number, decoded in lines:
        if decoded.event is None:
            pending.append((number, decoded))
            continue
        seq = decoded.event.seq
        highest = max(highest, seq)
        if decoded.checked and seq <= last:  # a copied line would apply an event twice
            damage += _between(pending, last, None)
            pending = []
            damage.append(LedgerDamage(number, seq, True, f"seq {seq} again after seq {last} "
                                       "(a duplicated or reordered line), not replayed",
                                       decoded.event.kind_name, 0))
            continue
        damage += _between(pending, last, seq if seq > last else None)
        pending = []
        events.append(decoded.event)
        last = max(last, seq)
    damage += _between(pending, last, None)
    for d in damage:  # a damaged line's seq, even inferred, is never given out again
        if d.seq is not None and d.lost_count:
            highest = max(highest, d.seq + d.lost_count - 1)
    unknown = _unknown_run_dirs(runs_dir, events)
    legacy = sum(1 for _, d in lines if d.event is not None and not d.checked)
    return LedgerReport(exists=exists, events=tuple(events), damage=tuple(damage),
                        torn_tail_bytes=torn_tail_bytes, legacy_lines=legacy,
                        last_seq=highest, unknown_run_dirs=unknown,
                        fatal=_fatal(events, damage, unknown))


def _between(bad: list[tuple[int, Decoded]], before: int, after: int | None) -> list:
    """Damage for the damaged lines between good seqs `before` and `after` (None: the end
    or unknown), and for seqs missing there with no line at all (deleted lines)."""
    room = None if after is None else after - before - 1  # seqs that fit between
    out = []
    for i, (number, d) in enumerate(bad):
        if d.seq_guess is not None and d.seq_guess > before and (after is None
                                                                 or d.seq_guess < after):
            seq = d.seq_guess
        elif room is None or room == len(bad):
            seq = before + 1 + i
        else:
            seq = None
        lost = 0 if room == 0 else 1  # consecutive neighbours: the line held no event
        out.append(LedgerDamage(number, seq, False, d.problem or "damaged", d.event_guess,
                                lost))
    missing = 0 if room is None else room - sum(1 for x in out if x.lost_count)
    if missing > 0:
        first = before + 1 if not bad else None
        out.append(LedgerDamage(None, first, first is not None, "missing (line deleted)",
                                None, missing))
    return out


def _unknown_run_dirs(runs_dir: Path | None, events: list[dict]) -> tuple[str, ...]:
    if runs_dir is None:
        return ()
    known = {ev.run for ev in events if ev.kind_name in CLAIMING_EVENTS}
    return tuple(name for name in run_dirs(runs_dir) if name not in known)


def run_dirs(runs_dir: Path) -> list[str]:
    """Names of the run directories that hold anything (an empty one lost nothing)."""
    try:
        entries = sorted(p for p in Path(runs_dir).iterdir() if p.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [p.name for p in entries if any(p.iterdir())]


def _fatal(events: list[dict], damage: list[LedgerDamage], unknown: tuple[str, ...]):
    for d in damage:
        if d.consequence:
            return f"{d.text} ({d.consequence})"
    unknown_loss = [d for d in damage if d.unknown_loss]
    if not unknown_loss:
        return None
    kinds = {ev.kind_name for ev in events}
    first = unknown_loss[0].text
    for needed in ("campaign_started", "window_started"):
        if needed not in kinds:
            return f"{first}, and no {needed} event is left ({CRITICAL[needed]})"
    if unknown:
        return (f"{first}, and run directory {unknown[0]} has no run_launched event "
                f"({CRITICAL['run_launched']})")
    return None


def open_refusal(state_dir: Path, report: LedgerReport,
                 strict_run_dirs: bool = False) -> str | None:
    """Why the engine refuses to open this ledger (check_can_open's words), or None;
    `status` shows the same words as its `fatal`, an empty ledger's refusal included."""
    state_dir = Path(state_dir)
    runs_dir = state_dir / "runs"
    name = f"{state_dir.name}/ledger.jsonl"
    aside = (f"move {state_dir.name}/ aside (`itera-tui new` archives it with the outputs, "
             f"or mv {state_dir.name} {state_dir.name}.old)")
    fatal = report.fatal
    if fatal is None and strict_run_dirs and report.unknown_run_dirs:
        fatal = (f"run directory {report.unknown_run_dirs[0]} has no run_launched event "
                 f"({CRITICAL['run_launched']})")
    if fatal is not None:
        return (f"{name} is damaged where it matters: {fatal}. Restore the "
                f"ledger from a copy (a bundle holds one), or {aside} to start "
                "afresh on purpose; `itera-tui status` lists every damaged line.")
    found = run_dirs(runs_dir) if report.empty else []
    if found:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        state = "is empty" if report.exists else "is missing"
        return (f"{name} {state} but {state_dir.name}/runs/ holds {len(found)} "
                f"run director{'y' if len(found) == 1 else 'ies'} ({shown}): "
                "refusing to start the campaign over. To start afresh on purpose, "
                f"{aside} and start again.")
    return None


def damage_warnings(report: LedgerReport, known: set[str] | frozenset = frozenset()) -> list:
    """One warning text per damaged line not already among `known` warning texts, so a
    restart reports the damage it finds once, in the ledger, for every face."""
    texts = [f"ledger damage: {d.text}" for d in report.damage]
    texts += [f"ledger: run directory {name} is not in the ledger"
              for name in report.unknown_run_dirs]
    return [t for t in texts if t not in known]
