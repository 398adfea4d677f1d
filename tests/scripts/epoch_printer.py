"""Prints like pytorch/examples' word_language_model and ignores ITERA_MAX_STEPS.

Usage: epoch_printer.py [--batches N] [--log-every K] [--epochs E] [--sleep S]
Each epoch counts its batches from the start again (`| epoch   2 |    50/  100
batches | ... | loss  5.12 | ppl   167.34`), so the printed step goes backwards
every epoch; only a derived global step can bound a pilot of this script.
"""

import argparse
import math
import time

p = argparse.ArgumentParser()
p.add_argument("--batches", type=int, default=100)
p.add_argument("--log-every", type=int, default=25)
p.add_argument("--epochs", type=int, default=1000)
p.add_argument("--sleep", type=float, default=0.02)
args = p.parse_args()

for epoch in range(1, args.epochs + 1):
    for batch in range(args.log_every, args.batches + 1, args.log_every):
        loss = 6.0 / math.sqrt(epoch + batch / args.batches)
        print(f"| epoch {epoch:3d} | {batch:5d}/{args.batches:5d} batches | lr 20.00 | "
              f"ms/batch {5.0:5.2f} | loss {loss:5.2f} | ppl {math.exp(loss):8.2f}", flush=True)
        time.sleep(args.sleep)
    print(f"| end of epoch {epoch:3d} | time: {1.0:5.2f}s | valid loss {loss:5.2f} | "
          f"valid ppl {math.exp(loss):8.2f}", flush=True)
