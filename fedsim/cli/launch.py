"""The commands that start processes: ``fedsim ddp`` (torchrun's ranks) and ``fedsim flower`` (its subcommands).

Each checks every setting, the data and the model in this process first, so that a bad input is
one error line before any process starts; then it starts the processes, and stops them all
however it ends.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from .settings import config_from_args, prepare, report
from .flags import OneLineParser, add_training_command, add_verbose_flag
from ..interrupts import STOP_SIGNALS, RunFailed, checkpoint_place, exit_status, stopped_by

#: The longest ``--timeout``: a week, in seconds.
MAX_TIMEOUT_S = 7 * 24 * 3600


class LaunchInterrupted(Exception):
    """A signal stopped the processes a launcher started (``fedsim ddp --nproc``'s ranks, a deployed federation).

    Parameters
    ----------
    out : str or Path
        The run's folder; ``checkpoint_round`` is the round its checkpoint holds, ``None`` when
        none was written (then no resume is advised).
    signum : int
        The signal: Ctrl-C's SIGINT, or SIGTERM.
    """

    def __init__(self, out, signum: int = signal.SIGINT):
        from ..results.outcome import saved_round

        self.signum = int(signum)
        self.checkpoint_round = saved_round(out)
        super().__init__(f"{stopped_by(signum)}; {checkpoint_place(Path(out), self.checkpoint_round)}")


def command_ddp(args) -> None:
    """Run one strategy on real DDP: as a rank under torchrun, or start torchrun with ``--nproc`` ranks."""
    config = config_from_args(args)  # before importing torch, so that a bad setting fails at once
    from ..engines.distributed import launch, run, under_torchrun
    from ..engines.distributed.launch import check_world_size
    from ..results.folder import RunFolder
    from ..results.outcome import diverged_run, resume_hint

    check_timeout(args.timeout)
    if not under_torchrun():
        if args.nproc is None:
            raise ValueError("`--nproc` is needed outside torchrun: give the number of processes (e.g. --nproc 2), "
                             "or start the ranks with torchrun --nproc_per_node=N -m fedsim ddp ...")
        check_world_size(config, args.nproc)
        RunFolder(args.out).check(resume=args.resume, config=config)
        prepare(config)  # every setting fails here, in one line, rather than once per rank
        status = launch(args.nproc, rank_arguments(args.argv))
        signals = {exit_status(number): number for number in STOP_SIGNALS}
        if status in signals:
            raise LaunchInterrupted(args.out, signals[status])
        if status != 0 and (diverged := diverged_run(args.out, config)) is not None:
            raise diverged
        if status != 0:
            raise RunFailed("torchrun exited with status {status:text}: a rank failed (torchrun's report above "
                            "names it){advice:text}", status=status, advice=resume_hint(args.out))
        return
    world_size, leader = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"]) == 0
    if args.nproc is not None and args.nproc != world_size:
        raise ValueError(f"`--nproc` {args.nproc} differs from torchrun's world size {world_size}; leave it out "
                         "under torchrun")
    check_world_size(config, world_size)
    if leader:
        from ..config.strategies import get_strategy

        print(get_strategy(config.strategy).describe(config), flush=True)
    result = run(config, args.out, resume=args.resume, quiet=args.quiet, timeout_s=args.timeout)
    if leader:
        report(config, result, args.out)


def rank_arguments(argv: list[str]) -> list[str]:
    """Return ``fedsim ddp``'s arguments for the ranks: the same, less ``--nproc``.

    Examples
    --------
    >>> rank_arguments(["ddp", "--nproc", "2", "--out", "r", "--nproc=2"])
    ['--out', 'r']
    """
    words = list(argv[argv.index("ddp") + 1 :])
    kept = []
    while words:
        word = words.pop(0)
        if word == "--nproc":
            words.pop(0)
        elif not word.startswith("--nproc="):
            kept.append(word)
    return kept


def command_flower_simulate(args) -> None:
    """Run one strategy as a Flower app on Flower's simulation runtime, one virtual SuperNode per partition."""
    config = config_from_args(args)  # before importing torch, so that a bad setting fails at once
    from ..engines.flower import check_flower_config, simulate
    from ..results.folder import RunFolder
    from ..config.strategies import get_strategy

    check_flower_config(config, resume=args.resume)
    check_timeout(args.timeout)
    RunFolder(args.out).check(resume=args.resume, config=config)
    prepare(config)
    print(get_strategy(config.strategy).describe(config), flush=True)
    result = simulate(config, args.out, resume=args.resume, quiet=args.quiet, verbose=args.verbose,
                      timeout_s=args.timeout)
    report(config, result, args.out)


def command_flower_deploy(args) -> None:
    """Run one strategy as a Flower app on a real SuperLink and one SuperNode per partition, all on 127.0.0.1."""
    config = config_from_args(args)  # before importing torch, so that a bad setting fails at once
    from ..engines.flower import check_flower_config
    from ..engines.flower.certificates import Certificates
    from ..engines.flower.federation import LocalFederation, check_authentication, check_port_free
    from ..engines.flower.launch import run_app
    from ..results.folder import RunFolder
    from ..config.strategies import get_strategy

    check_flower_config(config, resume=args.resume, deployment=True)
    check_timeout(args.timeout)
    supernodes = config.num_partitions if args.num_supernodes is None else args.num_supernodes
    if supernodes != config.num_partitions:
        raise ValueError(f"`--num-supernodes` {supernodes} must equal `--num-partitions` {config.num_partitions}: "
                         "each SuperNode serves one partition")
    if args.superlink_port is not None:
        check_port_free(args.superlink_port, "--superlink-port")
    check_authentication(args.auth, bool(args.tls))
    certificates = Certificates.in_folder(args.tls) if args.tls else None
    out = Path(args.out).resolve()  # the ServerApp runs in another process and folder
    RunFolder(out).check(resume=args.resume, config=config)
    prepare(config)
    print(get_strategy(config.strategy).describe(config), flush=True)

    def started(federation):
        registered = " (keys registered)" if args.auth else ""
        print(f"SuperLink on 127.0.0.1:{federation.superlink_port}, {supernodes} SuperNodes{registered}", flush=True)

    federation = LocalFederation(supernodes, superlink_port=args.superlink_port, certificates=certificates,
                                 authenticate=args.auth)
    result = run_app(federation, config, out, resume=args.resume, timeout_s=args.timeout, quiet=args.quiet,
                     verbose=args.verbose, started=started)
    report(config, result, out)


def command_flower_certs(args) -> None:
    """Write a certificate authority and a server certificate for `fedsim flower deploy --tls`."""
    from ..engines.flower.certificates import write_certificates

    certificates = write_certificates(args.folder, args.host, days=args.days, force=args.force)
    print(f"wrote {certificates.ca}, {certificates.certificate} and {certificates.key} (keep the key private); "
          f"use: fedsim flower deploy --tls {args.folder} ...")


def command_flower_node_key(args) -> None:
    """Write a SuperNode's key pair for a SuperLink that authenticates its SuperNodes."""
    from ..engines.flower.certificates import write_node_key

    key = write_node_key(args.folder, args.name, force=args.force)
    print(f"wrote {key.private} (keep it on the SuperNode) and {key.public}; on the SuperLink's side: "
          f"flwr supernode register {key.public} <connection>; on the node: "
          f"flower-supernode --auth-supernode-private-key {key.private} ...")


def check_timeout(seconds: float) -> None:
    """Refuse a ``--timeout`` outside (0, one week]."""
    if not 0 < seconds <= MAX_TIMEOUT_S:  # also refuses nan and inf
        raise ValueError(f"`--timeout` must be a number of seconds in (0, {MAX_TIMEOUT_S}], got {seconds}")


def add_launch_commands(commands) -> None:
    """Add ``ddp`` and ``flower`` (``simulate``, ``deploy``, ``certs``, ``node-key``) to the ``fedsim`` subcommands."""
    ddp = add_training_command(commands, "ddp", "train one strategy on real DDP, one process per rank",
                                command_ddp)
    ddp.add_argument("--nproc", type=int, default=None, help="start torchrun with this many processes on "
                     "127.0.0.1 (leave out when torchrun starts fedsim ddp itself)")
    ddp.add_argument("--timeout", type=float, default=600.0, help="seconds a rank waits for the others in a "
                     "collective before it fails (default 600)")

    flower = commands.add_parser("flower", help="run a strategy as a Flower app: simulate, deploy, certs, node-key")
    flower_commands = flower.add_subparsers(dest="flower_command", required=True, parser_class=OneLineParser)
    simulate = add_training_command(flower_commands, "simulate", "run on Flower's simulation engine (Ray), one "
                                     "virtual SuperNode per partition", command_flower_simulate)
    deploy = add_training_command(flower_commands, "deploy", "run on a real SuperLink and one SuperNode per "
                                   "partition, all on 127.0.0.1", command_flower_deploy)
    deploy.add_argument("--num-supernodes", type=int, default=None, help="SuperNodes to start, one per partition "
                        "(default: --num-partitions)")
    deploy.add_argument("--superlink-port", type=int, default=None, help="the SuperLink's port on 127.0.0.1 "
                        "(default: a free one)")
    deploy.add_argument("--tls", default=None, help="serve TLS with the certificates `fedsim flower certs` wrote "
                        "to this folder (default: plain connections on the loopback interface)")
    deploy.add_argument("--auth", action="store_true", help="SuperNode authentication: the SuperLink admits only "
                        "the SuperNodes whose new keys it registered (needs --tls)")
    for command in (simulate, deploy):
        command.add_argument("--timeout", type=float, default=600.0, help="seconds the server waits for the nodes, "
                             "and for a round's replies (default 600)")
        add_verbose_flag(command)
    certs = flower_commands.add_parser("certs", help="write a certificate authority and a server certificate "
                                       "for --tls")
    certs.add_argument("folder", help="where to write ca.crt, server.pem and server.key")
    certs.add_argument("--host", action="append", default=[], help="a name or address the SuperLink is reached "
                       "by, beside 127.0.0.1 and localhost (repeat for several)")
    certs.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    certs.add_argument("--force", action="store_true", help="replace certificates already in the folder")
    certs.set_defaults(handler=command_flower_certs)
    node_key = flower_commands.add_parser("node-key", help="write a SuperNode's key pair for a SuperLink started "
                                          "with --enable-supernode-auth")
    node_key.add_argument("folder", help="where to write NAME.key (private) and NAME.pub")
    node_key.add_argument("--name", default="supernode", help="the files' name (default supernode)")
    node_key.add_argument("--force", action="store_true", help="replace a key pair already in the folder")
    node_key.set_defaults(handler=command_flower_node_key)
