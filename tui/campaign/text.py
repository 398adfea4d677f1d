"""One cleaning function for text a run (or a file, or a bundle) controls, shown on a terminal.

A run's stop reason, a checkpoint's error message, an id echoed by a refusal,
the campaign name in `check`: any of them may carry an escape sequence. Printed
raw, OSC 52 writes the person's clipboard (through tmux too), `ESC[2J` clears
their screen, a bare `\\r` rewrites the line they are reading. Terminal
emulators' own advice is to strip C0/C1 controls from untrusted text; here
they are made *visible* instead (`\\x1b]52;c;...`), so what was attempted can
still be read. Stdlib only: every layer, the engine's event lines included,
uses this one home.

- `for_terminal(text)`: every C0 control (but tab, shown as spaces, and, with
  `lines=True`, the newline), DEL, every C1 control, the Unicode bidi
  overrides and the directional marks (LRM, RLM, ALM: a name that reads
  backwards is a name that lies) become `\\xNN` / `\\uNNNN`; nothing else changes.
- `TerminalGuard`: a text stream that passes every write through
  `for_terminal(lines=True)`; the command line wraps its stdout and stderr in
  one, so no subcommand can print raw text by mistake (JSON is already
  escaped by json.dumps, so it is unchanged).
"""

from __future__ import annotations

import io
import re

# C0 (0x00-0x1f) but tab and newline, DEL, C1 (0x80-0x9f), bidi embeddings and
# overrides (U+202A-U+202E, U+2066-U+2069), the directional marks (U+200E, U+200F,
# U+061C), and the line/paragraph separators.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                     "\u200e\u200f\u061c]")
_UNSAFE_LINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e"
                          "\u2066-\u2069\u200e\u200f\u061c]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: object, *, lines: bool = False) -> str:
    """`text` safe to print on a terminal: controls and escape sequences made
    visible; a newline kept only when `lines` is true; a tab shown as 4 spaces."""
    text = text if isinstance(text, str) else str(text)
    if text.isascii() and text.isprintable():
        return text  # the common case, no regex
    text = text.replace("\t", "    ")
    return (_UNSAFE if lines else _UNSAFE_LINE).sub(_visible, text)


class TerminalGuard(io.TextIOBase):
    """A text stream whose every write is cleaned by `for_terminal(lines=True)`."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(for_terminal(text, lines=True))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        self._stream.close()

    def __del__(self) -> None:
        # io.IOBase closes a stream it collects: a guard dropped after `main()` returns
        # would close the stream it wraps (the caller's sys.stdout). Only an explicit
        # close() closes it.
        pass

    @property
    def closed(self) -> bool:
        return self._stream.closed

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self):
        return getattr(self._stream, "encoding", "utf-8")

    @property
    def buffer(self):
        return self._stream.buffer

    def writable(self) -> bool:
        return True
