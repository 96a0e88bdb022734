"""What each `fedsim.config.RunConfig` field means, written once: `RunConfig`'s docstring and the command line's help.

Each text names other fields as ````name````; `fedsim.config.run_config` lists them in the
docstring's Parameters section as they are, and the command line (`fedsim.cli.flags`) turns each
into the flag that sets it (``--local-epochs``) and appends the default. A field's type comes from
its annotation.
"""

from __future__ import annotations

FIELD_DOCS = {
    "strategy": "allreduce (DDP all-reduce), reweighted (re-weighted gradients), fedavg (FedAvg rounds), or FedAvg's "
                "round as scaffold (SCAFFOLD), fednova (FedNova) or moon (MOON); fedprox, fedavgm, fedadagrad, "
                "fedadam, fedyogi (fedavg with those settings); or a user's `fedsim.algorithms.Algorithm` subclass "
                "as package.module:Name or path/to/file.py:Name (a file's path is stored absolute)",
    "dataset": "dataset name (`fedsim datasets` lists them and where each is read from), or a user's loader "
               "returning a `fedsim.data.Dataset` as package.module:load or path/to/file.py:load",
    "data_root": "folder the on-disk datasets are read from (default $FEDSIM_DATA or ~/.cache/fedsim/data)",
    "dataset_options": "the dataset's own options, e.g. label_granularity=coarse for cifar100 or image_size=28 for "
                       "digits",
    "download": "let torchvision download a missing dataset (needs a network); a run may turn it on when resumed",
    "partition_file": "a partition saved by `fedsim partition` (JSON), used instead of the partition settings, "
                      "which must then stay at their defaults; ``num_partitions`` must match the file's "
                      "(default: none, the partition is made from them)",
    "model": "classifier: a registered model (`fedsim models` lists them), or a user's factory of (num_classes, "
             "in_channels, image_size) as package.module:make or path/to/file.py:make",
    "norm": "normalisation layers: batch, group, layer or none, as the model takes them (default: the model's own)",
    "partition": "how the training labels are split over the K partitions: iid, dirichlet, pathological, shards, "
                 "quantity, extended-dirichlet (#C=k with Dir(alpha) among a partition's classes), "
                 "balanced-dirichlet (Dir(alpha) with equal sizes) or natural (one partition per client id the "
                 "data carries, such as an npz file's client_train; ``num_partitions`` must be their number); or a "
                 "flwr-datasets partitioner of the user's as package.module:Name or path/to/file.py:Name, given "
                 "``num_partitions``, ``seed`` and partition_by='label' where it takes them (a file's path is stored "
                 "absolute)",
    "partition_options": "the arguments of a flwr-datasets partitioner named by reference in ``partition``, e.g. "
                         "alpha=0.3",
    "alpha": "Dirichlet concentration, > 0: small is skewed (dirichlet, quantity, extended-dirichlet, "
             "balanced-dirichlet)",
    "classes_per_partition": "k of #C=k: classes per partition (pathological, extended-dirichlet)",
    "class_assignment_mode": "how pathological #C=k picks each partition's classes: first-deterministic, "
                             "NIID-Bench's, gives partition i class i mod C first, so every class is held once "
                             "there are as many partitions as classes; random (flwr-datasets' default) with 10 "
                             "partitions, 10 classes and k = 2 leaves some class held by no one in three draws "
                             "out of four",
    "num_partitions": "clients or ranks K (with ``partition`` natural, the number of client ids)",
    "min_partition_size": "smallest partition a Dirichlet draw may give, in samples (dirichlet, quantity, "
                          "extended-dirichlet)",
    "self_balancing": "NIID-Bench's balance step of the Dirichlet split (dirichlet)",
    "max_tries": "Dirichlet draws made to reach ``min_partition_size`` (dirichlet, quantity, extended-dirichlet)",
    "shards_per_partition": "McMahan shards dealt to each partition (shards)",
    "rounds": "rounds to run; every strategy reports once per round, after a FedAvg round's worth of samples "
              "(fraction x local epochs x N, or fraction x K x local steps x batch size)",
    "local_epochs": "FedAvg's local epochs E per round",
    "local_steps": "FedAvg's local steps tau per round, instead of ``local_epochs`` (default: unset)",
    "batch_size": "samples per step per rank or client (B)",
    "micro_batches": "gradient accumulation: each batch in this many forward/backward passes before its one "
                     "optimizer step (DDP's no_sync() for all but the last), >= 1",
    "lr": "learning rate of SGD: the one global optimizer of allreduce and reweighted, as in a DDP script, or each "
          "client's, started fresh every round (fedavg)",
    "momentum": "SGD momentum in [0, 1)",
    "weight_decay": "SGD L2 weight decay",
    "fraction": "FedAvg's fraction C of the clients sampled per round, in (0, 1]",
    "weights": "how ranks or clients are weighted: equal, size (n_k / n), class-balanced (each sample's loss "
               "weighted by fedsim.aggregate.class_balance_weights, the ranks equally) or dynamic (default: equal "
               "for allreduce, size for reweighted and fedavg)",
    "dynamic_rule": "``weights`` dynamic: weights softmax(score / temperature), the score a rank's mean loss "
                    "(loss) or its gradient's cosine to the mean gradient (cosine)",
    "temperature": "``weights`` dynamic: the softmax temperature, > 0",
    "mu": "FedProx proximal weight, >= 0 (fedavg)",
    "moon_mu": "MOON's contrastive-loss weight mu, > 0 (moon)",
    "moon_temperature": "MOON's contrastive-loss temperature tau, > 0 (moon)",
    "algorithm_options": "an option a user's algorithm declares (`fedsim.algorithms.Option`), e.g. alpha=0.01",
    "client_state_memory": "MiB the clients' states (SCAFFOLD's control variates, MOON's previous models, a user's) "
                           "may take in memory in a `fedsim run`; beyond it the least recently used spill to a file "
                           "in the run folder; it changes no result, so a resumed run may change it",
    "feature_noise": "NIID-Bench's feature-noise skew: partition i of K gets Gaussian noise of standard deviation "
                     "sigma * i / (K - 1) on its normalised inputs (unit: standard deviations of the data)",
    "server_lr": "FedAvg's server learning rate (1 is plain averaging)",
    "server_momentum": "FedAvgM's server momentum in [0, 1)",
    "server_optimizer": "FedAvg's server optimizer: sgd (FedAvg, FedAvgM), or FedOpt's adagrad, adam, yogi",
    "server_beta1": "FedOpt (``server_optimizer`` adagrad, adam, yogi): first-moment decay in [0, 1)",
    "server_beta2": "FedOpt (``server_optimizer`` adam, yogi): second-moment decay in [0, 1)",
    "server_tau": "FedOpt (``server_optimizer`` adagrad, adam, yogi): adaptivity bound tau > 0",
    "uneven": "allreduce/reweighted with shards of unequal size: join (DDP's Join: a finished rank sits out the "
              "rest of the epoch, the sum still divided by K) or cycle (it starts its reshuffled shard over)",
    "seed": "base seed of the partition, model, sampling and shuffles, >= 0",
    "device": "cpu, cuda, or auto (cuda when present)",
    "dtype": "the number type of the model, its updates and the server state: float64 makes every engine's "
             "arithmetic comparable to ~1e-10; float32 is fast",
    "amp": "mixed precision: bf16 on the CPU, fp16 with loss scaling on CUDA",
    "eval_every": "evaluate on the test split every this many rounds (and after the last)",
    "checkpoint_every": "write checkpoint.pt every this many rounds (and after the last)",
    "local_test_fraction": "in (0, 1): each client holds back this share of its samples, stratified by label, as "
                           "its local test set, on which the global model is evaluated (clients.csv) "
                           "(default: none)",
    "eval_clients_every": "evaluate on every client's local test set every this many rounds (and after the last) "
                          "(default: with every evaluation)",
    "client_target": "the accuracy in [0, 1] whose share of clients at or above it metrics.csv reports",
    "target_accuracy": "the test accuracy in [0, 1] whose first reaching summary.json reports, in rounds and in "
                       "simulated seconds (default: none)",
    "personalize_steps": "personalized evaluation (FedAvg-FT): each client fine-tunes the global model for this "
                         "many local steps before its local test (default: none)",
    "holdout_clients": "in (0, 1): a seeded share of the clients never trains and is evaluated as unseen "
                       "clients (the participation gap); FedAvg's round only (default: none)",
    "client_dropout": "FedAvg's round: the chance in [0, 1) that a sampled client fails to return; the round "
                      "goes on without it",
    "stragglers": "FedAvg's round: the share in [0, 1] of each round's clients that do partial work, local epochs "
                  "(or steps) drawn uniformly from 1 to the run's",
    "client_sampling": "FedAvg's round: how a round samples its clients: fixed (``fraction`` x K of them, without "
                       "replacement) or poisson (each client independently with probability ``fraction``, so a "
                       "round's size varies and may be 0: the sampling client-level DP's accountant assumes)",
    "client_speed": "FedAvg's round, on the simulated clock: each client's compute speed, drawn once per run: "
                    "constant, constant:V, lognormal:MU,SIGMA, uniform:A,B, or a file of one value per client; a "
                    "client at speed v takes ``sample_seconds`` / v per training sample",
    "bandwidth": "the simulated clock: each client's link in Mbit/s, drawn as ``client_speed`` is; a round adds the "
                 "model's bytes down and the update's bytes up over it (default: none, transfers take no time)",
    "sample_seconds": "the simulated clock: the seconds one training sample takes a client at speed 1 (the default "
                      "is benchmarks/sample_seconds.py's for the cnn on mnist-5k at batch 10, on a 2-core AMD EPYC)",
    "round_deadline": "FedAvg's round: the simulated seconds a round waits; a client that would return later is "
                      "dropped at the deadline, its download spent and its work lost (default: none, the round "
                      "waits for its slowest client)",
    "over_select": "FedAvg's round: sample (1 + this) x the round's clients and keep the first ones to return "
                   "(Bonawitz et al. 2019), >= 0",
    "asynchronous": "run FedAvg's clients without rounds, on the simulated clock: fedbuff (the server steps after "
                    "each ``buffer`` updates, each weighed by ``staleness``) or fedasync (the server mixes in each "
                    "model as it arrives, with weight ``async_alpha`` x ``staleness``) (default: none, synchronous "
                    "rounds)",
    "buffer": "``asynchronous`` = fedbuff: the updates K the server waits for before it steps, >= 1",
    "concurrency": "``asynchronous``: the clients training at any time; a client that returns is replaced by one "
                   "sampled from those not training, >= 1 (default: a round's clients, ``fraction`` x K)",
    "staleness": "``asynchronous``: how an update s server steps old is weighed: constant (1), polynomial:A "
                 "((1 + s)^-A; FedBuff's is polynomial:0.5) or hinge:A,B (1 up to B steps, then 1 / (A (s - B) + 1))",
    "async_alpha": "``asynchronous`` = fedasync: the mixing weight alpha in (0, 1] of an update without staleness",
    "dp_clip": "client-level differential privacy (DP-FedAvg): clip each client's update, one flat vector over "
               "every tensor, to this L2 norm C > 0; the server adds Gaussian noise to the sum, divides it by the "
               "expected number of clients and weighs clients alike (default: none, no DP)",
    "dp_noise": "``dp_clip``: the noise multiplier z >= 0, the noise's standard deviation over C (0 clips only) "
                "(default: none; give it or ``dp_target_epsilon``)",
    "dp_target_epsilon": "``dp_clip``: find the noise multiplier that spends this epsilon > 0 at ``dp_delta`` over "
                         "the run's rounds and sampling, instead of giving ``dp_noise`` (default: none)",
    "dp_delta": "``dp_clip``: the delta in (0, 1) at which the run's epsilon is reported",
    "dp_accountant": "``dp_clip``: the privacy accountant, rdp (Renyi DP) or pld (privacy loss distributions, "
                     "tighter; Poisson ``client_sampling`` only), both from dp-accounting (pip install 'fedsim[dp]')",
    "dp_adaptive_quantile": "``dp_clip``: adaptive clipping (Andrew et al. 2021): the clip follows this quantile "
                            "in (0, 1) of the clients' update norms, starting from ``dp_clip`` (default: a fixed "
                            "clip)",
    "dp_clip_lr": "``dp_adaptive_quantile``: the clip's geometric learning rate, > 0",
    "dp_count_noise": "``dp_adaptive_quantile``: the standard deviation sigma_b > 0 of the noise on the count of "
                      "unclipped updates (default: the expected number of clients / 20)",
    "tensorboard": "also write every metric as TensorBoard scalars into this folder, one TensorBoard run per "
                   "strategy (needs pip install 'fedsim[tensorboard]'), for runs that write a results folder "
                   "(default: none)",
    "label_smoothing": "cross-entropy label smoothing in [0, 1)",
    "fused": "one forward of K x B samples (allreduce/reweighted) with per-sample loss weights where that keeps "
             "per-rank semantics (no BatchNorm, no dropout, no cosine rule), or of every client whose round is "
             "one SGD step on one batch (FedAvg's round); otherwise a loop over ranks or clients",
    "vectorize": "FedAvg's round in one process: train a round's clients in cohorts at once with torch.func "
                 "(fedsim.engines.inprocess.vectorized); true requires it and is refused where it does not "
                 "apply, false runs the loop (default: where it applies)",
    "vectorize_chunk": "the most clients a cohort trains at once; its memory is three copies of the model per "
                       "client (parameters, gradients, optimizer state)",
    "compression": "allreduce/reweighted: how each rank's gradient travels: none, fp16, bf16, int8, or powersgd "
                   "(fedsim ddp only); bytes are counted at the compressed size",
    "powersgd_rank": "``compression`` powersgd: the rank of its low-rank approximation, >= 1",
    "sync_bn": "allreduce/reweighted: BatchNorm statistics over every rank's batch at once (SyncBatchNorm), not "
               "each rank's own; the weighted rules then weigh each rank's loss, not its gradient",
}


def annotation_text(annotation: str) -> str:
    """Return a field's type as a docstring writes it: ``int | None`` becomes ``int, optional``.

    Examples
    --------
    >>> annotation_text("float | None"), annotation_text("str")
    ('float, optional', 'str')
    """
    kinds = [kind.strip() for kind in annotation.split("|")]
    optional = "None" in kinds
    text = " or ".join(kind for kind in kinds if kind != "None")
    return f"{text}, optional" if optional else text


def with_parameters(config_class) -> str:
    """Return ``config_class``'s docstring with a Parameters section of its fields, before its Examples."""
    import dataclasses
    import inspect
    import textwrap

    head, examples_title, examples = inspect.cleandoc(config_class.__doc__).partition("\nExamples\n")
    lines = [head.rstrip(), "", "Parameters", "----------"]
    for field in dataclasses.fields(config_class):
        lines.append(f"{field.name} : {annotation_text(str(field.type))}")
        lines.extend(textwrap.wrap(FIELD_DOCS[field.name], width=100, initial_indent="    ",
                                   subsequent_indent="    ", break_on_hyphens=False))
    return "\n".join(lines) + (f"\n{examples_title}{examples}" if examples_title else "")
