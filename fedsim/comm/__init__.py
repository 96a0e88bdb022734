"""How the ranks' gradients travel under DDP: communication hooks, gradient compression, SyncBatchNorm.

``hooks`` are the DDP communication hooks of the weighted strategies, ``compression`` the
compressed formats (and their in-process simulation), ``sync_batchnorm`` BatchNorm over every
rank's batch. They import the aggregation rules and the config, nothing of the rounds or the engines.
"""
