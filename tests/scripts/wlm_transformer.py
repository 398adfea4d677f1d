"""pytorch/examples word_language_model `--model Transformer`, as far as itera-tui sees it.

It knows nothing of itera-tui: it prints the example's progress lines
(`| epoch   1 |    20/   40 batches | lr 20.00 | ms/batch  1.23 | loss  3.91 | ppl
50.1` and `| end of epoch   1 | valid loss  3.80 | valid ppl 44.7`) and saves the
whole model with a plain `torch.save(model, f)` to --save, as the example does. The
model is torch's own `nn.TransformerEncoder`, whose layers keep `F.relu` as their
activation: a pickled module that holds a function. Synthetic data: seconds on a CPU.
"""

import argparse
import math
import time

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="Transformer")
parser.add_argument("--batches", type=int, default=40)
parser.add_argument("--log-interval", type=int, default=20)
parser.add_argument("--save", required=True)
args = parser.parse_args()

torch.manual_seed(1111)
d_model, seq, bsz = 16, 8, 4
layer = nn.TransformerEncoderLayer(d_model, nhead=2, dim_feedforward=32, dropout=0.0)
net = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
target = torch.randn(seq, bsz, d_model)
optim = torch.optim.SGD(net.parameters(), lr=0.05)
total, start = 0.0, time.time()
for batch in range(1, args.batches + 1):
    optim.zero_grad()
    loss = nn.functional.mse_loss(net(torch.randn(seq, bsz, d_model)), target)
    loss.backward()
    optim.step()
    total += loss.item()
    if batch % args.log_interval == 0:
        cur = total / args.log_interval
        print("| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | "
              "loss {:5.2f} | ppl {:8.2f}".format(1, batch, args.batches, 20.0,
                                                   (time.time() - start) * 1000, cur,
                                                   math.exp(cur)), flush=True)
        total, start = 0.0, time.time()
print("-" * 89)
print("| end of epoch {:3d} | valid loss {:5.2f} | valid ppl {:8.2f}".format(
    1, loss.item(), math.exp(loss.item())), flush=True)
print("-" * 89)
with open(args.save, "wb") as f:
    torch.save(net, f)
