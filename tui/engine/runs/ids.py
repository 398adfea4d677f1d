"""Run identifiers: the variant, a hash of its resolved configuration, an attempt.

A changed configuration (command, parameters, steps, GPUs, phase) gets a new
id; a retry of the same configuration keeps the hash and gets the next attempt
number. The id is stable across restarts because it is computed, not stored.
"""

from __future__ import annotations

import hashlib
import json


def config_hash(config: dict) -> str:
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:8]


def run_id(target: str, config: dict, attempt: int) -> str:
    return f"{target}-{config_hash(config)}-{attempt}"
