"""The flags of the ``fedsim`` command line, generated from `fedsim.config.RunConfig`'s fields.

``--local-epochs`` sets ``local_epochs``, so the flags, ``--config FILE.toml`` keys and
``config.json`` always agree; `fedsim.cli.flag_messages.flag_message` turns the library's parameter
names in an error back into the flags the user typed.
"""

from __future__ import annotations

import argparse
import dataclasses
import re

from partitions.pathological import CLASS_ASSIGNMENT_MODES

from ..config.run_config import RunConfig
from ..config.validation import (COMPRESSIONS, DEVICES, DTYPES, DYNAMIC_RULES, SERVER_OPTIMIZERS, UNEVEN_MODES,
                                 WEIGHT_RULES)
from ..config.partitioning import SCHEMES
from ..config.strategies import list_strategies
from ..references import did_you_mean, is_reference

PARTITION_FIELDS = (
    "dataset", "data_root", "dataset_options", "partition", "num_partitions", "alpha", "classes_per_partition",
    "class_assignment_mode", "min_partition_size", "self_balancing", "max_tries", "shards_per_partition", "seed",
)
# What each setting means, in its unit; the default is appended from the field (or given here).
HELP = {
    "strategy": "allreduce (DDP all-reduce), reweighted (re-weighted gradients), fedavg (FedAvg rounds), or FedAvg's "
                "round as scaffold (SCAFFOLD), fednova (FedNova) or moon (MOON); fedprox, fedavgm, fedadagrad, fedadam, "
                "fedyogi (fedavg with those settings); or your own fedsim.algorithms.Algorithm "
                "subclass as package.module:Name or path/to/file.py:Name",
    "dataset_options": "a dataset option, e.g. label_granularity=coarse (repeatable)",
    "client_state_memory": "MiB the clients' states (SCAFFOLD, MOON, yours) may take in memory; beyond it they "
                           "spill to a file in --out (fedsim run)",
    "algorithm_options": "an option your algorithm declares, e.g. alpha=0.01 (repeatable)",
    "dataset": "dataset name (`fedsim datasets` lists them and where each is read from), or your own loader "
               "returning a fedsim.data.Dataset as package.module:load or path/to/file.py:load",
    "data_root": "folder the on-disk datasets are read from (default $FEDSIM_DATA or ~/.cache/fedsim/data)",
    "download": "let torchvision download a missing dataset (needs a network)",
    "model": "classifier: %(choices)s; or your own factory of (num_classes, in_channels, image_size) as "
             "package.module:make or path/to/file.py:make",  # argparse reads the lazy choices only for the help
    "norm": "normalisation layers (default: the model's own)",
    "partition": "how the training labels are split over the K partitions; natural: one per client id the data "
                 "carries (an npz file's client_train)",
    "num_partitions": "clients or ranks K (with --partition natural, the number of client ids)",
    "alpha": "Dirichlet concentration, > 0: small is skewed (dirichlet, quantity, extended-dirichlet, "
             "balanced-dirichlet)",
    "classes_per_partition": "k of #C=k: classes per partition (pathological, extended-dirichlet)",
    "class_assignment_mode": "how #C=k picks classes; first-deterministic is NIID-Bench's (partition i holds i mod C)",
    "min_partition_size": "smallest partition a Dirichlet draw may give, in samples (dirichlet, quantity, "
                          "extended-dirichlet)",
    "self_balancing": "NIID-Bench's balance step of the Dirichlet split (dirichlet)",
    "max_tries": "Dirichlet draws made to reach --min-partition-size (dirichlet, quantity, extended-dirichlet)",
    "shards_per_partition": "McMahan shards dealt to each partition (shards)",
    "rounds": "rounds; each is FedAvg's round of samples, and every strategy reports after each",
    "local_epochs": "FedAvg local epochs E per round",
    "local_steps": "FedAvg local steps tau per round, instead of --local-epochs (default: unset)",
    "batch_size": "samples per step per rank or client (B)",
    "micro_batches": "gradient accumulation: each batch in this many forward/backward passes, one optimizer step "
                     "(DDP's no_sync() for all but the last), >= 1",
    "lr": "learning rate of SGD: the DDP optimizer (allreduce, reweighted) or each client's (fedavg)",
    "momentum": "SGD momentum in [0, 1)",
    "weight_decay": "SGD L2 weight decay",
    "fraction": "FedAvg fraction C of the clients sampled per round, in (0, 1]",
    "weights": "how ranks or clients are weighted (default: equal for allreduce, size for reweighted and fedavg)",
    "dynamic_rule": "--weights dynamic: score each rank by its loss or its gradient's cosine to the mean",
    "temperature": "--weights dynamic: softmax temperature, > 0",
    "mu": "FedProx proximal weight, >= 0 (fedavg)",
    "moon_mu": "MOON's contrastive-loss weight mu, > 0 (moon)",
    "moon_temperature": "MOON's contrastive-loss temperature, > 0 (moon)",
    "feature_noise": "NIID-Bench feature-noise skew: partition i gets Gaussian noise of standard deviation "
                     "sigma * i / (K - 1) on its normalised inputs (unit: standard deviations of the data)",
    "server_lr": "FedAvg server learning rate (1 is plain averaging)",
    "server_momentum": "FedAvgM server momentum in [0, 1)",
    "server_optimizer": "FedAvg's server optimizer: sgd (FedAvg, FedAvgM), or FedOpt's adagrad, adam, yogi",
    "server_beta1": "FedOpt (--server-optimizer adagrad/adam/yogi): first-moment decay in [0, 1)",
    "server_beta2": "FedOpt (--server-optimizer adam/yogi): second-moment decay in [0, 1)",
    "server_tau": "FedOpt (--server-optimizer adagrad/adam/yogi): adaptivity bound tau > 0",
    "uneven": "allreduce/reweighted with shards of unequal size: join (DDP Join: a finished rank sits out) "
              "or cycle (it starts its shard over)",
    "seed": "base seed of the partition, model, sampling and shuffles, >= 0",
    "device": "cpu, cuda, or auto (cuda when present)",
    "dtype": "float64 makes engines comparable to ~1e-10; float32 is fast",
    "amp": "mixed precision: bf16 on CPU, fp16 with loss scaling on CUDA",
    "eval_every": "evaluate on the test split every this many rounds (and after the last)",
    "checkpoint_every": "write checkpoint.pt every this many rounds (and after the last)",
    "local_test_fraction": "in (0, 1): each client holds back this share of its samples, stratified by label, as "
                           "its local test set, on which the global model is evaluated (clients.csv) "
                           "(default: none)",
    "eval_clients_every": "evaluate on every client's local test set every this many rounds (and after the last) "
                          "(default: with every evaluation)",
    "client_target": "the accuracy whose share of clients at or above it metrics.csv reports, in [0, 1]",
    "tensorboard": "also write every metric as TensorBoard scalars into this folder, one TensorBoard run per "
                   "strategy (needs pip install 'fedsim[tensorboard]') (default: none)",
    "client_dropout": "the chance in [0, 1) that a sampled client fails to return; the round goes on without it",
    "stragglers": "the share in [0, 1] of each round's clients that do partial work: local epochs (or steps) "
                  "drawn uniformly from 1 to the run's",
    "holdout_clients": "in (0, 1): a seeded share of the clients never trains and is evaluated as unseen "
                       "clients (the participation gap); FedAvg's round only (default: none)",
    "personalize_steps": "personalized evaluation (FedAvg-FT): each client fine-tunes the global model for this "
                         "many local steps before its local test (default: none)",
    "label_smoothing": "cross-entropy label smoothing in [0, 1)",
    "fused": "one forward of K x B samples (allreduce/reweighted), or of every client whose round is one SGD "
             "step (fedavg, fednova), where that computes what one forward each would",
    "vectorize": "train a round's clients in cohorts at once with torch.func (fedsim run, compare): --vectorize "
                 "requires it, --no-vectorize runs the loop (default: where it applies)",
    "vectorize_chunk": "the most clients a cohort trains at once; its memory is three copies of the model per "
                       "client",
    "compression": "allreduce/reweighted: how gradients travel: none, fp16, bf16, int8, or powersgd (fedsim ddp "
                   "only); bytes are counted compressed",
    "powersgd_rank": "--compression powersgd: the rank of its low-rank approximation, >= 1",
    "sync_bn": "allreduce/reweighted: BatchNorm statistics over every rank's batch (SyncBatchNorm), not each "
               "rank's own",
    "partition_file": "a partition saved by `fedsim partition` (JSON), used instead of the partition flags "
                      "(default: none, the partition is made from them)",
}
NORMS = ("batch", "group", "layer", "none")  # each model takes some of them; the model says which


class LazyChoices:
    """Choices read from a registry on first use, so that a command that never shows them skips its import.

    A reference to user code (``package.module:Name``) is one of the choices too: the registry resolves it.
    """

    def __init__(self, load):
        self._load, self._names = load, None

    def _choices(self) -> list[str]:
        if self._names is None:
            self._names = self._load()
        return self._names

    def __contains__(self, name) -> bool:
        return is_reference(name) or name in self._choices()

    def __iter__(self):
        return iter(self._choices())


class ChoicesOrReference(tuple):
    """Fixed choices, listed in the help, that also take a reference to user code (``path/to/file.py:Name``)."""

    def __contains__(self, name) -> bool:
        return is_reference(name) or tuple.__contains__(self, name)


def _model_names() -> list[str]:
    from ..models import list_models

    return list_models()


CHOICES = {
    "strategy": ChoicesOrReference(list_strategies()), "model": LazyChoices(_model_names), "norm": NORMS,
    "partition": SCHEMES, "weights": WEIGHT_RULES, "dynamic_rule": DYNAMIC_RULES, "uneven": UNEVEN_MODES,
    "compression": COMPRESSIONS, "server_optimizer": SERVER_OPTIMIZERS, "device": DEVICES, "dtype": DTYPES,
    "class_assignment_mode": CLASS_ASSIGNMENT_MODES,
}
# The table fields, each set one KEY=VALUE entry at a time.
OPTION_FLAGS = {"dataset_options": "--dataset-option", "algorithm_options": "--algorithm-option"}
# Library parameters whose names differ from the RunConfig field a flag sets.
PARAMETER_ALIASES = {
    "num_classes_per_partition": "classes_per_partition",  # partitions.pathological, extended_dirichlet
    "scheme": "partition",  # fedsim.config.partitioning.make_partition
    "root": "data_root",  # fedsim.data.load_dataset
}


def config_flag(field: str) -> str:
    """Return the command-line flag that sets `RunConfig` field ``field``."""
    return OPTION_FLAGS.get(field) or "--" + field.replace("_", "-")


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block), suggesting the flag or value meant for a typo.

    An error names the help of the command at fault: ``fedsim run --help`` lists the run's flags,
    which ``fedsim --help`` does not.
    """

    def parse_args(self, args=None, namespace=None):
        # argparse leaves an unknown flag to the top parser, whose help lists only the commands
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.command_parser(parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def command_parser(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """Return the parser of the command ``parsed`` chose (``fedsim flower simulate``'s), this one if none."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and getattr(parsed, action.dest, None) in action.choices:
                command = action.choices[getattr(parsed, action.dest)]
                return command.command_parser(parsed) if isinstance(command, OneLineParser) else command
        return self

    def error(self, message):
        if message.startswith("unrecognized arguments: "):
            message += _suggestion(self, message.removeprefix("unrecognized arguments: ").split())
        message = _close_choices(self, message)
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _close_choices(parser: argparse.ArgumentParser, message: str) -> str:
    """Return argparse's "invalid choice" ``message`` with the choices close to the value suggested at its end."""
    match = re.match(r"argument ([^:]+): invalid choice: ('.*?') \(choose from", message)
    action = match and parser._option_string_actions.get(match.group(1).split("/")[0])
    if action is None or action.choices is None:
        return message
    return message + did_you_mean(match.group(2)[1:-1], list(action.choices))


def _suggestion(parser: argparse.ArgumentParser, words: list[str]) -> str:
    """Return "; did you mean --x?" for the first unknown flag close to a flag of ``parser`` or its commands."""
    import difflib

    flags = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                flags |= set(command._option_string_actions)
    for word in words:
        if word.startswith("--"):
            close = difflib.get_close_matches(word.split("=")[0], sorted(flags), n=1)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


def add_config_flags(parser: argparse.ArgumentParser, names=None, hidden=()) -> None:
    """Add a flag for each `RunConfig` field in ``names`` (all by default); unset flags stay absent.

    The fields in ``hidden`` still parse (so that using one gets its own error) but stay out of the help.
    """
    for field in dataclasses.fields(RunConfig):
        if names is not None and field.name not in names:
            continue
        flag = config_flag(field.name)
        if field.name in OPTION_FLAGS:
            parser.add_argument(flag, dest=field.name, action=KeyValueOption, metavar="KEY=VALUE",
                                default=argparse.SUPPRESS, help=HELP[field.name])
            continue
        aliases = [flag, "--scheme"] if field.name == "partition" else [flag]
        help_text = HELP[field.name]
        if "(default" not in help_text:
            help_text += f" (default {field.default})"
        if field.name in hidden:
            help_text = argparse.SUPPRESS
        if "bool" in str(field.type):
            parser.add_argument(*aliases, dest=field.name, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=help_text)
            continue
        kind = int if "int" in str(field.type) else float if "float" in str(field.type) else str
        parser.add_argument(*aliases, dest=field.name, type=kind, choices=CHOICES.get(field.name),
                            default=argparse.SUPPRESS, help=help_text, metavar=_metavar(field.name))


def _metavar(name: str) -> str | None:
    """Return the flag's placeholder: its choices where they are fixed, its name where they are read lazily.

    argparse lists the choices when the flag is added; a lazy list (the models) would be read,
    and torch imported, by every command, even one that fails on its first flag.
    """
    if name in CHOICES and not isinstance(CHOICES[name], LazyChoices):
        return None
    return name.upper()


# Library parameter -> the flag that sets it: every RunConfig field, the aliases, compare's list and the folder.
class KeyValueOption(argparse.Action):
    """Collect ``--dataset-option KEY=VALUE`` (or ``--algorithm-option``) into a dict, reading VALUE as TOML would."""

    def __call__(self, parser, namespace, value, option_string=None):
        import tomllib

        key, separator, text = value.partition("=")
        if not separator or not key:
            parser.error(f"{option_string} needs KEY=VALUE, got {value!r}")
        try:
            parsed = tomllib.loads(f"value = {text}")["value"]
        except tomllib.TOMLDecodeError:
            parsed = text  # a bare word such as `coarse` is a string
        options = dict(getattr(namespace, self.dest, None) or {})
        options[key.replace("-", "_")] = parsed
        setattr(namespace, self.dest, options)


def add_training_command(commands, name: str, help_text: str, handler, hidden=()) -> argparse.ArgumentParser:
    """Add a command that trains (run, compare, ddp, flower simulate/deploy): the config flags, --out, --resume."""
    parser = commands.add_parser(name, help=help_text)
    table = "flower" if name in ("simulate", "deploy") else name
    parser.add_argument("--config", help="TOML file of settings (or a run's config.json); its keys are the flags' "
                        f"names, its [{table}] table overrides its top-level keys for this command, and flags given "
                        "here override both (default: none)")
    parser.add_argument("--out", help="results folder: new or empty, or a run to --resume (required); `out` in "
                        "the --config file sets it too")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint, with "
                        "the settings it recorded: only --out is needed, and --rounds to extend it")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_flags(parser, hidden=hidden)
    parser.set_defaults(handler=handler)
    return parser


def add_verbose_flag(command) -> None:
    """Add ``--verbose``: Flower's and Ray's log on the terminal rather than in the run folder's ``flower.log``."""
    command.add_argument("--verbose", action="store_true", help="show Flower's and Ray's log here (default: kept "
                         "in flower.log in the run folder, whose end an error quotes)")
