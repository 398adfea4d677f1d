"""Trains a few steps, then fails in its teardown as a torchrun run can (a collective
left pending when the process group goes): under torchrun, the child's exception is
followed in stderr by torchrun's own traceback and its `ChildFailedError` report, which
ends in a rule of `=` signs."""

for step in range(1, 6):
    print(f"step {step} loss: {1.0 / step:.5f} acc=0.5", flush=True)
raise RuntimeError("NCCL watchdog: process group destroyed while a collective was pending")
