import subprocess
import sys

import matplotlib.image
import pytest

from partitions import Partition


def fedsim(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "fedsim", *args], capture_output=True, text=True, cwd=cwd, check=False)


def test_partition_mnist5k_out_of_the_box(tmp_path):
    result = fedsim(
        "partition", "--dataset", "mnist-5k", "--scheme", "dirichlet", "--alpha", "0.1", "--num-partitions", "10",
        "--seed", "3", "--out", str(tmp_path / "p.json"), "--plot", str(tmp_path / "p.png"),
    )
    assert result.returncode == 0, result.stderr
    assert "mnist-5k dirichlet" in result.stdout and "Hellinger" in result.stdout
    partition = Partition.load(tmp_path / "p.json")
    assert (partition.num_partitions, partition.num_samples, partition.seed) == (10, 4000, 3)
    assert partition.params["alpha"] == 0.1
    assert matplotlib.image.imread(tmp_path / "p.png").shape[0] > 100


def test_lists_datasets_and_models():
    datasets, models = fedsim("datasets"), fedsim("models")
    assert "mnist-5k" in datasets.stdout.split() and "cifar10" in datasets.stdout.split()
    assert {"cnn", "resnet18", "vit-tiny"} <= set(models.stdout.split())


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dataset", "imagenet"], "unknown dataset"),
        (["--scheme", "pathological", "--classes-per-partition", "11"], "`num_classes_per_partition`=11 exceeds"),
        (["--num-partitions", "0"], "`num_partitions`"),
        (["--alpha", "-1"], "`alpha`"),
    ],
)
def test_bad_input_is_one_line_without_traceback(tmp_path, args, message):
    result = fedsim("partition", *args, "--out", str(tmp_path / "p.json"))
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
