import pytest
import torch

from fedsim.data import load_dataset
from fedsim.models import create_model
from fedsim.tasks import create_task


@pytest.fixture(scope="session")
def mnist5k():
    return load_dataset("mnist-5k")


@pytest.fixture(scope="session")
def task(mnist5k):
    return create_task(mnist5k.num_classes)


@pytest.fixture
def cnn():
    torch.manual_seed(0)
    return create_model("cnn", num_classes=10, in_channels=1, image_size=28)
