"""`[retry]`: which failures are hiccups worth another attempt, and how many.

A run killed by the OOM killer (exit 137), an NCCL timeout or a Xid error at
3 a.m. is not the variant's answer: another attempt from its last verified
checkpoint usually finishes it. `[retry]` names what marks such a hiccup (an
exit status, a text in the run's last lines) and how many attempts after the
first a run may have; a `[[variant]]` may override any of its keys with its
own `retry = {...}` (as it has its own `params`), e.g. `retry = {max = 0}`.

An exit status is compared as a signal when it is one: `-9` (the launcher's
word for "killed by SIGKILL") and `137` (128 + 9, how a shell or a launcher
such as torchrun reports the same death) match each other, so `on_exit =
[137]` holds whichever of the two the run's own launcher left. The texts are
matched case-insensitively in the last lines of the run's stderr and stdout.
Pure: the engine decides with it (`tui.engine.retry`), `check` explains it.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, replace

from .validate import Reader, describe

RETRY_KEYS = ("max", "on_exit", "on_output")
MAX_RETRIES = 10  # more than this is a loop, not a hiccup
SHELL_SIGNAL_BASE = 128  # a shell reports a death by signal N as 128 + N


@dataclass(frozen=True)
class RetryPolicy:
    """What marks a failure as a hiccup, and how many attempts after the first it earns."""
    max: int = 1
    on_exit: tuple[int, ...] = ()
    on_output: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return self.max > 0 and bool(self.on_exit or self.on_output)

    def hiccup(self, exit_code: int | None, last_lines) -> str | None:
        """What makes this failure a hiccup, in words ("exit -9 (killed by SIGKILL)",
        "its output says 'NCCL timeout'"), or None when nothing listed matches."""
        if exit_code is not None and exit_code != 0 and \
                same_death(exit_code) & {c for code in self.on_exit for c in same_death(code)}:
            return exit_words(exit_code)
        lowered = [line.lower() for line in last_lines]
        for text in self.on_output:
            if any(text.lower() in line for line in lowered):
                return f"its output says {text!r}"
        return None


def same_death(code: int) -> set[int]:
    """The codes that name the same end: a signal's -N and the shell's 128 + N."""
    if code < 0:
        return {code, SHELL_SIGNAL_BASE - code}
    if SHELL_SIGNAL_BASE < code < SHELL_SIGNAL_BASE + 65:
        return {code, SHELL_SIGNAL_BASE - code}
    return {code}


def exit_words(code: int | None) -> str:
    """`exit -9 (killed by SIGKILL)`, `exit 137 (SIGKILL as a shell reports it)`, `exit 1`."""
    if code is None:
        return "no exit status"
    number = -code if code < 0 else code - SHELL_SIGNAL_BASE
    try:
        name = signal.Signals(number).name if code < 0 or code > SHELL_SIGNAL_BASE else None
    except ValueError:
        name = None
    if name is None:
        return f"exit {code}"
    return f"exit {code} (killed by {name})" if code < 0 else \
        f"exit {code} ({name} as a shell reports it)"


def _both(code: int) -> str:
    """`exit 137 or -9 (killed by SIGKILL)`: a listed status with its twin, for `check`."""
    twins = sorted(same_death(code), key=lambda c: (c < 0, c))
    words = exit_words(min(twins))
    cause = words[words.index("("):].replace(" as a shell reports it", "") \
        if "(" in words else ""
    return f"exit {' or '.join(str(c) for c in twins)}" + (f" {cause}" if cause else "")


def read_retry(table, path: str, problems: list[str],
               base: RetryPolicy | None = None) -> RetryPolicy | None:
    """`[retry]` (base None), or a variant's `retry = {...}` over the campaign's `base`:
    the keys it gives replace the campaign's, the others stay."""
    if table is None:
        return base
    r = Reader(table, path, problems)
    policy = base or RetryPolicy()
    given = {}
    if "max" in r.table:
        given["max"] = r.get_int("max", 1, minimum=0)
        if given["max"] is not None and given["max"] > MAX_RETRIES:
            r.problem("max", f"at most {MAX_RETRIES} attempts after the first (a failure that "
                      f"comes back {given['max']} times is no hiccup), got {given['max']}")
    if "on_exit" in r.table:
        given["on_exit"] = _exit_codes(r)
    if "on_output" in r.table:
        given["on_output"] = r.get_str_list("on_output")
        if any(not text.strip() for text in given["on_output"]):
            r.problem("on_output", "an empty text matches every line: name the text that "
                      "marks a hiccup (\"NCCL timeout\", \"Xid\")")
    r.reject_unknown(RETRY_KEYS)
    policy = replace(policy, **{k: v for k, v in given.items() if v is not None})
    if policy.max > 0 and not (policy.on_exit or policy.on_output):
        r.problem("", "names no hiccup: give on_exit (exit statuses, e.g. [137, -9]) or "
                  "on_output (texts of the run's last lines, e.g. [\"NCCL timeout\"]), or "
                  "max = 0")
    return policy


def _exit_codes(r: Reader) -> tuple[int, ...]:
    value = r.raw("on_exit")
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                              for v in value):
        r.problem("on_exit", f"expected an array of exit statuses (integers; negative for a "
                  f"signal, e.g. -9), got {describe(value)}")
        return ()
    for code in value:
        if code == 0 or not -64 <= code <= 255:
            r.problem("on_exit", f"{code} is no failure's exit status (1 to 255, or -1 to "
                      "-64 for a signal)")
    return tuple(value)


def retry_line(policy: RetryPolicy | None, who: str) -> str | None:
    """What `check` says of one policy: what it retries, how often, from where."""
    if policy is None:
        return None
    if not policy.active:
        return f"{who}: no retry (max = 0)" if policy.max == 0 else None
    marks = [_both(code) for code in policy.on_exit]
    marks += [f"a last line containing {text!r}" for text in policy.on_output]
    return (f"{who}: a failed run ending with {' or '.join(marks)} is relaunched, at most "
            f"{policy.max} time{'s' if policy.max != 1 else ''}, from its last verified "
            "checkpoint (ITERA_RESUME; from the start without one), as a new attempt with its "
            "own id, while the window can still fit it before the wrap-up; never a run "
            "stopped by a rule, a person or the wrap-up")
