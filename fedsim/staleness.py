"""How much an asynchronous server weighs an update computed on an older model (Xie et al., FedAsync, 2019).

An update's staleness is the number of server steps taken since its client was sent the model.
FedBuff (Nguyen et al., AISTATS 2022) weighs it by 1 / sqrt(1 + staleness), FedAsync's
polynomial rule with a = 0.5; FedAsync's hinge rule keeps weight 1 up to b steps and then decays.

Examples
--------
>>> [round(Staleness.parse("polynomial:0.5")(s), 4) for s in (0, 1, 3)]
[1.0, 0.7071, 0.5]
>>> [Staleness.parse("hinge:1,2")(s) for s in (0, 2, 3, 5)]
[1.0, 1.0, 0.5, 0.25]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .checks import SettingError

#: The staleness functions and how each is written.
STALENESS_FORMS = {"constant": "constant", "polynomial": "polynomial:A", "hinge": "hinge:A,B"}


@dataclass(frozen=True)
class Staleness:
    """A staleness function s: 1 (``constant``), (1 + staleness)^-a (``polynomial:A``), or 1 up to b steps and
    1 / (a (staleness - b) + 1) beyond (``hinge:A,B``), each with a, b >= 0."""

    kind: str
    a: float = 0.0
    b: float = 0.0

    @classmethod
    def parse(cls, text) -> Staleness:
        """Return the function ``text`` writes; refuse anything else, naming the setting ``staleness``."""
        name, colon, rest = text.partition(":") if isinstance(text, str) else ("", "", "")
        arity = {"constant": 0, "polynomial": 1, "hinge": 2}.get(name)
        try:
            params = tuple(float(part) for part in rest.split(",")) if colon else ()
        except ValueError:
            params = None
        if arity is None or params is None or len(params) != arity or \
                not all(math.isfinite(p) and p >= 0 for p in params):
            raise SettingError("{staleness} must be one of {forms:text}, with A, B >= 0", staleness=text,
                               forms=", ".join(STALENESS_FORMS.values()))
        return cls(name, *params)

    def __call__(self, staleness: int) -> float:
        """Return the weight of an update ``staleness`` server steps old."""
        if self.kind == "polynomial":
            return (1.0 + staleness) ** -self.a
        if self.kind == "hinge" and staleness > self.b:
            return 1.0 / (self.a * (staleness - self.b) + 1.0)
        return 1.0
