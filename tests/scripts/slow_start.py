"""A run whose loading, first steps and validation are slow (re-estimation tests).

Writes SDK-style JSONL records to ITERA_METRICS: 0.6 s of loading before the
first record, 3 slow first steps (0.15 s), warm steps of 0.01 s, a 0.2 s
validation every 10 steps, and 0.3 s of output writing after the last record.
"""

import json
import os
import time

steps = int(os.environ.get("ITERA_MAX_STEPS") or 200)
out = open(os.environ["ITERA_METRICS"], "a")


def emit(**record):
    out.write(json.dumps({"t": time.time(), **record}) + "\n")
    out.flush()


time.sleep(0.6)  # loading the data and the model
for step in range(1, steps + 1):
    time.sleep(0.15 if step <= 3 else 0.01)
    emit(step=step, loss=1.0 / step)
    if step % 10 == 0:
        time.sleep(0.2)  # validation pass
        emit(step=step, acc=0.5 + step / (4 * steps))
time.sleep(0.3)  # predictions and artifacts
