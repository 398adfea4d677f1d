"""A verifier that misbehaves on purpose, for the client tests (the real one never should).

Speaks the `--serve` protocol: one JSON request per line in, one verdict per line
out, after a `{"ready": true}` line. A file name containing "hang" is never answered; "die-always" kills the process
each time; "die-once" kills it the first time only (a marker file next to the
path remembers); "noise" prints a non-JSON line first; anything else is ok.
"""

import json
import os
import sys
import time

print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    path = request["path"]
    name = os.path.basename(path)
    if "hang" in name:
        time.sleep(3600)
    if "die-always" in name:
        os._exit(9)
    if "die-once" in name and not os.path.exists(path + ".died"):
        open(path + ".died", "w").close()
        os._exit(9)
    if "noise" in name:
        print("not a verdict", flush=True)
    print(json.dumps({"id": request["id"], "ok": True, "path": path, "kind": "checkpoint",
                      "step": "12", "bytes": 5, "format": "torch"}), flush=True)
