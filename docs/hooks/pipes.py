"""MkDocs hook: a `\\|` inside a code span of a table row reads as `|` on the site too.

GitHub's tables need the pipe in a code span escaped (`continue\\|wrapup`) or it ends
the cell, and it shows the escaped pipe as `|`; Python-Markdown's tables already keep a
pipe inside backticks in its cell, and would show the backslash. The pages are written
for GitHub; this drops the backslash before Python-Markdown reads a table row.
"""

import re

_CODE = re.compile(r"`[^`\n]*`")


def on_page_markdown(markdown: str, **kwargs) -> str:
    lines = []
    for line in markdown.split("\n"):
        if line.lstrip().startswith("|"):
            line = _CODE.sub(lambda m: m.group(0).replace("\\|", "|"), line)
        lines.append(line)
    return "\n".join(lines)
