"""`itera-tui notify --test [PATH]`: one test notice to every address, one line each.

Before a campaign is left alone for the night, the person checks that the
addresses work: each is tried once (no retries: the answer comes now), and
the line says delivered, or why not, with the address redacted. Exit 1 when
any address failed or none could be used.
"""

from __future__ import annotations

from pathlib import Path

from ..campaign.notify_plan import NoticeKind, redact_url
from ..engine.errors import EngineError
from .delivery import deliver, resolve_addresses
from .notices import plain


def notify_test(path: Path) -> int:
    from ..campaign import load_plan

    plan = load_plan(path, check_files=False)
    if plan.notify is None:
        raise EngineError(f"{path.name}: no [notify] table: nothing to test (the [notify] "
                          "keys: docs/notify.md)")
    addresses = resolve_addresses(plan.notify)
    for problem in addresses.problems:
        print(f"{plain(problem)}")
    if not addresses.urls:
        print(f"no usable address ({plan.notify.sources})")
        return 1
    title = plain(f"{plan.campaign.name}: test notice from itera-tui", 160)
    body = (f"If you read this, {NoticeKind.TEST.value} notices reach you. Sent on: "
            f"{', '.join(plan.notify.on) or 'nothing'}.")
    failed = 0
    for url in addresses.urls:
        result = deliver(url, title, body)
        shown = redact_url(url)
        if result.ok:
            print(f"{shown}: delivered")
        else:
            failed += 1
            print(f"{shown}: NOT delivered: {result.reason}")
    return 1 if failed or addresses.problems else 0
