"""The wrap-up: a bundle that reloads, planned vs actual, and the budget against the result.

A campaign ends with a directory someone can copy off the box and trust:
`build_bundle` writes it (manifest, plan, per-run measurements, deliverables,
artifacts and last verified checkpoint, stop reasons, reload instructions,
report) and `verify_bundle` checks it, reloading every checkpoint and
artifact in a fresh process, because a file that is present but cannot be
reloaded is not a verified output. Stdlib only: torch runs only in the
fresh verification processes.
"""

from .bundle_check import VerifyResult, verify_bundle, verify_command
from .wrapup import BundleResult, build_bundle

__all__ = ["BundleResult", "build_bundle", "VerifyResult", "verify_bundle", "verify_command"]
