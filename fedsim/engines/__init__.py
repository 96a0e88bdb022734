"""Where client work runs and how tensors travel: three sibling engines over the round core (`fedsim.rounds`).

`fedsim.engines.inprocess` simulates every rank or client in this process (with ``--workers``,
one-step fusion and the fused K·B forward); `fedsim.engines.distributed` runs a rank of real
``torch.distributed`` DDP; `fedsim.engines.flower` runs the strategies as a Flower app. Each
imports the core and the shared modules, never another engine.
"""
