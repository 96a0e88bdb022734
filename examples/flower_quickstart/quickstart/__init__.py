"""quickstart: FedAvg on mnist-5k, a Flower / PyTorch app as Flower's quickstart writes one."""
