"""Label-skew and quantity-skew partitions of a dataset, in pure numpy.

Import without any deep-learning framework: ``partitions`` needs numpy and scipy alone
(matplotlib only for `partitions.plot`, flwr-datasets only for `partitions.flwr`, the schemes as
flwr-datasets partitioners).
"""

from .balanced_dirichlet import balanced_dirichlet
from .dirichlet import dirichlet
from ._errors import SettingError, SettingPermissionError, SettingTypeError, SettingWarning
from .extended_dirichlet import extended_dirichlet
from .iid import iid
from .local_test import split_local_test
from .multilabel import multilabel_dirichlet
from .natural import natural
from .noise import feature_noise_levels
from .partition import Partition
from .pathological import pathological
from .quantity import quantity_skew
from .shards import shards

__all__ = [
    "Partition",
    "SettingError",
    "SettingPermissionError",
    "SettingTypeError",
    "SettingWarning",
    "balanced_dirichlet",
    "dirichlet",
    "extended_dirichlet",
    "feature_noise_levels",
    "iid",
    "multilabel_dirichlet",
    "natural",
    "pathological",
    "quantity_skew",
    "shards",
    "split_local_test",
]
