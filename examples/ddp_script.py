"""Your own DDP script on a Non-IID partition: each rank reads its shard, gradients weighted by shard size.

Run: torchrun --nproc_per_node=2 examples/ddp_script.py
"""

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

from fedsim.comm.hooks import RankWeights, weighted_allreduce_hook
from fedsim.sampler import ShardSampler
from partitions import dirichlet

dist.init_process_group("gloo")  # "nccl" on GPUs
rank, world_size = dist.get_rank(), dist.get_world_size()
generator = torch.Generator().manual_seed(0)  # the same data on every rank
labels = torch.randint(0, 10, (2_000,), generator=generator)
centers = torch.randn(10, 32, generator=generator)  # one cluster of inputs per class
dataset = TensorDataset(centers[labels] + 0.5 * torch.randn(2_000, 32, generator=generator), labels)
partition = dirichlet(labels.numpy(), num_partitions=world_size, alpha=0.3, seed=0)

model = DistributedDataParallel(torch.nn.Linear(32, 10))
model.register_comm_hook(RankWeights("size", partition.sizes), weighted_allreduce_hook)  # sum of n_r / n * g_r
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
sampler = ShardSampler(partition, rank=rank, seed=0, dataset=dataset)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)
for epoch in range(3):
    sampler.set_epoch(epoch)
    with Join([model]):  # shards of different sizes: a rank that runs out waits for the others
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
    if rank == 0:
        print(f"epoch {epoch}: shards {partition.sizes.tolist()}, rank 0's last batch loss {loss.item():.3f}")
dist.barrier()  # no rank closes its connections while another still uses them
del model, optimizer  # DDP's reducer holds the process group: free it now, not as the interpreter shuts down
dist.destroy_process_group()
