"""A verifier's answer about one file, as the engine and the bundle keep it.

`python -m tui.training.file_check --serve` answers each request with a JSON line;
`FileVerdict.from_json` turns it into a frozen record with every field
type-checked, so a damaged or unexpected line can never carry a wrong type
further into the engine. Stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass


def _str(value) -> str | None:
    return value if isinstance(value, str) else None


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _strs(value) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _float(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


@dataclass(frozen=True)
class AdapterFacts:
    """A PEFT adapter's base as the verifier pinned it (see tui.training.adapters)."""

    base: str
    base_kind: str  # hub | local | unknown
    revision: str | None  # a commit, or sha256:<digest> of a local base's config + weights
    pinned_by: str | None  # adapter_config | hub_cache | content_digest | None (not pinned)
    unpinned: str | None  # why the revision is not pinned (or can move)
    loaded_on_base: bool
    load_note: str
    tensors: int | None = None
    peft_type: str | None = None
    task_type: str | None = None
    r: int | None = None
    lora_alpha: float | None = None

    @classmethod
    def from_json(cls, obj) -> "AdapterFacts | None":
        if not isinstance(obj, dict) or not isinstance(obj.get("base"), str):
            return None
        return cls(obj["base"], _str(obj.get("base_kind")) or "unknown", _str(obj.get("revision")),
                   _str(obj.get("pinned_by")), _str(obj.get("unpinned")),
                   obj.get("loaded_on_base") is True, _str(obj.get("load_note")) or "",
                   _int(obj.get("tensors")), _str(obj.get("peft_type")),
                   _str(obj.get("task_type")), _int(obj.get("r")), _float(obj.get("lora_alpha")))

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class FileVerdict:
    """What the verifier said about one path (type-checked from its JSON line)."""

    id: int
    path: str
    ok: bool
    problem: str | None = None
    format: str | None = None  # itera | torch | lightning | safetensors | hf
    kind: str | None = None
    summary: str | None = None
    step: int | None = None
    sha256: str | None = None
    bytes: int | None = None
    files: int | None = None
    needs: tuple[str, ...] = ()  # globals the load was allowed (torch / numpy / campaign)
    notes: tuple[str, ...] = ()
    elapsed_s: float | None = None
    attempts: int = 1
    adapter: AdapterFacts | None = None
    non_finite: bool = False  # it loads, but its weights hold NaN or inf: named, never "ok"

    @classmethod
    def from_json(cls, rid: int, path: str, obj: dict, attempts: int) -> "FileVerdict":
        elapsed = obj.get("elapsed_s")
        ok = obj.get("ok") is True
        return cls(rid, path, ok, _str(obj.get("problem")) or (None if ok else "no reason given"),
                   _str(obj.get("format")), _str(obj.get("kind")), _str(obj.get("summary")),
                   _int(obj.get("step")), _str(obj.get("sha256")), _int(obj.get("bytes")),
                   _int(obj.get("files")), _strs(obj.get("needs")), _strs(obj.get("notes")),
                   float(elapsed) if isinstance(elapsed, (int, float)) else None, attempts,
                   AdapterFacts.from_json(obj.get("adapter")),
                   not ok and obj.get("non_finite") is True)

    @classmethod
    def failed(cls, rid: int, path: str, problem: str, attempts: int) -> "FileVerdict":
        return cls(rid, path, False, problem, attempts=attempts)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "problem": self.problem, "format": self.format,
                "kind": self.kind, "summary": self.summary, "step": self.step,
                "sha256": self.sha256, "bytes": self.bytes, "needs": list(self.needs),
                "notes": list(self.notes)} | (
                    {"adapter": self.adapter.to_dict()} if self.adapter else {}) | (
                    {"non_finite": True} if self.non_finite else {})
