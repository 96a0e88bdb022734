import numpy as np
import pytest
import torch

from fedsim.algorithms import Proximal
from fedsim.client import ClientUpdate, client_update, evaluate, get_state, set_state, state_tensors
from fedsim.data import load_dataset, normalize
from fedsim.models import create_model
from fedsim.client.optim import OptimizerConfig
from fedsim.client.tasks import create_task
from fedsim.client.training import LocalTraining

from .numerics import EXACT, relative_distance

SHARD = np.arange(0, 4000, 50)  # 80 samples, all classes


CALL_OPTIONS = ("seed", "round", "client", "class_weights", "noise_sigma", "return_delta", "scaler", "terms")


def update(model, state, data, task, **options):
    """Call `client_update` with the settings in ``options``, the local-training ones bundled."""
    options = {"batch_size": 10, "epochs": 1, "optimizer": OptimizerConfig(lr=0.05), **options}
    indices = options.pop("indices", SHARD)
    call = {key: options.pop(key) for key in CALL_OPTIONS if key in options}
    return client_update(model, state, data, indices, task=task, training=LocalTraining(**options), **call)


def assert_same(first, second):
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


def test_same_seed_round_client_is_bit_identical(cnn, mnist5k, task):
    state = get_state(cnn)
    first = update(cnn, state, mnist5k, task, seed=3, round=2, client=7)
    second = update(cnn, state, mnist5k, task, seed=3, round=2, client=7)
    assert_same(first.delta, second.delta)
    other = update(cnn, state, mnist5k, task, seed=3, round=2, client=8)
    assert not torch.equal(first.delta[0], other.delta[0])


def test_dropout_is_seeded_per_client_and_global_rng_is_left_alone(mnist5k, task):
    torch.manual_seed(0)
    model = create_model("mobilenet_v3_small", num_classes=10, in_channels=1, image_size=28)  # has dropout
    state = get_state(model)
    before = torch.random.get_rng_state()
    first = update(model, state, mnist5k, task, local_steps=2, epochs=None)
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.manual_seed(123)  # a different global state must not change the client's result
    assert_same(first.delta, update(model, state, mnist5k, task, local_steps=2, epochs=None).delta)


def test_global_state_untouched_and_delta_is_trained_minus_global(cnn, mnist5k, task):
    state = get_state(cnn)
    copy = [t.clone() for t in state]
    result = update(cnn, state, mnist5k, task)
    assert_same(state, copy)
    trained = [t.detach() for t in state_tensors(cnn)]
    torch.testing.assert_close([g + d for g, d in zip(state, result.delta)], trained, rtol=0, atol=1e-6)


def test_a_float64_model_trains_and_evaluates_in_float64(cnn, mnist5k, task):
    cnn.double()
    result = update(cnn, get_state(cnn), mnist5k, task)
    assert all(d.dtype == torch.float64 for d in result.delta)
    assert evaluate(cnn, None, mnist5k, task=task)["accuracy"] > 0


def test_amount_of_work(cnn, mnist5k, task):
    state = get_state(cnn)
    result = update(cnn, state, mnist5k, task, epochs=2, batch_size=30)
    assert (result.num_steps, result.samples_processed, result.num_examples) == (6, 160, 80)
    result = update(cnn, state, mnist5k, task, epochs=2, batch_size=30, drop_last=True)
    assert (result.num_steps, result.samples_processed) == (4, 120)
    result = update(cnn, state, mnist5k, task, epochs=None, local_steps=5, batch_size=30)
    assert (result.num_steps, result.samples_processed) == (5, 140)
    assert result.label_counts.tolist() == torch.bincount(mnist5k.train_labels[SHARD], minlength=10).tolist()
    assert isinstance(result, ClientUpdate) and result.mean_loss > 0


@pytest.mark.numerics
def test_one_full_batch_step_is_minus_lr_times_the_gradient(cnn, mnist5k, task):
    cnn.double()
    state = get_state(cnn)
    result = update(cnn, state, mnist5k, task, epochs=None, local_steps=1, batch_size=SHARD.size)
    set_state(cnn, state)
    cnn.zero_grad()
    images = mnist5k.train_images[SHARD]
    task.loss(cnn(normalize(images, mnist5k, dtype=torch.float64)), mnist5k.train_labels[SHARD]).mean().backward()
    expected = [-0.05 * p.grad for p in cnn.parameters()]
    torch.testing.assert_close(result.delta[: len(expected)], expected, rtol=1e-10, atol=1e-12)


@pytest.mark.numerics
def test_class_weights_scale_the_gradient(cnn, mnist5k, task):
    cnn.double()
    state = get_state(cnn)
    plain = update(cnn, state, mnist5k, task, local_steps=1, epochs=None, optimizer=OptimizerConfig(lr=0.1))
    doubled = update(
        cnn, state, mnist5k, task, local_steps=1, epochs=None, class_weights=torch.full((10,), 2.0),
        optimizer=OptimizerConfig(lr=0.05),
    )
    torch.testing.assert_close(plain.delta, doubled.delta, rtol=1e-10, atol=1e-12)


@pytest.mark.numerics
def test_gradient_accumulation_matches_one_batch(cnn, mnist5k, task):
    """In float64: four micro-batches sum in another order than one batch (float32 flips ReLU kinks)."""
    cnn.double()
    state = get_state(cnn)
    whole = update(cnn, state, mnist5k, task, batch_size=20)
    split = update(cnn, state, mnist5k, task, batch_size=20, micro_batches=4)
    torch.testing.assert_close(whole.delta, split.delta, rtol=1e-10, atol=1e-10)


@pytest.mark.numerics
def test_fedprox_steps_down_the_gradient_of_the_loss_plus_the_proximal_term(cnn, mnist5k, task):
    """FedProx (Li et al., MLSys 2020): every local step descends f(w) + mu/2 ||w - w_g||^2, worked by autograd.

    The term is zero at the first step, which starts from w_g; over 4 steps it is not.
    """
    cnn.double()
    state = get_state(cnn)
    mu, lr, steps = 1.0, 0.05, 4
    full_batches = {"epochs": None, "local_steps": steps, "batch_size": SHARD.size, "optimizer": OptimizerConfig(lr=lr)}
    result = update(cnn, state, mnist5k, task, terms=Proximal(state[: len(list(cnn.parameters()))], mu),
                    **full_batches)
    set_state(cnn, state)
    params = list(cnn.parameters())
    inputs = normalize(mnist5k.train_images[SHARD], mnist5k, dtype=torch.float64)
    for _ in range(steps):
        proximal = sum(((param - start) ** 2).sum() for param, start in zip(params, state))
        loss = task.loss(cnn(inputs), mnist5k.train_labels[SHARD]).mean() + mu / 2 * proximal
        with torch.no_grad():
            torch._foreach_sub_(params, list(torch.autograd.grad(loss, params)), alpha=lr)
    expected = [param.detach() - start for param, start in zip(params, state)]
    torch.testing.assert_close(result.delta[: len(expected)], expected, **EXACT)
    # the term moved the result far beyond the tolerance: a wrong strength or a dropped term shows
    free = update(cnn, state, mnist5k, task, **full_batches)
    assert relative_distance(result.delta, free.delta) > 1e-3


def test_feature_noise_changes_the_update(cnn, mnist5k, task):
    state = get_state(cnn)
    noisy = update(cnn, state, mnist5k, task, noise_sigma=0.5)
    assert not torch.equal(update(cnn, state, mnist5k, task).delta[0], noisy.delta[0])


@pytest.mark.numerics
def test_bf16_autocast_on_cpu_trains(cnn, mnist5k, task):
    state = get_state(cnn)
    plain = update(cnn, state, mnist5k, task)
    mixed = update(cnn, state, mnist5k, task, amp=True)
    assert all(torch.isfinite(d).all() for d in mixed.delta)
    assert mixed.mean_loss == pytest.approx(plain.mean_loss, rel=0.05)


def test_without_delta_the_trained_model_stays_in_place(cnn, mnist5k, task):
    state = get_state(cnn)
    result = update(cnn, state, mnist5k, task, return_delta=False)
    assert result.delta is None
    trained = [t.detach().clone() for t in state_tensors(cnn)]
    expected = update(cnn, state, mnist5k, task).delta
    torch.testing.assert_close([t - s for t, s in zip(trained, state)], expected, rtol=0, atol=0)


@pytest.mark.numerics
def test_one_epoch_of_the_whole_train_set_learns(cnn, mnist5k, task):
    state = get_state(cnn)
    result = client_update(cnn, state, mnist5k, np.arange(4000), task=task,
                           training=LocalTraining(batch_size=20, optimizer=OptimizerConfig(lr=0.05, momentum=0.5)))
    before = evaluate(cnn, state, mnist5k, task=task)
    after = evaluate(cnn, [s + d for s, d in zip(state, result.delta)], mnist5k, task=task)
    assert before["accuracy"] < 0.3 < 0.85 < after["accuracy"]
    assert after["num_examples"] == 1000 and len(after["per_class_accuracy"]) == 10


def test_multilabel_client_update_and_evaluate():
    data = load_dataset("multi-mnist", num_train=200, num_test=100)
    task = create_task(data.num_classes, multilabel=True)
    torch.manual_seed(0)
    model = create_model("cnn", num_classes=10, in_channels=1, image_size=data.train_images.shape[-1])
    state = get_state(model)
    result = client_update(model, state, data, np.arange(100), task=task, training=LocalTraining(batch_size=20))
    assert result.label_counts.tolist() == data.train_labels[:100].long().sum(0).tolist()
    metrics = evaluate(model, [s + d for s, d in zip(state, result.delta)], data, task=task)
    assert {"micro_f1", "macro_f1", "mean_average_precision", "subset_accuracy"} <= set(metrics)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"epochs": 1, "local_steps": 1}, "exactly one of `epochs` and `local_steps`"),
        ({"epochs": None}, "exactly one"),
        ({"epochs": 0}, "`epochs` must be >= 1"),
        ({"batch_size": 0}, "`batch_size`"),
        ({"indices": np.array([], dtype=np.int64)}, "no samples"),
        ({"indices": np.array([0, 4000])}, r"`indices` must lie in \[0, 4000\)"),
        ({"micro_batches": 0}, "`micro_batches`"),
    ],
)
def test_bad_client_input(cnn, mnist5k, task, options, match):
    with pytest.raises(ValueError, match=match):
        update(cnn, get_state(cnn), mnist5k, task, **options)


def test_bad_optimizer_settings():
    with pytest.raises(ValueError, match="`lr`"):
        OptimizerConfig(lr=0)
    with pytest.raises(ValueError, match="`momentum`"):
        OptimizerConfig(momentum=1.0)
    with pytest.raises(ValueError, match="`name`"):
        OptimizerConfig(name="lbfgs")
