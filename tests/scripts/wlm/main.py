"""A stand-in for pytorch/examples word_language_model/main.py, unmodified in spirit.

It knows nothing of itera-tui: it prints its progress the way the example does
(`| epoch   1 |    20/   60 batches | lr 20.00 | ms/batch  1.23 | loss  3.91 | ppl 50.1`),
lets torch print its ordinary UserWarning to stderr, and saves the whole model
module with a plain `torch.save(model, f)` to `--save` (by default model.pt in the
run directory). Synthetic data, a tiny LSTM: a few seconds on a CPU.
"""

import argparse
import math
import os
import time

import torch
import torch.nn as nn

import model

parser = argparse.ArgumentParser(description="PyTorch word language model (stand-in)")
parser.add_argument("--lr", type=float, default=20)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--batches", type=int, default=60)
parser.add_argument("--log-interval", type=int, default=20)
parser.add_argument("--save", type=str,
                    default=os.path.join(os.environ.get("ITERA_RUN_DIR", "."), "model.pt"))
args = parser.parse_args()

torch.manual_seed(1111)
ntokens, bptt, bsz = 40, 8, 4
train_data = torch.randint(0, ntokens, (args.batches * bptt + 1, bsz))
net = model.RNNModel("LSTM", ntokens, 16, 16, 1, dropout=0.2)
criterion = nn.NLLLoss()


def train(epoch):
    net.train()
    total_loss, start = 0.0, time.time()
    hidden = net.init_hidden(bsz)
    for batch in range(1, args.batches + 1):
        i = (batch - 1) * bptt
        data, targets = train_data[i:i + bptt], train_data[i + 1:i + 1 + bptt].reshape(-1)
        hidden = tuple(h.detach() for h in hidden)
        net.zero_grad()
        output, hidden = net(data, hidden)
        loss = criterion(torch.log_softmax(output, dim=-1), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 0.25)
        for p in net.parameters():
            p.data.add_(p.grad, alpha=-args.lr / 100)
        total_loss += loss.item()
        if batch % args.log_interval == 0:
            cur_loss = total_loss / args.log_interval
            elapsed = time.time() - start
            print("| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | "
                  "loss {:5.2f} | ppl {:8.2f}".format(epoch, batch, args.batches, args.lr,
                                                       elapsed * 1000 / args.log_interval,
                                                       cur_loss, math.exp(cur_loss)), flush=True)
            total_loss, start = 0.0, time.time()
    return loss.item()


for epoch in range(1, args.epochs + 1):
    val_loss = train(epoch)
    print("-" * 89)
    print("| end of epoch {:3d} | valid loss {:5.2f} | valid ppl {:8.2f}".format(
        epoch, val_loss, math.exp(val_loss)), flush=True)
    print("-" * 89)
    with open(args.save, "wb") as f:
        torch.save(net, f)
