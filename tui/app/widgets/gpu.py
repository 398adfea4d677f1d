"""GPU panel: per device utilisation, memory, temperature, power and its run.

Sampled by a worker about once a second. A field the GPU does not support is
N/A; a lost GPU says LOST; without a driver the panel says so and the host
lines (CPU, RAM, free disk) carry the load picture instead. The model drops
the sample time, so an unchanged reading does not redraw.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from ..format import gib, pct
from ..runs_layout import middle_clip
from .base import ModelPanel


@dataclass(frozen=True)
class DeviceLine:
    """One GPU as the panel shows it, with the runs that hold it."""
    index: int
    name: str
    state: str
    util: float | None
    mem_used: int | None
    mem_total: int | None
    temp: float | None
    power: float | None
    holders: tuple[str, ...]
    problem: str | None


@dataclass(frozen=True)
class GpuModel:
    """The GPU panel's content: the devices, or the host when no driver answers."""
    driver: str  # ok | missing | error | none
    message: str | None
    devices: tuple[DeviceLine, ...]
    cpu: float | None
    load1: float | None
    ram_used: int | None
    ram_total: int | None
    disks: tuple[tuple[str, int], ...]


def gpu_model(sample, holders: dict[int, list[str]]) -> GpuModel:
    if sample is None:
        return GpuModel("none", "no probe sample yet", (), None, None, None, None, ())
    g, h = sample.gpu, sample.host
    devices = tuple(DeviceLine(d.index, d.name or f"GPU {d.index}", d.state, d.util_pct,
                               d.mem_used_bytes, d.mem_total_bytes, d.temp_c, d.power_w,
                               tuple(holders.get(d.index, ())), d.problem) for d in g.devices)
    return GpuModel(g.driver, g.message, devices, h.cpu_pct, h.load1, h.ram_used_bytes,
                    h.ram_total_bytes, tuple(sorted(h.disk_free_bytes.items())))


def _num(x, unit: str, digits: int = 0) -> str:
    return "N/A" if x is None else f"{x:.{digits}f}{unit}"


def fit_fields(fields: list[str], width: int, sep: str = " ") -> str:
    """Whole fields in priority order while they fit; a field that does not fit is left
    out (never cut), the ones after it still get their chance."""
    out = ""
    for f in fields:
        if not f:
            continue
        candidate = f if not out else out + sep + f
        if len(candidate) <= width:
            out = candidate
    return out


def fit_names(prefix: str, names: tuple[str, ...], width: int) -> str:
    """'  ↳ control·run, lora16·run', or '  ↳ control·run +1' when they do not all fit."""
    if not names:
        return prefix + "no run"
    for k in range(len(names), 0, -1):
        more = f" +{len(names) - k}" if k < len(names) else ""
        text = prefix + ", ".join(names[:k]) + more
        if len(text) <= width:
            return text
    more = f" +{len(names) - 1}" if len(names) > 1 else ""
    return prefix + middle_clip(names[0], max(1, width - len(prefix) - len(more))) + more


def wrap_words(text: str, width: int) -> list[str]:
    """A message over as many lines as it needs, cut only between words."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + ([line] if line else [])


class GpuPanel(ModelPanel):
    can_focus = True
    COMPONENT_CLASSES = {"gpu--title", "gpu--ok", "gpu--lost", "gpu--warn", "gpu--dim",
                         "gpu--busy"}

    def render(self) -> Text:
        m: GpuModel | None = self.model
        width = max(1, self.size.width)
        s = self.style_of
        out = Text(no_wrap=True, overflow="ellipsis")
        if m is None:
            return Text("GPUs: waiting for the first sample…")
        lines: list[Text] = []
        wide = width >= 40
        if m.driver != "ok":  # narrow: its first clause ('no NVIDIA driver'); z shows it all
            said = m.message or m.driver
            said = said if wide else said.split(":")[0]
            lines += [Text(x, s("gpu--warn")) for x in wrap_words(f"GPU: {said}", width)]
        elif not m.devices:
            lines += [Text(x, s("gpu--warn"))
                      for x in wrap_words(m.message or "NVML reports no GPU", width)]
        for d in m.devices:
            head = f"{d.index}"
            if d.state in ("lost", "error"):
                what = "LOST (fell off the bus)" if d.state == "lost" \
                    else f"error {d.problem or ''}".strip()
                lines += [Text(x, s("gpu--lost" if d.state == "lost" else "gpu--warn"))
                          for x in wrap_words(f"{head} {what}", width)]
                continue
            mem = "N/A" if d.mem_used is None else f"{gib(d.mem_used)}/{gib(d.mem_total)}"
            if not wide and d.mem_used is not None:
                mem = mem.replace("G/", "/", 1)  # '70.5/180G' fits a 26-column panel
            util = f"{pct(d.util):>4}"
            rest = fit_fields([mem, _num(d.temp, "°C" if wide else "°"), _num(d.power, "W"),
                               d.name if wide else ""], max(0, width - len(head) - 6))
            line = Text(head + " ", s("gpu--title"))
            line.append(util + " ", s("gpu--busy" if (d.util or 0) >= 5 else "gpu--dim"))
            line.append(rest)
            lines.append(line)
            lines.append(Text(fit_names("  ↳ ", d.holders, width), s("gpu--dim")))
        ram = "N/A" if m.ram_used is None else f"{gib(m.ram_used)}/{gib(m.ram_total)}"
        host = fit_fields(["host" if wide else "", f"CPU {pct(m.cpu)}", f"RAM {ram}",
                           f"load {_num(m.load1, '', 2)}"], width)
        lines.append(Text(host))
        disks = [f"{name} {gib(free)}" for name, free in m.disks] or ["N/A"]
        lines.append(Text(fit_fields(["free disk:" if wide else "free"] + disks, width)))
        for i, line in enumerate(lines):
            if i:
                out.append("\n")
            out.append_text(line)
        return out
