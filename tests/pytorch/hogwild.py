"""hogwild: `Module.share_memory()`, two processes train the shared model for
a few steps (Hogwild!), the parent sees the updated parameters.

Prints one `PASS hogwild` or `FAIL hogwild: <error>` line.
"""

import os

import torch
import torch.multiprocessing as mp
from torch import nn

NAME = "hogwild"


def train(model, rank):
    torch.manual_seed(rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        x = torch.randn(32, 16)
        loss = (model(x) - 1.0).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def main():
    strategy = os.environ.get("SHARING_STRATEGY", "file_system")
    mp.set_sharing_strategy(strategy)
    ctx = mp.get_context(os.environ.get("START_METHOD", "fork"))
    torch.manual_seed(0)
    model = nn.Linear(16, 1)
    model.share_memory()
    before = [p.detach().clone() for p in model.parameters()]
    procs = [ctx.Process(target=train, args=(model, rank)) for rank in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        if p.exitcode != 0:
            raise RuntimeError(f"trainer exited with {p.exitcode}")
    if all(torch.equal(b, p.detach()) for b, p in zip(before, model.parameters())):
        raise RuntimeError("parent does not see the trainers' updates")


if __name__ == "__main__":
    from verdict import report

    report(NAME, main)
