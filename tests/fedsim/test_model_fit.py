"""A model that does not fit the data is one error line before the banner, not PyTorch's message mid-run."""

import pytest
import torch

from fedsim.build import check_model_fits, smallest_batch
from fedsim.config.run_config import RunConfig
from fedsim.data import load_dataset
from partitions import iid

from .test_nothing_lost import assert_refused
from .test_cli import fedsim


def test_resnet18_with_batchnorm_on_a_batch_of_one_digit_is_refused_before_the_banner(tmp_path):
    """8x8 digits reach resnet18's last BatchNorm as 1x1 maps: one sample gives it one value per channel."""
    out = tmp_path / "run"
    result = fedsim("run", "--model", "resnet18", "--norm", "batch", "--dataset", "digits", "--batch-size", "1",
                    "--rounds", "1", "--num-partitions", "2", "--quiet", "--out", str(out))
    assert_refused(result, "`--model`='resnet18' with `--norm`='batch' cannot train on a batch of one sample",
                   "`--dataset`='digits' (1x8x8 images)", "`--batch-size`=1", "Expected more than 1 value per channel")
    assert not out.exists()


@pytest.mark.parametrize("command", ["compare", "ddp"])
def test_the_other_training_commands_check_the_fit_before_starting(tmp_path, command):
    extra = ["--strategies", "fedavg"] if command == "compare" else ["--nproc", "1", "--strategy", "fedavg"]
    result = fedsim(command, "--model", "resnet18", "--norm", "batch", "--dataset", "digits", "--batch-size", "1",
                    "--rounds", "1", "--num-partitions", "2", "--quiet", "--out", str(tmp_path / "run"), *extra)
    assert_refused(result, "cannot train on a batch of one sample", "`--batch-size`=1")


def test_a_shard_that_ends_with_a_batch_of_one_is_checked_with_one_sample():
    """The 1,438 training digits in 4 IID shards of 360/359: batches of 179 leave the 359s a last batch of 1."""
    data = load_dataset("digits")
    partition = iid(data.train_labels.numpy(), 4, seed=0)
    assert smallest_batch(179, partition.sizes) == 1 and smallest_batch(50, partition.sizes) > 1
    config = RunConfig(model="resnet18", norm="batch", dataset="digits", batch_size=179, num_partitions=4)
    with pytest.raises(ValueError, match="with `batch_size`=179 a shard's last batch is one sample"):
        check_model_fits(build(config, data), config, data, partition)
    fitting = config.replace(batch_size=50)
    check_model_fits(build(fitting, data), fitting, data, partition)  # batches of 2 or more: fits


def test_a_model_whose_shapes_do_not_fit_names_model_and_dataset():
    data = load_dataset("digits")
    partition = iid(data.train_labels.numpy(), 2, seed=0)
    config = RunConfig(dataset="digits", num_partitions=2)
    wrong = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 10))  # an MNIST model, 8x8 data
    with pytest.raises(ValueError, match=r"`model`='cnn' does not fit `dataset`='digits' \(1x8x8 images, 10 classes\)"):
        check_model_fits(wrong, config, data, partition)


def test_the_check_leaves_the_global_random_state_as_it_was():
    data = load_dataset("digits")
    partition = iid(data.train_labels.numpy(), 2, seed=0)
    config = RunConfig(model="cnn", dataset="digits", num_partitions=2)
    before = torch.get_rng_state()
    check_model_fits(build(config, data), config, data, partition)
    assert torch.equal(torch.get_rng_state(), before)


def build(config, data):
    from fedsim.build import build_model

    return build_model(config, data)
