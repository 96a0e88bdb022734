"""fedsim: how a classifier behaves when its data is split unevenly, and which aggregation copes best.

Import what you need from the subpackages (`fedsim.data`, `fedsim.models`, `fedsim.tasks`,
`fedsim.client`, `fedsim.sampler`); importing `fedsim` itself stays cheap.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
