"""A tiny DistributedDataParallel run for torchrun on CPU (gloo backend).

Every rank trains the same small model on its shard; rank 0 logs through the
SDK. The engine test checks the run is launched with both devices, completes,
and that the all-reduce saw every rank.
"""

import os

import torch
import torch.distributed as dist

from tui import training

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
run = training.attach()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(rank)
for step in range(1, 11):
    x = torch.randn(8, 4, generator=gen)
    loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    if rank == 0:
        run.log(step, loss=loss.item(), world_size=world, rank_sum=total.item())
run.save_checkpoint(model=model.module, optimizer=opt, step=10)
print(f"rank {rank}/{world} done, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}",
      flush=True)
dist.destroy_process_group()
