"""Check a command line of a page (the README, a tutorial) as far as its settings go, without running it: ``python -P THIS ddp --nproc 2 ...``.

The pages' DDP and Flower commands start processes for minutes; the tests of those engines
run the same settings. Here each such line is parsed by ``fedsim``'s own parser, and the config
it would train is built and checked by the checks its command makes before it starts anything.
"""

import sys

from fedsim.cli.commands import build_parser
from fedsim.cli.settings import config_from_args


def check(argv: list[str]) -> None:
    """Parse ``argv`` (``fedsim``'s arguments) and build and check the config its command would run."""
    args = build_parser().parse_args(argv)
    config = config_from_args(args)
    if args.command == "ddp":
        from fedsim.engines.distributed.launch import check_world_size

        check_world_size(config, args.nproc)
    elif args.command == "flower":
        from fedsim.engines.flower import check_flower_config

        check_flower_config(config, resume=args.resume)
    else:
        raise AssertionError(f"`fedsim {args.command}` runs as written; only DDP and Flower lines are parse-only")


if __name__ == "__main__":
    try:
        check(sys.argv[1:])
    except (ValueError, TypeError) as error:  # as `fedsim` words it: the flag at fault
        from fedsim.cli.flag_messages import flag_message

        sys.exit(f"fedsim: error: {flag_message(error)}")
