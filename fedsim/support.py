"""What runs where: one function says whether a method runs on an engine, and if not, why.

Each engine, the command line and the grid ask `refusal` (or `check_runs_on`, which raises its
answer) before they start anything, and ``fedsim strategies`` prints its answers for every
method as a table (`support_table`). The answer is read from what a method's class declares
(`fedsim.algorithms.Algorithm`: ``stateful_clients``, ``linear``, ``vectorizable``,
`Algorithm.has_personal_models`), never from its name, and then from the run's settings:

==================  ===================================================================================
engine              refuses
==================  ===================================================================================
``inprocess``       nothing: every method and setting runs in `fedsim run`'s one process
``workers``         gradient strategies, clients that keep a state, a combination that is not a
                    weighted sum (each worker adds its share), and a device other than the CPU (fork)
``cohorts``         gradient strategies, and client terms without a stacked form; what the model
                    decides (BatchNorm, a random draw in its forward) is found once it is built
                    (`fedsim.engines.inprocess.cohort_refusal.vectorize_refusal`)
``ddp``             as ``workers`` (each rank trains its share of the clients), a model or dataset
                    registered in this process only, ``vectorize``, and for the gradient strategies
                    a world size that is not the number of shards, and ``dynamic_rule='cosine'``
``flower-*``        a model or dataset registered in this process only, ``vectorize``, personal
                    models evaluated on clients' held-out data, resuming clients' states that live
                    on the nodes, and the gradient strategies' compression, SyncBatchNorm and AMP
``flower-app``      (a Flower user's own app, `fedsim.flower`) the gradient strategies, and client
                    terms that need fedsim's client core (``terms_need_client_core``: MOON)
==================  ===================================================================================

Asynchronous rounds (``asynchronous``: fedbuff, fedasync) run in ``inprocess`` alone, and only
with a method whose server hooks do not act on a round's clients (`asynchronous_refusal`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .checks import SettingError
from .config.strategies import Strategy, get_strategy, list_strategies
from .config.strategy_settings import unread_message
from .references import is_reference, shown, split_format


@dataclass(frozen=True)
class Engine:
    """One place a method can run.

    Attributes
    ----------
    column : str
        Its heading in ``fedsim strategies``' table.
    name : str
        How its refusals name it.
    """

    column: str
    name: str


#: The engines, by the name `refusal` takes, in the table's order.
ENGINES = {
    "inprocess": Engine("in-process", "`fedsim run`"),
    "workers": Engine("--workers", "`fedsim run --workers`"),
    "cohorts": Engine("cohorts", "`fedsim run --vectorize`"),
    "ddp": Engine("fedsim ddp", "fedsim ddp"),
    "flower-simulation": Engine("Flower simulation", "the Flower engine"),
    "flower-deployment": Engine("Flower deployment", "the Flower engine"),
    "flower-app": Engine("your Flower app", "fedsim.flower.MethodStrategy"),
}
#: The ``--workers`` count and ``--nproc`` the table asks about.
TABLE_PROCESSES = 2


def refusal(config, engine: str, *, workers: int = TABLE_PROCESSES, nproc: int | None = None,
            resume: bool = False, in_rank: bool = False) -> SettingError | None:
    """Return why ``config`` cannot run on ``engine`` (an error to raise or show), or ``None`` where it can.

    Parameters
    ----------
    config : fedsim.config.RunConfig
        The run; its strategy's class declares what the method needs.
    engine : str
        A key of `ENGINES`.
    workers : int
        The processes that share a round's clients out (``engine="workers"``).
    nproc : int, optional
        The ranks of ``fedsim ddp`` (``engine="ddp"``): the gradient strategies need one shard per rank.
    resume : bool
        Whether the run continues a folder (the Flower engine cannot resume clients' states).
    in_rank : bool
        Asked by a torchrun rank, not by the command that starts them: the user's script that
        registered a model or dataset runs in every rank, so the names reach them.
    """
    if engine not in ENGINES:
        raise ValueError(f"`engine`={engine!r} is not one of {', '.join(ENGINES)}")
    strategy = get_strategy(config.strategy)
    return (method_refusal(strategy, engine, workers=workers, name=config.strategy)
            or (privacy_refusal(config, algorithm_of(strategy)) if config.dp_clip is not None else None)
            or (asynchronous_engine_refusal(config.asynchronous, engine) if config.asynchronous else None)
            or (asynchronous_refusal(config, algorithm_of(strategy)) if config.asynchronous else None)
            or settings_refusal(config, strategy, engine, workers=workers, nproc=nproc, resume=resume,
                                in_rank=in_rank))


def check_runs_on(config, engine: str, **where) -> None:
    """Raise `refusal`'s answer, if there is one (``where``: `refusal`'s keywords)."""
    reason = refusal(config, engine, **where)
    if reason is not None:
        raise reason


def method_refusal(strategy: Strategy, engine: str, *, workers: int = TABLE_PROCESSES,
                   name: str | None = None) -> SettingError | None:
    """Return why ``strategy``'s method cannot run on ``engine`` whatever the settings, from its class alone.

    ``name`` is the strategy as the run gave it (a reference as written), for the message.
    """
    name = strategy.name if name is None else name
    if not strategy.local_training:
        if engine == "workers":
            return SettingError("{workers} trains FedAvg's clients in parallel; {strategy} takes one step of every "
                                "rank at a time: leave {workers:name} out (or run it with fedsim ddp)",
                                workers=workers, strategy=name)
        if engine == "cohorts":
            return unread_message("vectorize", True, {name: strategy.weight_rules[0]}, comparison=False)
        if engine == "flower-app":
            return SettingError("{strategy} takes one gradient step of every client at a time, not a round of a "
                                "ClientApp's own training; run it with `fedsim flower simulate`", strategy=name)
        return None
    if asynchronous := dict(strategy.named_settings).get("asynchronous"):
        return asynchronous_engine_refusal(asynchronous, engine)
    algorithm = algorithm_of(strategy)
    if engine == "flower-app" and algorithm.terms_need_client_core:
        return SettingError("{strategy}'s client term is a loss on each sample or acts on the model during training, "
                            "which needs fedsim's client core, not a ClientApp's optimizer step; run it with "
                            "`fedsim flower simulate`", strategy=name)
    if engine == "workers":
        return shared_out_refusal(
            algorithm, name, held=SettingError(": leave {workers:name} out (with {workers} a client trains in "
                                               "whichever process serves it)", workers=workers),
            summed=SettingError("the workers' partial sums cannot give: leave {workers:name} out"))
    if engine == "ddp":
        way_out = "run it with `fedsim run` (in-process)"
        return shared_out_refusal(algorithm, name, held=f", which fedsim ddp does not hold; {way_out}",
                                  summed=f"fedsim ddp's partial sums cannot give; {way_out}")
    if engine == "cohorts" and not algorithm.vectorizable:
        return cohorts_refused(no_stacked_form(algorithm.name))
    return None


def no_stacked_form(name: str) -> str:
    """Why method ``name``'s clients train in the loop: client terms without `LocalTerms.stacked`."""
    return f"{name}'s client terms have no stacked form (`LocalTerms.stacked`)"


def cohorts_refused(reason) -> SettingError:
    """Return the refusal of ``vectorize``=True where the clients cannot train as cohorts, for ``reason``."""
    return SettingError("{vectorize}: {reason:text}; leave {vectorize:name} out to run the loop", vectorize=True,
                        reason=reason)


def shared_out_refusal(algorithm, name: str, *, held, summed) -> SettingError | None:
    """Return why ``algorithm`` cannot have a round's clients shared out among processes, or ``None``.

    A client's state would stay in whichever process trained it last (``held`` ends that
    message); a combination that is not a weighted sum cannot be made of the processes' partial
    sums (``summed`` ends that one).
    """
    if algorithm.stateful_clients:
        return SettingError("{strategy} keeps a state on each client between rounds{held:text}", strategy=name,
                            held=held)
    if not algorithm.linear:
        return SettingError("{strategy} combines the round's models other than by a weighted sum (it overrides "
                            "`aggregate`), which {summed:text}", strategy=name, summed=summed)
    return None


def privacy_refusal(config, algorithm) -> SettingError | None:
    """Return why client-level DP (``dp_clip``) cannot bound what ``config``'s method sends, or ``None``.

    DP-FedAvg's sensitivity is C because the server adds clipped updates with weights alike and
    receives nothing else from a client. ``algorithm`` is the method's class, whose hooks say
    whether it weighs or combines clients its own way, or the method built for the run, whose
    declared round sums say whether its clients send more than their update (SCAFFOLD's control
    variates, FedNova's step counts).
    """
    from .algorithms import Algorithm
    from .algorithms.declared import RoundSum, declared

    method = algorithm if isinstance(algorithm, type) else type(algorithm)
    way_out = "client-level DP runs FedAvg's round and the methods that change only its clients' training or the " \
              "server optimizer (fedprox, moon, fedadam, ...); leave {dp_clip:name} out to run it without DP"
    if method.scale is not Algorithm.scale:
        return SettingError("{strategy} weighs each client's model by its own rule (it overrides `scale`), where "
                            "{dp_clip} weighs every client alike so that one client moves the sum by C at most; "
                            + way_out, strategy=config.strategy, dp_clip=config.dp_clip)
    if not method.linear:
        return SettingError("{strategy} combines the round's models other than by a sum (it overrides `aggregate`), "
                            "where {dp_clip} noises the sum of the clipped updates; " + way_out,
                            strategy=config.strategy, dp_clip=config.dp_clip)
    if not isinstance(algorithm, type) and (sums := declared(algorithm, RoundSum)):
        return SettingError("{strategy}'s clients send more than their update (its round sums: {sums:text}), which "
                            "{dp_clip} neither clips nor noises; " + way_out, strategy=config.strategy,
                            dp_clip=config.dp_clip, sums=", ".join(sums))
    return None


#: Why each engine but ``inprocess`` does not run asynchronous rounds.
_NO_ASYNCHRONOUS = {
    "workers": "trains a round's clients in parallel; an asynchronous run trains each client when the clock sends it "
               "the model, one at a time: leave {workers:name} out",
    "cohorts": "trains a round's clients together; an asynchronous run trains each client when the clock sends it "
               "the model, one at a time: leave {vectorize:name} out",
    "ddp": "shares a round's clients out among ranks that add up their sums, and an asynchronous run has no rounds; "
           "run it with `fedsim run`",
    "flower": "takes each reply when it arrives in wall time, where fedsim's asynchronous server takes it in the "
              "order of the simulated clock; run it with `fedsim run`",
}


def asynchronous_engine_refusal(asynchronous: str, engine: str) -> SettingError | None:
    """Return why ``engine`` does not run ``asynchronous`` rounds (fedbuff, fedasync), or ``None`` (in-process)."""
    if engine == "inprocess":
        return None
    reason = _NO_ASYNCHRONOUS["flower" if engine.startswith("flower") else engine]
    return SettingError("{asynchronous}: {where:text} " + reason, asynchronous=asynchronous,
                        where=ENGINES[engine].name)


#: The hooks of a method's server that act on a round's clients together.
ROUND_HOOKS = ("begin_round", "scale", "aggregate", "to_delta", "end_round")


def asynchronous_refusal(config, algorithm) -> SettingError | None:
    """Return why ``config``'s method cannot run with ``asynchronous``, or ``None``.

    An asynchronous server takes one update at a time, weighed by its staleness, and has no
    round whose clients a method's server hooks could act on together: SCAFFOLD's control
    variate, FedNova's normalisation and FedDyn's state are rules over a round's clients that
    their papers do not restate without one. A method that changes its clients' training only
    (FedProx's penalty, MOON's contrast with each client's own last model) runs. ``algorithm`` is the
    method's class, whose hooks say this, or the method built for the run, whose declared server
    state (`fedsim.algorithms.ServerState`, `fedsim.algorithms.RoundSum`) says it too.
    """
    from .algorithms import Algorithm
    from .algorithms.declared import RoundSum, ServerState, declared

    method = algorithm if isinstance(algorithm, type) else type(algorithm)
    hooks = [name for name in ROUND_HOOKS if getattr(method, name) is not getattr(Algorithm, name)]
    if not isinstance(algorithm, type):
        hooks += [name for kind in (ServerState, RoundSum) for name in declared(algorithm, kind)]
    if not hooks and method.linear:
        return None
    hooks = hooks or ["aggregate"]
    return SettingError("{strategy}'s server acts on a round's clients together ({hooks:text}), and {asynchronous} "
                        "takes one update at a time with no round; asynchronous rounds run the methods that change "
                        "only their clients' training (fedavg, fedprox, moon): leave {asynchronous:name} out",
                        strategy=config.strategy, hooks=", ".join(hooks), asynchronous=config.asynchronous)


def settings_refusal(config, strategy: Strategy, engine: str, *, workers: int, nproc: int | None,
                     resume: bool, in_rank: bool = False) -> SettingError | None:
    """Return why ``config``'s settings cannot run on ``engine``, once its method can (`method_refusal`)."""
    if engine == "workers" and workers > 1 and config.device != "cpu":
        return SettingError("{workers} forks CPU processes; with {device} leave it out", workers=workers,
                            device=config.device)
    if engine not in ("ddp", "flower-simulation", "flower-deployment"):
        return None
    where = ENGINES[engine].name
    reason = (None if in_rank else registered_here(config, where)) or trains_alone_refusal(config, where)
    if reason is not None:
        return reason
    if engine == "ddp":
        if strategy.local_training:
            return None
        if nproc is not None and config.num_partitions != nproc:
            return SettingError("{num_partitions} must equal the number of processes ({nproc:text}) for {strategy}: "
                                "one shard per rank; fedavg serves any number of clients",
                                num_partitions=config.num_partitions, nproc=nproc, strategy=config.strategy)
        if config.weights == "dynamic" and config.dynamic_rule == "cosine":
            return SettingError("{dynamic_rule} needs every rank's whole gradient and runs in-process only "
                                "(`fedsim run`); use {instead} with `fedsim ddp`", fields={"instead": "dynamic_rule"},
                                dynamic_rule="cosine", instead="loss")
        return None
    return flower_refusal(config, strategy, resume=resume)


def flower_refusal(config, strategy: Strategy, *, resume: bool) -> SettingError | None:
    """Return why the Flower engine cannot run ``config``'s settings, or ``None``.

    allreduce and reweighted send each rank's full-precision gradient: gradient compression
    (a DDP communication hook), SyncBatchNorm (a collective inside the forward) and AMP's loss
    scaling (an optimizer state the clients would need every step) run on `fedsim run` and
    `fedsim ddp` only. The state that clients keep between rounds lives on their nodes for one
    Flower run, so such a run cannot be resumed (``resume``).
    """
    if strategy.local_training:
        algorithm = algorithm_of(strategy)
        if config.local_test_fraction is not None and algorithm.has_personal_models():
            return SettingError("{strategy} evaluates each client's own model, whose personal parts live on its "
                                "Flower node, where the server cannot evaluate them; with {local_test_fraction:name} "
                                "it runs in-process (`fedsim run`, `fedsim compare`)", strategy=config.strategy)
        if resume and algorithm.stateful_clients:
            return SettingError("{strategy} keeps each client's state on its Flower node for one Flower run, which a "
                                "resumed run would start without; rerun it from the start in a new folder",
                                strategy=config.strategy)
        return None
    refused = {"compression": config.compression != "none", "sync_bn": config.sync_bn, "amp": config.amp}
    for name, is_set in refused.items():
        if is_set:
            return SettingError("the Flower engine runs {strategy} with {setting:name} unset; {setting} runs on "
                                "`fedsim run` and `fedsim ddp`", fields={"setting": name}, strategy=config.strategy,
                                setting=getattr(config, name))
    return None


def registered_here(config, where: str) -> SettingError | None:
    """Return why a model or dataset registered in this process only cannot reach ``where``'s processes, or ``None``.

    A name registered from the user's own code (``register_model`` in a script or a notebook)
    exists in the process that ran the registration; torchrun's ranks and Flower's nodes import
    fedsim, not that code. The way to reach them is a reference, which every process imports.
    """
    from .data.load import dataset_factory
    from .models.factory import model_factory

    for name, factory_of in (("model", model_factory), ("dataset", dataset_factory)):
        value = getattr(config, name)
        if is_reference(value) or split_format(value):
            continue
        factory = factory_of(value)
        module = getattr(factory, "__module__", "") or ""
        if module != "fedsim" and not module.startswith("fedsim."):
            source = "path/to/your_file.py" if module == "__main__" else module
            return SettingError("{setting} is registered in this process only, and {where:text} runs in processes "
                                "that never import {module:text}; name it by reference instead: {reference}",
                                fields={"setting": name, "reference": name}, setting=value, where=where,
                                module=repr(module),
                                reference=f"{source}:{getattr(factory, '__qualname__', '...')}")
    return None


def trains_alone_refusal(config, where: str) -> SettingError | None:
    """Return why ``vectorize``=True cannot run on ``where``, whose processes train a client at a time, or ``None``."""
    if config.vectorize:
        return SettingError("{vectorize} trains a round's clients as cohorts in one process; {where:text} trains each "
                            "client alone in the process that serves it: leave {vectorize:name} out, or run it with "
                            "`fedsim run` or `fedsim compare`", vectorize=True, where=where)
    return None


def algorithm_of(strategy: Strategy):
    """Return the algorithm class of a local-training ``strategy`` (the algorithms import torch: imported here)."""
    from .algorithms import algorithm_class

    return algorithm_class(strategy.base)  # fedprox, fedadam and the like are fedavg's round


@dataclass(frozen=True)
class Cell:
    """One method on one engine: ``reason`` is why it does not run there, ``None`` where it does."""

    strategy: str
    engine: str
    reason: SettingError | None


def support_table(strategies=None) -> list[list[Cell]]:
    """Return, for each strategy (the built-ins by default), a row of `Cell` over `ENGINES`, from its class alone."""
    names = list_strategies() if strategies is None else list(strategies)
    rows = []
    for name in names:
        strategy = get_strategy(name)
        rows.append([Cell(name, engine, method_refusal(strategy, engine)) for engine in ENGINES])
    return rows


def format_support_table(rows: list[list[Cell]], wording=str) -> str:
    """Return ``rows`` (`support_table`) as a text table, each "no" numbered and its reason listed under it.

    ``wording`` words each reason (the command line names flags rather than fields).
    """
    reasons: dict[str, SettingError] = {}  # by their text: one note for the same reason of several cells
    lines = []
    for row in rows:
        cells = []
        for cell in row:
            if cell.reason is None:
                cells.append("yes")
                continue
            reasons.setdefault(str(cell.reason), cell.reason)
            cells.append(f"no ({list(reasons).index(str(cell.reason)) + 1})")
        lines.append([shown(row[0].strategy), *cells])
    header = ["strategy", *(engine.column for engine in ENGINES.values())]
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    text = ["  ".join(word.ljust(width) for word, width in zip(line, widths)).rstrip() for line in [header, *lines]]
    text.insert(1, "  ".join("-" * width for width in widths))
    notes = [f"({number}) {wording(reason)}" for number, reason in enumerate(reasons.values(), 1)]
    settings = ("Settings can refuse more where a method runs: a model or dataset registered in this process only "
                "(on fedsim ddp and Flower), cohorts on fedsim ddp and Flower, gradient compression, SyncBatchNorm "
                "or AMP with allreduce and reweighted on Flower, resuming the clients' states on Flower, and client-level "
                "DP with a method whose clients send more than their update (scaffold) or that weighs or "
                "combines clients its own way (fednova), and asynchronous rounds (--asynchronous) with a method whose "
                "server acts on a round's clients together (scaffold, fednova) or on an engine other than in-process. "
                "Each run checks its own before it starts.")
    return "\n".join([*text, "", *notes, "", settings])
