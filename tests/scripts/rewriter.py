"""A training stand-in that starts its metrics file over, for engine feed tests.

Usage: rewriter.py MODE. It appends 40 SDK-style records to $ITERA_METRICS, waits
for `go` in its run directory, then writes the file again from the start with a
NaN loss in its second record: MODE "truncate" opens it with "w" (the same inode,
shorter than before); MODE "replace" renames a new, longer file over it. Then it
waits, as a run that trains on would, until it is stopped.
"""

import json
import os
import sys
import time

mode = sys.argv[1]
metrics = os.environ["ITERA_METRICS"]
run_dir = os.environ["ITERA_RUN_DIR"]


def record(step, loss):
    return json.dumps({"t": time.time(), "step": step, "loss": loss, "acc": 0.5}) + "\n"


with open(metrics, "a") as f:
    for step in range(1, 41):
        f.write(record(step, 1.0 / step))
while not os.path.exists(os.path.join(run_dir, "go")):
    time.sleep(0.05)
again = [record(1, 1.0), record(2, float("nan"))]
if mode == "truncate":
    with open(metrics, "w") as f:
        f.writelines(again)
else:
    tmp = metrics + ".new"
    with open(tmp, "w") as f:
        f.writelines(again + [record(step, 0.5) for step in range(3, 200)])
    os.replace(tmp, metrics)
time.sleep(120)
