import signal

import pytest
import torch

from fedsim.data import load_dataset
from fedsim.models import create_model
from fedsim.client.tasks import create_task


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


@pytest.fixture
def ctrl_c():
    """Python's Ctrl-C handler during the test, whatever the test process inherited.

    A test run started in the background of a non-interactive shell (``make test &``) inherits
    SIGINT ignored, as would every process it starts (an ignored signal stays ignored across
    ``exec``; a handled one is reset to the default, which Python turns into KeyboardInterrupt).
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
