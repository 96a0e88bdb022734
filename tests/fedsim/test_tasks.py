import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, f1_score

from fedsim.client.tasks import MultiLabel, SingleLabel, create_task, mean_average_precision


def test_single_label_metrics_and_per_sample_loss():
    task = SingleLabel(num_classes=3)
    logits = torch.tensor([[3.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 1.0]])
    targets = torch.tensor([0, 1, 2, 2])
    metrics = task.metrics(logits, targets)
    assert metrics["accuracy"] == 0.75
    assert metrics["per_class_accuracy"] == [1.0, 1.0, 0.5]
    per_sample = task.loss(logits, targets)
    assert per_sample.shape == (4,)
    torch.testing.assert_close(per_sample, torch.nn.functional.cross_entropy(logits, targets, reduction="none"))
    assert metrics["loss"] == pytest.approx(float(per_sample.mean()))


def test_absent_class_has_nan_accuracy():
    metrics = SingleLabel(num_classes=3).metrics(torch.eye(3)[:2], torch.tensor([0, 1]))
    assert np.isnan(metrics["per_class_accuracy"][2])


def test_label_smoothing_matches_torch():
    logits, targets = torch.randn(8, 5, generator=torch.Generator().manual_seed(0)), torch.arange(8) % 5
    expected = torch.nn.functional.cross_entropy(logits, targets, reduction="none", label_smoothing=0.1)
    torch.testing.assert_close(SingleLabel(5, label_smoothing=0.1).loss(logits, targets), expected)


def test_multilabel_metrics_match_sklearn():
    generator = torch.Generator().manual_seed(1)
    targets = (torch.rand(200, 6, generator=generator) < 0.3).long()
    logits = torch.randn(200, 6, generator=generator) + 2.0 * (targets * 2 - 1)
    metrics = MultiLabel(num_classes=6).metrics(logits, targets)
    predicted = (torch.sigmoid(logits) > 0.5).numpy()
    assert metrics["micro_f1"] == pytest.approx(f1_score(targets.numpy(), predicted, average="micro"))
    assert metrics["macro_f1"] == pytest.approx(f1_score(targets.numpy(), predicted, average="macro"))
    assert metrics["mean_average_precision"] == pytest.approx(
        average_precision_score(targets.numpy(), logits.numpy(), average="macro")
    )
    assert metrics["subset_accuracy"] == pytest.approx(float((predicted == targets.numpy()).all(axis=1).mean()))


def test_multilabel_loss_and_smoothing():
    logits, targets = torch.zeros(2, 3), torch.tensor([[1, 0, 1], [0, 0, 0]])
    assert MultiLabel(3).loss(logits, targets).tolist() == pytest.approx([3 * np.log(2)] * 2)
    smoothed = MultiLabel(3, label_smoothing=0.2).loss(torch.full((1, 3), 10.0), torch.ones(1, 3))
    assert float(smoothed) > float(MultiLabel(3).loss(torch.full((1, 3), 10.0), torch.ones(1, 3)))


def test_mean_average_precision_of_a_perfect_ranking_is_one():
    truth = torch.tensor([[1, 0], [1, 1], [0, 1], [0, 0]]).bool()
    assert mean_average_precision(truth.float(), truth) == 1.0


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: SingleLabel(3, label_smoothing=1.0), "label_smoothing"),
        (lambda: MultiLabel(3, label_smoothing=-0.1), "label_smoothing"),
        (lambda: MultiLabel(3, threshold=1.5), "threshold"),
        (lambda: create_task(3, threshold=0.4), "threshold"),
    ],
)
def test_bad_task_options(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()
