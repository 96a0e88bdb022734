"""Float images: an ``npz:FILE`` of floats is taken as it is, standardised from its training split or not at all."""

import numpy as np
import pytest
import torch

from fedsim.config.run_config import RunConfig
from fedsim.data import Dataset, augment, load_dataset, normalize
from fedsim.data.dataset import channel_stats
from fedsim.data.transforms import resize
from fedsim.engines.inprocess import run

EXACT = {"rtol": 1e-10, "atol": 1e-10}


def arrays(rng, dtype=np.float32, train=60, test=20) -> dict:
    """Random (N, H, W, C) images of 3 channels with channel means far from 0, and labels of 4 classes."""
    shape = (train + test, 8, 8, 3)
    images = (rng.normal(size=shape) * [1.0, 2.0, 0.5] + [10.0, -3.0, 0.0]).astype(dtype)
    labels = rng.integers(0, 4, train + test)
    return {"x_train": images[:train], "y_train": labels[:train], "x_test": images[train:], "y_test": labels[train:]}


def saved(tmp_path, name, **entries) -> str:
    np.savez(tmp_path / name, **entries)
    return f"npz:{tmp_path / name}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_images_are_kept_and_standardised_with_the_training_splits_statistics(tmp_path, dtype):
    given = arrays(np.random.default_rng(0), dtype)
    data = load_dataset(saved(tmp_path, "floats.npz", **given))
    assert data.train_images.dtype == data.test_images.dtype == torch.from_numpy(given["x_train"]).dtype
    np.testing.assert_array_equal(data.train_images.numpy(), given["x_train"].transpose(0, 3, 1, 2))
    train = given["x_train"].astype(np.float64)
    np.testing.assert_allclose(data.mean, train.mean(axis=(0, 1, 2)), rtol=1e-12)
    np.testing.assert_allclose(data.std, train.std(axis=(0, 1, 2)), rtol=1e-12)
    inputs = normalize(data.train_images, data, dtype=torch.float64)
    torch.testing.assert_close(inputs.mean(dim=(0, 2, 3)), torch.zeros(3, dtype=torch.float64), **EXACT)
    torch.testing.assert_close(inputs.std(dim=(0, 2, 3), unbiased=False), torch.ones(3, dtype=torch.float64),
                               **EXACT)


def test_normalize_false_feeds_float_images_unchanged_and_uint8_pixels_scaled(tmp_path):
    rng = np.random.default_rng(1)
    floats = load_dataset(saved(tmp_path, "floats.npz", **arrays(rng), normalize=False))
    assert floats.mean == (0.0,) * 3 and floats.std == (1.0,) * 3
    assert torch.equal(normalize(floats.test_images, floats), floats.test_images)
    pixels = {**arrays(rng), "x_train": rng.integers(0, 256, (60, 8, 8), dtype=np.uint8),
              "x_test": rng.integers(0, 256, (20, 8, 8), dtype=np.uint8)}
    scaled = load_dataset(saved(tmp_path, "pixels.npz", **pixels, normalize=np.array(0)))
    expected = torch.from_numpy(pixels["x_test"][:, None]).to(torch.float64) / 255
    assert torch.equal(normalize(scaled.test_images, scaled, dtype=torch.float64), expected)


def test_uint8_pixels_are_standardised_as_before(tmp_path):
    """The integer statistics in [0, 1] and ``(x / 255 - mean) / std``, whether ``normalize`` is absent or True."""
    rng = np.random.default_rng(2)
    pixels = {**arrays(rng), "x_train": rng.integers(0, 256, (60, 8, 8, 3), dtype=np.uint8),
              "x_test": rng.integers(0, 256, (20, 8, 8, 3), dtype=np.uint8)}
    for name, flag in [("plain.npz", {}), ("flagged.npz", {"normalize": True})]:
        data = load_dataset(saved(tmp_path, name, **pixels, **flag))
        assert data.train_images.dtype == torch.uint8
        totals = pixels["x_train"].astype(np.int64).sum(axis=(0, 1, 2))
        assert data.mean == tuple(total / (60 * 64) / 255 for total in totals.tolist())
        mean, std = (torch.tensor(v, dtype=torch.float64).view(-1, 1, 1) for v in (data.mean, data.std))
        images = data.test_images
        assert torch.equal(normalize(images, data, dtype=torch.float64), (images.to(torch.float64) / 255 - mean) / std)


@pytest.mark.numerics
def test_a_run_on_float_images_equals_the_run_on_their_uint8_pixels(tmp_path):
    """In float64: pixels p and floats p / 255 standardise to the same inputs, so the two runs agree to ~1e-10."""
    rng = np.random.default_rng(3)
    pixels = {**arrays(rng, train=80), "x_train": rng.integers(0, 256, (80, 8, 8), dtype=np.uint8),
              "x_test": rng.integers(0, 256, (20, 8, 8), dtype=np.uint8)}
    floats = {**pixels, "x_train": pixels["x_train"] / 255.0, "x_test": pixels["x_test"] / 255.0}
    results = []
    for name, entries in [("pixels.npz", pixels), ("floats.npz", floats)]:
        config = RunConfig(dataset=saved(tmp_path, name, **entries), model="mlp", num_partitions=4, rounds=2,
                           batch_size=10, dtype="float64")
        results.append(run(config))
    (pixel_run, float_run) = results
    torch.testing.assert_close(float_run.global_state, pixel_run.global_state, **EXACT)
    for mine, theirs in zip(float_run.rows, pixel_run.rows):
        assert mine["train_loss"] == pytest.approx(theirs["train_loss"], rel=1e-10)


@pytest.mark.parametrize("change, error, match", [
    ({"x_train": np.zeros((60, 8, 8), np.int32)}, ValueError, r"`x_train` must hold uint8 pixels or floats .*int32"),
    ({"x_test": np.zeros((20, 8, 8, 3), np.uint8)}, ValueError, "`x_train` holds float32 and `x_test` uint8"),
    ({"normalize": np.array(2)}, ValueError, "`normalize` must be a 0-d boolean"),
    ({"normalize": np.array([True, False])}, ValueError, "`normalize` must be a 0-d boolean"),
])
def test_bad_float_files_name_the_array(tmp_path, change, error, match):
    entries = {**arrays(np.random.default_rng(4)), **change}
    with pytest.raises(error, match=match):
        load_dataset(saved(tmp_path, "bad.npz", **entries))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_float_images_that_are_not_finite_name_the_first_sample(tmp_path, bad):
    entries = arrays(np.random.default_rng(5))
    entries["x_train"][7, 2, 3, 1] = bad
    entries["x_train"][9, 0, 0, 0] = bad
    with pytest.raises(ValueError, match="`x_train` holds values that are not finite .*the first in sample 7"):
        load_dataset(saved(tmp_path, "bad.npz", **entries))


def test_a_datasets_float_statistics_refuse_values_that_are_not_finite():
    images = torch.zeros(2, 1, 2, 2)
    images[1, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="`images` hold values that are not finite"):
        channel_stats(images)
    labels = torch.tensor([0, 1])
    given = Dataset("given", images, labels, images, labels, num_classes=2, mean=(0.0,), std=(1.0,))
    assert given.mean == (0.0,)  # statistics given: the images are taken as they are


def test_float_images_stay_float_through_augmentation_and_resizing():
    images = torch.rand(4, 3, 32, 32, dtype=torch.float64) + 1.0
    labels = torch.zeros(4, dtype=torch.int64)
    data = Dataset("floats", images, labels, images, labels, num_classes=1, augmentation="crop-flip")
    crops = augment(images, data, torch.Generator().manual_seed(0))
    assert crops.dtype == torch.float64 and set(crops[crops < 1.0].unique().tolist()) <= {0.0}
    small = resize(images, 16)
    assert small.dtype == torch.float64 and small.shape == (4, 3, 16, 16)
    with pytest.raises(TypeError, match="`images` must be floating point, as `Dataset` stores them, got torch.uint8"):
        normalize(images.to(torch.uint8), data)
    with pytest.raises(TypeError, match="`test_images` are torch.uint8 but `train_images` are torch.float64"):
        Dataset("mixed", images, labels, images.to(torch.uint8), labels, num_classes=1)
