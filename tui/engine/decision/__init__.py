"""The decision point after the pilots: what each pilot showed up to its bound, the deadline and its default, and the time the GPUs waited on a person."""
