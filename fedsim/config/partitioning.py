"""Build a `Partition` from the flags the CLI and the configs share."""

from __future__ import annotations

import numpy as np

import partitions

from ..checks import SettingError, check_choice
from ..references import is_reference

SCHEMES = ("iid", "dirichlet", "pathological", "shards", "quantity",
           "extended-dirichlet", "balanced-dirichlet", "natural")

#: fedsim's #C=k, in "pathological" and "extended-dirichlet", is NIID-Bench's: partition i holds class i mod C,
#: then k - 1 others at random, so every class is held once there are as many partitions as classes.
#: `partitions.pathological` keeps flwr-datasets' default, "random", which with 10 partitions, 10
#: classes and k = 2 leaves a class held by no one in three draws out of four.
CLASS_ASSIGNMENT_MODE = "first-deterministic"
HOLDOUT_STREAM = 2  # the held-out clients' random stream beside the seed (the local test split's is 1)

# The partition settings that only some schemes read, and what each is; a config that sets one
# for a scheme that does not read it is refused rather than silently ignored.
SCHEME_SETTINGS = {
    "alpha": (("dirichlet", "quantity", "extended-dirichlet", "balanced-dirichlet"), "the Dirichlet concentration"),
    "min_partition_size": (("dirichlet", "quantity", "extended-dirichlet"),
                           "the smallest partition a Dirichlet draw may give"),
    "max_tries": (("dirichlet", "quantity", "extended-dirichlet"),
                  "the number of Dirichlet draws made to reach the minimum size"),
    "self_balancing": (("dirichlet",), "NIID-Bench's balance step of the Dirichlet split"),
    "classes_per_partition": (("pathological", "extended-dirichlet"), "k of #C=k"),
    "class_assignment_mode": (("pathological", "extended-dirichlet"), "how #C=k picks each partition's classes"),
    "shards_per_partition": (("shards",), "the shards each partition is dealt"),
}


def check_scheme_settings(scheme: str | None, settings: dict, defaults: dict) -> None:
    """Refuse a partition setting in ``settings`` that differs from ``defaults`` but ``scheme`` does not read.

    ``scheme`` None stands for a partition read from ``partition_file``, which reads none of them.

    Examples
    --------
    >>> check_scheme_settings("iid", {"alpha": 0.1}, {"alpha": 0.5})
    Traceback (most recent call last):
    partitions.SettingError: `alpha`=0.1 does nothing with `partition`='iid' (it is the Dirichlet concentration of dirichlet, quantity, extended-dirichlet and balanced-dirichlet); remove it or use `partition`='dirichlet'
    """
    if scheme is None:
        given = [name for name in ("partition", *SCHEME_SETTINGS) if settings.get(name, defaults[name]) != defaults[name]]
        if given:
            raise SettingError("{setting} does nothing with {partition_file:name}, whose partition is made already; "
                               "remove one of the two", fields={"setting": given[0]}, setting=settings[given[0]],
                               partition_file=settings.get("partition_file"))
        return
    for name, (schemes, purpose) in SCHEME_SETTINGS.items():
        if name in settings and settings[name] != defaults[name] and scheme not in schemes:
            raise SettingError("{setting} does nothing with {partition} (it is {purpose:text} of {schemes:text}); "
                               "remove it or use {reader}", fields={"setting": name, "reader": "partition"},
                               setting=settings[name], partition=scheme, purpose=purpose, schemes=_and(schemes),
                               reader=schemes[0])


def _and(names) -> str:
    """Return ``a``, ``a and b`` or ``a, b and c``."""
    return " and ".join(filter(None, (", ".join(names[:-1]), names[-1])))


def make_partition(
    labels,
    scheme: str,
    *,
    num_partitions: int,
    alpha: float = 0.5,
    classes_per_partition: int = 2,
    class_assignment_mode: str = CLASS_ASSIGNMENT_MODE,
    min_partition_size: int = 10,
    self_balancing: bool = False,
    max_tries: int = 10,
    shards_per_partition: int = 2,
    seed: int = 0,
    client_ids=None,
) -> partitions.Partition:
    """Return the partition of ``labels`` named by ``scheme`` and its parameters.

    A multi-hot label matrix (samples x classes) goes through `partitions.multilabel_dirichlet`
    for ``"dirichlet"``; the label-based pathological and shard schemes need single labels.

    Parameters
    ----------
    labels : array_like
        Class ids, or a multi-hot (samples x classes) matrix.
    scheme : {"iid", "dirichlet", "pathological", "shards", "quantity", "extended-dirichlet", "balanced-dirichlet", \
"natural"}
        ``"extended-dirichlet"`` is #C=k + Dir(alpha) (`partitions.extended_dirichlet`);
        ``"balanced-dirichlet"`` is Dir(alpha) label skew with equal partition sizes
        (`partitions.balanced_dirichlet`); ``"natural"`` is one partition per id of
        ``client_ids`` (`partitions.natural`).
    num_partitions : int
        The number of partitions; ``"natural"`` makes one per id, and this must be their number.
    alpha : float, default 0.5
        Dirichlet concentration of ``"dirichlet"``, ``"extended-dirichlet"`` and
        ``"balanced-dirichlet"`` (labels) and ``"quantity"`` (sizes).
    classes_per_partition : int, default 2
        k of ``"pathological"`` and ``"extended-dirichlet"`` #C=k.
    class_assignment_mode : str, default "first-deterministic"
        How ``"pathological"`` and ``"extended-dirichlet"`` pick each partition's classes (see
        `partitions.pathological`). The default is NIID-Bench's #C=k, which holds every class once
        there are as many partitions as classes, unlike `partitions.pathological`'s own default,
        ``"random"``.
    min_partition_size, max_tries : int, default 10
        Smallest partition ``"dirichlet"``, ``"quantity"`` and ``"extended-dirichlet"`` accept, and
        how many draws they make.
    self_balancing : bool, default False
        NIID-Bench's balance step of single-label ``"dirichlet"``.
    shards_per_partition : int, default 2
        Shards dealt to each partition by ``"shards"``.
    seed : int, default 0
    client_ids : array_like, optional
        The id each sample carries (a `fedsim.data.Dataset`'s ``train_client_ids``), which
        ``"natural"`` needs.

    Examples
    --------
    >>> make_partition(np.repeat(np.arange(4), 25), "pathological", num_partitions=4, classes_per_partition=1,
    ...                class_assignment_mode="deterministic").sizes.tolist()
    [25, 25, 25, 25]
    """
    check_choice("scheme", scheme, SCHEMES)
    labels = np.asarray(labels)
    multilabel = labels.ndim == 2
    if scheme == "natural":
        return natural_partition(client_ids, num_partitions)
    if scheme == "iid":
        return partitions.iid(labels, num_partitions, seed=seed)
    if scheme == "quantity":
        return partitions.quantity_skew(
            labels, num_partitions, alpha, min_partition_size=min_partition_size, max_tries=max_tries, seed=seed
        )
    if scheme == "dirichlet" and multilabel:
        if self_balancing:
            raise SettingError("{self_balancing:name} applies to single-label data; leave it off for multi-label data",
                               self_balancing=self_balancing)
        return partitions.multilabel_dirichlet(
            labels, num_partitions, alpha, min_partition_size=min_partition_size, max_tries=max_tries, seed=seed
        )
    if scheme == "dirichlet":
        return partitions.dirichlet(labels, num_partitions, alpha, min_partition_size=min_partition_size,
                                    self_balancing=self_balancing, max_tries=max_tries, seed=seed)
    if scheme in ("pathological", "shards", "extended-dirichlet", "balanced-dirichlet") and multilabel:
        raise SettingError("{scheme} needs single-label data; use 'dirichlet' or 'iid' for multi-label", scheme=scheme)
    if scheme == "pathological":
        return partitions.pathological(
            labels, num_partitions, classes_per_partition, class_assignment_mode=class_assignment_mode, seed=seed
        )
    if scheme == "shards":
        return partitions.shards(labels, num_partitions, shards_per_partition, seed=seed)
    if scheme == "extended-dirichlet":
        return partitions.extended_dirichlet(
            labels, num_partitions, num_classes_per_partition=classes_per_partition, alpha=alpha,
            class_assignment_mode=class_assignment_mode, min_partition_size=min_partition_size, max_tries=max_tries,
            seed=seed,
        )
    if scheme == "balanced-dirichlet":
        return partitions.balanced_dirichlet(labels, num_partitions, alpha=alpha, seed=seed)
    raise AssertionError(f"the scheme {scheme!r} of SCHEMES is made by no branch of make_partition")


def natural_partition(client_ids, num_partitions: int, dataset: str | None = None) -> partitions.Partition:
    """Return `partitions.natural` of ``client_ids``, refusing data without ids and a count that differs."""
    if client_ids is None:
        named = "{dataset:name}" if dataset is None else "{dataset}"  # the dataset's name where it is known
        raise SettingError("{partition} needs the client each training sample came from, and " + named + " has "
                           "none: give the npz file a `client_train` array (one id per training sample), or return "
                           "a `Dataset` with `train_client_ids`", partition="natural", dataset=dataset)
    partition = partitions.natural(client_ids)
    if partition.num_partitions != num_partitions:
        raise SettingError("{partition} makes {made:text} partitions, one per client id of the dataset, but "
                           "{num_partitions:name} is {num_partitions:text}; set {num_partitions:name} to {made:text}",
                           partition="natural", made=partition.num_partitions, num_partitions=num_partitions)
    return partition


def partition_for(config, labels, client_ids=None) -> partitions.Partition:
    """Return the partition a `fedsim.config.RunConfig` describes: read from its ``partition_file``, or made;
    with ``local_test_fraction``, each client's local test set held back (`partitions.split_local_test`).

    ``client_ids`` are the dataset's ``train_client_ids``, which ``partition="natural"`` reads.
    """
    partition = whole_partition(config, labels, client_ids)
    fraction = getattr(config, "local_test_fraction", None)
    if fraction is None:
        return partition
    if partition.local_test is not None:
        raise SettingError("{partition_file:name} holds local test sets already; leave {local_test_fraction:name} out",
                           partition_file=config.partition_file, local_test_fraction=fraction)
    partition = partitions.split_local_test(partition, labels, fraction, seed=config.seed)
    holdout = getattr(config, "holdout_clients", None)
    return partition if holdout is None else hold_out(partition, holdout, config.seed)


def holdout_count(share: float, num_clients: int) -> int:
    """Return how many of ``num_clients`` clients a ``holdout_clients`` share holds out."""
    return round(share * num_clients)


def training_client_count(config) -> int:
    """Return how many of ``config``'s ``num_partitions`` clients train: all but the ``holdout_clients`` share.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> [training_client_count(SimpleNamespace(num_partitions=10, holdout_clients=h)) for h in (None, 0.2)]
    [10, 8]
    """
    held = 0 if config.holdout_clients is None else holdout_count(config.holdout_clients, config.num_partitions)
    return config.num_partitions - held


def hold_out(partition: partitions.Partition, share: float, seed: int) -> partitions.Partition:
    """Return ``partition`` with a seeded ``share`` of its clients held out of training: unseen clients.

    Their training samples are left out (each keeps its local test set, on which it is
    evaluated), and ``params["holdout_clients"]`` lists them, so that sampling skips them
    (`fedsim.schedule.sample_participants`) and ``partition.json`` records them.
    """
    count = holdout_count(share, partition.num_partitions)
    if not 1 <= count < partition.num_partitions:
        # the share in %g, short beside the counts (0.123457 of 10 clients), rather than its full repr
        raise SettingError("{holdout_clients:name}={share:text} of {clients:text} clients holds out {count:text}: it "
                           "must hold out at least one and leave at least one to train", holdout_clients=share,
                           share=f"{share:g}", clients=partition.num_partitions, count=count)
    rng = np.random.default_rng([seed, HOLDOUT_STREAM])
    held = sorted(int(k) for k in rng.choice(partition.num_partitions, size=count, replace=False))
    train = [np.empty(0, np.int64) if k in held else part for k, part in enumerate(partition)]
    return partitions.Partition(train, partition.num_samples, partition.scheme,
                                {**partition.params, "holdout_clients": held}, partition.seed,
                                local_test=partition.local_test)


def whole_partition(config, labels, client_ids=None) -> partitions.Partition:
    """Return the partition `partition_for` starts from, before any local test split."""
    if getattr(config, "partition_file", None) is not None:
        return load_partition_file(config.partition_file, labels, config.num_partitions)
    if config.partition == "natural":
        return natural_partition(client_ids, config.num_partitions, config.dataset)
    if is_reference(config.partition):
        from .partitioner_reference import partitioner_partition

        return partitioner_partition(config, labels, client_ids)
    return make_partition(
        labels,
        config.partition,
        num_partitions=config.num_partitions,
        alpha=config.alpha,
        classes_per_partition=config.classes_per_partition,
        class_assignment_mode=config.class_assignment_mode,
        min_partition_size=config.min_partition_size,
        self_balancing=config.self_balancing,
        max_tries=config.max_tries,
        shards_per_partition=config.shards_per_partition,
        seed=config.seed,
        client_ids=client_ids,
    )


def load_partition_file(path, labels=None, num_partitions: int | None = None) -> partitions.Partition:
    """Load a saved partition and check it fits ``labels`` (one index per sample) and ``num_partitions``, if given."""
    try:
        partition = partitions.Partition.load(path)
    except (FileNotFoundError, ValueError) as error:  # missing, a folder, not UTF-8, not a partition
        raise SettingError("{partition_file:name}: {reason:text}", partition_file=path, reason=error) from None
    if labels is None:
        return partition
    num_samples = len(labels)
    if partition.num_samples != num_samples:
        raise SettingError("{partition_file:name} {partition_file:text} partitions {made:text} samples but the "
                           "dataset's training split has {samples:text}: it was made for another dataset (or "
                           "{dataset_options:name})", partition_file=path, made=partition.num_samples,
                           samples=num_samples)
    if num_partitions is not None and partition.num_partitions != num_partitions:
        raise SettingError("{partition_file:name} {partition_file:text} holds {made:text} partitions but "
                           "{num_partitions:name} is {num_partitions:text}; set {num_partitions:name} to {made:text}",
                           partition_file=path, made=partition.num_partitions, num_partitions=num_partitions)
    return partition
