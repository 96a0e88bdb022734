"""The partition settings the benchmarks compare: the ones NIID-Bench and McMahan et al. report on."""

STANDARD_SCHEMES = {
    "IID": {"partition": "iid"},
    "Dir(0.5)": {"partition": "dirichlet", "alpha": 0.5},
    "Dir(0.1)": {"partition": "dirichlet", "alpha": 0.1},
    "#C=2": {"partition": "pathological", "classes_per_partition": 2, "class_assignment_mode": "deterministic"},
    "shards": {"partition": "shards", "shards_per_partition": 2},
}

#: NIID-Bench's label, quantity and feature skews (Li et al., ICDE 2022), with IID and McMahan's shards.
#: #C=k gives partition i class i mod C first, then k - 1 others at random, as NIID-Bench does.
GRID_SCHEMES = {
    "IID": {"partition": "iid"},
    "Dir(1.0)": {"partition": "dirichlet", "alpha": 1.0},
    "Dir(0.5)": {"partition": "dirichlet", "alpha": 0.5},
    "Dir(0.1)": {"partition": "dirichlet", "alpha": 0.1},
    "#C=1": {"partition": "pathological", "classes_per_partition": 1},
    "#C=2": {"partition": "pathological", "classes_per_partition": 2},
    "#C=3": {"partition": "pathological", "classes_per_partition": 3},
    "shards": {"partition": "shards", "shards_per_partition": 2},
    "quantity Dir(0.5)": {"partition": "quantity", "alpha": 0.5},
    "noise 0.1": {"partition": "iid", "feature_noise": 0.1},
}


def slug(name: str) -> str:
    """Return a file-name form of a scheme's display name: ``Dir(0.1)`` -> ``dir-0.1``."""
    return (name.lower().replace("(", "-").replace(")", "").replace("#", "").replace("=", "")
            .replace(" ", "-"))
