"""The partition settings the benchmarks compare: the ones NIID-Bench and McMahan et al. report on."""

STANDARD_SCHEMES = {
    "IID": {"partition": "iid"},
    "Dir(0.5)": {"partition": "dirichlet", "alpha": 0.5},
    "Dir(0.1)": {"partition": "dirichlet", "alpha": 0.1},
    "#C=2": {"partition": "pathological", "classes_per_partition": 2, "class_assignment_mode": "deterministic"},
    "shards": {"partition": "shards", "shards_per_partition": 2},
}


def slug(name: str) -> str:
    """Return a file-name form of a scheme's display name: ``Dir(0.1)`` -> ``dir-0.1``."""
    return name.lower().replace("(", "-").replace(")", "").replace("#", "").replace("=", "")
