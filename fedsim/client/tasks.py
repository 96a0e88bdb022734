"""What is learned and how it is scored: single-label and multi-label classification.

A task turns logits and targets into per-sample losses (so that engines can weight samples,
as class-balanced aggregation does) and turns a whole evaluation pass into metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..checks import check_number


@dataclass(frozen=True)
class SingleLabel:
    """One class per sample: cross-entropy, accuracy and per-class accuracy.

    Parameters
    ----------
    num_classes : int
    label_smoothing : float, default 0
        Szegedy et al. (2016) label smoothing, as ``torch.nn.functional.cross_entropy``'s.

    Examples
    --------
    >>> task = SingleLabel(num_classes=3)
    >>> logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    >>> task.metrics(logits, torch.tensor([0, 1]))["accuracy"]
    0.5
    """

    num_classes: int
    label_smoothing: float = 0.0
    multilabel = False

    def __post_init__(self):
        check_number("label_smoothing", self.label_smoothing, low=0.0, high=1.0)

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Return the per-sample cross-entropy, shape ``(batch,)``."""
        return F.cross_entropy(loss_precision(logits), targets, reduction="none", label_smoothing=self.label_smoothing)

    def correct(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Return whether each sample's prediction is right, shape ``(batch,)``."""
        return logits.argmax(dim=1) == targets

    def metrics(self, logits: torch.Tensor, targets: torch.Tensor) -> dict:
        """Return ``loss``, ``accuracy`` and ``per_class_accuracy`` (NaN for a class absent from ``targets``)."""
        correct = (logits.argmax(dim=1) == targets).double()
        per_class_total = torch.bincount(targets, minlength=self.num_classes).double()
        per_class_correct = torch.bincount(targets, weights=correct, minlength=self.num_classes)
        per_class = (per_class_correct / per_class_total).tolist()  # 0/0 -> NaN for absent classes
        return {
            "loss": float(self.loss(logits, targets).mean()),
            "accuracy": float(correct.mean()),
            "per_class_accuracy": per_class,
        }

    def label_counts(self, targets: torch.Tensor) -> torch.Tensor:
        """Return how many samples of each class ``targets`` holds."""
        return torch.bincount(targets, minlength=self.num_classes)


@dataclass(frozen=True)
class MultiLabel:
    """Any set of classes per sample: binary cross-entropy per class, F1, mean average precision.

    Parameters
    ----------
    num_classes : int
    label_smoothing : float, default 0
        Targets become ``y * (1 - s) + s / 2``.
    threshold : float, default 0.5
        Probability above which a class is predicted present, for F1 and subset accuracy.

    Examples
    --------
    >>> task = MultiLabel(num_classes=2)
    >>> logits = torch.tensor([[3.0, -3.0], [3.0, 3.0]])
    >>> task.metrics(logits, torch.tensor([[1, 0], [1, 0]]))["subset_accuracy"]
    0.5
    """

    num_classes: int
    label_smoothing: float = 0.0
    threshold: float = 0.5
    multilabel = True

    def __post_init__(self):
        check_number("label_smoothing", self.label_smoothing, low=0.0, high=1.0)
        check_number("threshold", self.threshold, low=0.0, high=1.0, low_open=True)

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Return the per-sample binary cross-entropy summed over classes, shape ``(batch,)``."""
        logits = loss_precision(logits)
        soft = targets.to(logits.dtype) * (1.0 - self.label_smoothing) + self.label_smoothing / 2
        return F.binary_cross_entropy_with_logits(logits, soft, reduction="none").sum(dim=1)

    def correct(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Return whether each sample's every label is predicted right (subset accuracy), shape ``(batch,)``."""
        return ((torch.sigmoid(logits.float()) > self.threshold) == targets.bool()).all(dim=1)

    def metrics(self, logits: torch.Tensor, targets: torch.Tensor) -> dict:
        """Return ``loss``, ``micro_f1``, ``macro_f1``, ``mean_average_precision`` and ``subset_accuracy``."""
        truth = targets.bool()
        predicted = torch.sigmoid(logits.float()) > self.threshold
        true_positive = (predicted & truth).sum(dim=0).double()
        false_positive = (predicted & ~truth).sum(dim=0).double()
        false_negative = (~predicted & truth).sum(dim=0).double()
        micro = _f1(true_positive.sum(), false_positive.sum(), false_negative.sum())
        macro = _f1(true_positive, false_positive, false_negative).mean()
        return {
            "loss": float(self.loss(logits, targets).mean()),
            "micro_f1": float(micro),
            "macro_f1": float(macro),
            "mean_average_precision": mean_average_precision(logits, truth),
            "subset_accuracy": float((predicted == truth).all(dim=1).double().mean()),
        }

    def label_counts(self, targets: torch.Tensor) -> torch.Tensor:
        """Return how many samples carry each class."""
        return targets.long().sum(dim=0)


def loss_precision(logits: torch.Tensor) -> torch.Tensor:
    """Return ``logits`` in the precision a loss is computed in: float32 under AMP, else their own.

    Half-precision logits from autocast are widened (a bf16 log-softmax loses the loss's small
    differences); a float64 run keeps float64 so that its arithmetic stays exact end to end.
    """
    return logits if logits.dtype == torch.float64 else logits.float()


def _f1(true_positive, false_positive, false_negative):
    """F1 = 2TP / (2TP + FP + FN), defined as 1 where a class is never present nor predicted."""
    denominator = 2 * true_positive + false_positive + false_negative
    return torch.where(denominator > 0, 2 * true_positive / denominator.clamp(min=1), torch.ones_like(denominator))


def mean_average_precision(scores: torch.Tensor, truth: torch.Tensor) -> float:
    """Return the mean over classes (with a positive sample) of the average precision of ``scores``.

    Average precision is the mean of the precision at the rank of each positive sample, as
    ``sklearn.metrics.average_precision_score``; tied scores are broken by sample order.
    """
    order = torch.argsort(scores.float(), dim=0, descending=True, stable=True)
    hits = torch.gather(truth.double(), 0, order)
    ranks = torch.arange(1, hits.shape[0] + 1, dtype=torch.float64)[:, None]
    precision_at_hits = torch.cumsum(hits, dim=0) / ranks * hits
    positives = hits.sum(dim=0)
    present = positives > 0
    if not present.any():
        return float("nan")
    return float((precision_at_hits.sum(dim=0)[present] / positives[present]).mean())


def create_task(num_classes: int, *, multilabel: bool = False, label_smoothing: float = 0.0, **options):
    """Return the task for a dataset: `MultiLabel` when ``multilabel`` else `SingleLabel`."""
    if multilabel:
        return MultiLabel(num_classes, label_smoothing, **options)
    if options:
        raise TypeError(f"single-label tasks take no option {', '.join(map(repr, options))}")
    return SingleLabel(num_classes, label_smoothing)
