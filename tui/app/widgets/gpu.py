"""GPU panel: per device utilisation, memory, temperature, power and its run.

Sampled by a worker about once a second. A field the GPU does not support is
N/A; a lost GPU says LOST; without a driver the panel says so and the host
lines (CPU, RAM, free disk) carry the load picture instead. The model drops
the sample time, so an unchanged reading does not redraw.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from ..format import clip, gib, pct
from .base import ModelPanel


@dataclass(frozen=True)
class DeviceLine:
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


class GpuPanel(ModelPanel):
    COMPONENT_CLASSES = {"gpu--title", "gpu--ok", "gpu--lost", "gpu--warn", "gpu--dim",
                         "gpu--busy"}

    def render(self) -> Text:
        m: GpuModel | None = self.model
        width = max(1, self.size.width)
        s = self.style_of
        out = Text(no_wrap=True, overflow="crop")
        if m is None:
            return Text("GPUs: waiting for the first sample…")
        lines: list[Text] = []
        if m.driver != "ok":
            lines.append(Text(clip(f"GPU: {m.message or m.driver}", width), s("gpu--warn")))
        elif not m.devices:
            lines.append(Text(clip(m.message or "NVML reports no GPU", width), s("gpu--warn")))
        wide = width >= 40
        for d in m.devices:
            head = f"{d.index} "
            if d.state == "lost":
                lines.append(Text(clip(f"{head}{d.name}: LOST (fell off the bus)", width),
                                  s("gpu--lost")))
                continue
            if d.state == "error":
                lines.append(Text(clip(f"{head}{d.name}: error {d.problem or ''}", width),
                                  s("gpu--warn")))
                continue
            mem = "N/A" if d.mem_used is None else f"{gib(d.mem_used)}/{gib(d.mem_total)}"
            if not wide and d.mem_used is not None:
                mem = mem.replace("G/", "/", 1)  # '70.5/180G' fits a 26-column panel
            line = Text(head, s("gpu--title"))
            if wide:
                line.append(clip(d.name, 18) + " ", s("gpu--dim"))
            line.append(f"{pct(d.util):>4} ", s("gpu--busy" if (d.util or 0) >= 5 else "gpu--dim"))
            line.append(f"{mem} {_num(d.temp, '°C' if wide else '°')} {_num(d.power, 'W')}")
            lines.append(line)
            who = ", ".join(d.holders) if d.holders else "no run"
            lines.append(Text(clip(f"  ↳ {who}", width), s("gpu--dim")))
        ram = "N/A" if m.ram_used is None else f"{gib(m.ram_used)}/{gib(m.ram_total)}"
        disk = " ".join(f"{name} {gib(free)}" for name, free in m.disks) or "N/A"
        host = Text("host " if wide else "", s("gpu--title"))
        host.append(f"CPU {pct(m.cpu)} " + (f"load {_num(m.load1, '', 2)} " if wide else "")
                    + f"RAM {ram}")
        lines.append(host)
        lines.append(Text(clip(f"free disk: {disk}" if wide else f"free {disk}", width)))
        for i, line in enumerate(lines):
            if i:
                out.append("\n")
            out.append_text(line)
        return out
