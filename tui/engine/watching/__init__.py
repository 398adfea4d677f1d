"""Watching live runs: each tick, what is new against the stop rules, a run's live view and bounded history, its exit and kill, and the warnings from probe samples."""
