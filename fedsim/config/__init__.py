"""A run's settings: `RunConfig`, the strategies and partition schemes it names, and the files that hold settings.

``run_config`` defines `RunConfig` (every setting, checked; ``validation`` and ``combinations``
are its checks); ``strategies`` and ``partitioning`` are the registries its names come from, and
``strategy_settings`` what a strategy-specific setting means to them; ``files`` reads settings files and ``config.json`` into
it; ``comparison`` derives each strategy's config for ``fedsim compare``; ``keys`` spells keys.
The modules here import nothing of fedsim's above the config, and not torch.
"""

from .files import from_toml, read_settings
from .run_config import RunConfig

__all__ = ["RunConfig", "from_toml", "read_settings"]
