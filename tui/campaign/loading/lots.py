"""The `[[lot]]` tables: one rented box's GPUs, price and, for another box, its host.

Split from `load.py`. A lot without `host` is this box; a lot with one is another
rented box reached over ssh (`host` as the user's own ~/.ssh/config knows it, `dir`
the campaign folder there). Device indices are counted per box: each box's CUDA
devices start at 0.
"""

from __future__ import annotations

import json

from ..destination import DestinationError, parse_destination
from ..plan import Lot
from ..pricing import catalog_price
from ..validate import Reader, describe


def read_lot(table, i, problems) -> Lot:
    r = Reader(table, f"lot[{i}]", problems)
    lot_id = r.get_str("id", f"lot{i + 1}")
    gpu = r.get_str("gpu", required=True) or "?"
    hours = r.duration_hours(allow_days=True) or 0.0
    gpus = r.get_int("gpus", 1, minimum=1) or 1
    devices = r.raw("devices", None)
    price = r.get_number("price_usd", None, non_negative=True)
    order = r.get_str("order")  # the rental's order reference
    host, far_dir = _lot_box(r)
    python = _lot_python(r, host)
    r.reject_unknown(r.seen)
    if devices is None:
        devices = ()
    elif not (isinstance(devices, list) and all(isinstance(d, int) for d in devices)
              and len(devices) == gpus):
        r.problem("devices", f"expected {gpus} CUDA device indices, got {describe(devices)}")
        devices = ()
    source = "explicit"
    if price is None and "price_usd" not in r.table:
        price = catalog_price(gpu, hours / 24.0) if hours else None
        source = "catalog"
        if price is None and hours:
            r.problem("price_usd", f"no catalog price for {gpu} for {hours / 24.0:g} days; "
                                   "give price_usd (never an invented rate)")
    return Lot(id=lot_id or f"lot{i + 1}", gpu=gpu, hours=hours, price_usd=price or 0.0,
               gpus=gpus, devices=tuple(devices), price_source=source,
               order=order or None, host=host, dir=far_dir, python=python)


def _lot_python(r: Reader, host) -> str | None:
    """`python`: the interpreter on the lot's host that itera-tui is installed in (a
    venv's bin/python), for a box whose non-interactive PATH puts another one first."""
    text = r.get_str("python")
    if text is None:
        return None
    text = text.strip()
    if host is None:
        r.problem("python", "is the interpreter on the lot's host; give host too (this "
                            "box runs the itera-tui you started)")
        return None
    if not text or any(c.isspace() or not c.isprintable() for c in text) or \
            not (text.startswith("/") or text.startswith("~/")):
        r.problem("python", f"{text!r}: give the interpreter's path there, absolute or from "
                            "the home (\"/opt/venv/bin/python\", \"~/venv/bin/python\")")
        return None
    return text


def _lot_box(r: Reader):
    """`host` (an ssh destination) and `dir` (the campaign folder there), or this box."""
    text = r.get_str("host")
    far_dir = r.get_str("dir")
    if text is None:
        if far_dir is not None:
            r.problem("dir", "is the campaign folder on the lot's host; give host too "
                             "(a lot without host is this box)")
        return None, None
    try:
        host = parse_destination(text)
    except DestinationError as exc:
        r.problem("host", str(exc))
        return None, None
    if not far_dir or not far_dir.strip():
        r.problem("dir", f"the campaign folder on {host.label} is needed (e.g. dir = "
                         "\"campaigns/demo\", from its home)")
        return host, None
    far_dir = far_dir.strip()
    if far_dir == "~" or far_dir.startswith("~/"):
        far_dir = far_dir[2:] or "."  # ssh and rsync start in the home: the same place
    if far_dir.startswith("~") or any(part == ".." for part in far_dir.split("/")):
        r.problem("dir", f"{far_dir!r}: give a path from the home or an absolute one, "
                         "without ~user or ..")
        return host, None
    return host, far_dir.rstrip("/") or "/"


def assign_devices(lots: tuple[Lot, ...], problems) -> tuple[Lot, ...]:
    """Every lane gets a CUDA device index; no device may belong to two lots of one box
    (each box counts its own devices from 0)."""
    from dataclasses import replace

    out, owner, offset = [], {}, {}
    for i, lot in enumerate(lots):
        first = offset.get(lot.box, 0)
        devices = lot.devices or tuple(range(first, first + lot.gpus))
        offset[lot.box] = first + lot.gpus
        for d in devices:
            if (lot.box, d) in owner:
                problems.append(f"lot[{i}].devices: CUDA device {d} is already lot "
                                f"\"{owner[lot.box, d]}\"'s; give each lot its own devices")
            owner.setdefault((lot.box, d), lot.id)
        out.append(replace(lot, devices=tuple(devices)))
    folders = {}
    for lot in out:
        if lot.host is not None and folders.setdefault(lot.box, lot.dir) != lot.dir:
            problems.append(f"lot \"{lot.id}\".dir: another lot on {lot.box} names "
                            f"{folders[lot.box]!r}; one box holds one campaign folder")
    if out and all(lot.host is not None for lot in out):
        problems.append("lot.host: every lot names a host; one lot is the box you start "
                        "itera-tui on (leave its host out)")
    return tuple(out)


def read_inline_lot(text: str, where: str, problems: list[str]) -> Lot | None:
    """A `[[lot]]` written on one line, as a command takes it (`--lot 'gpu = "RTX 4090",
    days = 3, price_usd = 47.14'`): the inside of a TOML inline table, read and checked
    by `read_lot` as the plan's own lots are. Lines of `key = value` are taken too.
    Each problem names `where` and the key; None when there is one."""
    import tomllib

    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        body = "{" + body + "}"
    try:
        table = tomllib.loads(f"lot = {body}")["lot"]
    except tomllib.TOMLDecodeError as exc:
        try:
            table = tomllib.loads(text)  # key = value lines, as in campaign.toml
        except tomllib.TOMLDecodeError:
            problems.append(f"{where}: not a lot's key = value pairs separated by commas "
                            f"(as 'gpu = \"RTX 4090\", days = 3, price_usd = 47.14'): {exc}")
            return None
    found: list[str] = []
    lot = read_lot(table, 0, found)
    problems += [where + p[len("lot[0]"):] if p.startswith("lot[0]") else f"{where}: {p}"
                 for p in found]
    return None if found else lot


def inline_lot(lot: Lot) -> str:
    """The lot as `read_inline_lot` takes it back: a command printed for a person to paste
    names the box it runs on as a lot, with the lot's own price (never a rate)."""
    days = lot.hours / 24.0
    span = f"days = {days:g}" if days == round(days) else f"hours = {lot.hours:g}"
    gpus = f", gpus = {lot.gpus}" if lot.gpus != 1 else ""
    return f"gpu = {json.dumps(lot.gpu)}, {span}, price_usd = {float(round(lot.price_usd, 2))!r}{gpus}"
