"""Benches: scripts that print figures measured side by side; `python -m bench` runs them all."""
