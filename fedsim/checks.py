"""Argument checks shared by the configs: the ones `partitions` raises with, so both layers word errors alike.

Every error or warning that names a setting is a `SettingError`, `SettingTypeError` or
`SettingWarning` (`partitions._errors`): its message is a template whose placeholders are the
settings, which the command line words as its flags.

`check_integer` takes NumPy integers (``np.int64(3)`` is a valid count) and refuses booleans;
`check_number` refuses NaN as a bad value. Each error names the parameter, the value and the
valid range.
"""

from partitions._checks import check_choice, check_integer, check_number
from partitions._errors import (NAMED_ALONE, SettingError, SettingPermissionError, SettingTypeError, SettingWarning,
                                Worded)

__all__ = ["NAMED_ALONE", "SettingError", "SettingPermissionError", "SettingTypeError", "SettingWarning", "Worded",
           "check_choice", "check_integer", "check_number"]
