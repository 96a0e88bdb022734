"""Argument checks shared by the configs: the ones `partitions` raises with, so both layers word errors alike.

`check_integer` takes NumPy integers (``np.int64(3)`` is a valid count) and refuses booleans;
`check_number` refuses NaN as a bad value. Each error names the parameter, the value and the
valid range.
"""

from partitions._checks import check_choice, check_integer, check_number

__all__ = ["check_choice", "check_integer", "check_number"]
