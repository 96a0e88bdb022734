"""Each bad input raises one error that names the parameter at fault."""

import numpy as np
import pytest

import partitions

LABELS = np.repeat(np.arange(10), 20)

CASES = [
    ("alpha zero", lambda: partitions.dirichlet(LABELS, 4, 0.0), ValueError, "`alpha`"),
    ("alpha negative", lambda: partitions.dirichlet(LABELS, 4, -0.5), ValueError, r"`alpha` must be .* > 0, got -0.5"),
    ("alpha NaN", lambda: partitions.dirichlet(LABELS, 4, float("nan")), ValueError,
     "`alpha` must be a finite number > 0, got nan"),
    ("alpha inf", lambda: partitions.dirichlet(LABELS, 4, float("inf")), ValueError, "`alpha`"),
    ("alpha vector length", lambda: partitions.dirichlet(LABELS, 4, [1.0, 2.0]), ValueError, "`alpha` has 2 values"),
    ("alpha string", lambda: partitions.dirichlet(LABELS, 4, "big"), TypeError, "`alpha`"),
    ("num_partitions zero", lambda: partitions.iid(LABELS, 0), ValueError, "`num_partitions`"),
    ("num_partitions negative", lambda: partitions.dirichlet(LABELS, -3, 1.0), ValueError, "`num_partitions`"),
    ("num_partitions > samples", lambda: partitions.shards(LABELS, 201), ValueError, "`num_partitions`.*200"),
    ("num_partitions float", lambda: partitions.iid(LABELS, 2.5), TypeError, "`num_partitions`"),
    ("k > classes", lambda: partitions.pathological(LABELS, 4, 12), ValueError,
     r"`num_classes_per_partition`=12 exceeds the 10 classes"),
    ("k zero", lambda: partitions.pathological(LABELS, 4, 0), ValueError, "`num_classes_per_partition`"),
    ("bad mode", lambda: partitions.pathological(LABELS, 4, 2, class_assignment_mode="cyclic"), ValueError,
     "`class_assignment_mode`"),
    ("unsatisfiable min size", lambda: partitions.dirichlet(LABELS, 10, 1.0, min_partition_size=21), ValueError,
     r"`min_partition_size`=21 is unsatisfiable.*<= 20"),
    ("negative min size", lambda: partitions.dirichlet(LABELS, 10, 1.0, min_partition_size=-1), ValueError,
     "`min_partition_size`"),
    ("max_tries zero", lambda: partitions.dirichlet(LABELS, 4, 1.0, max_tries=0), ValueError, "`max_tries`"),
    ("empty labels", lambda: partitions.dirichlet([], 2, 1.0), ValueError, "`labels` is empty"),
    ("empty count", lambda: partitions.iid([], 2), ValueError, "`labels_or_n` is empty"),
    ("non-integer labels", lambda: partitions.dirichlet([0.5, 1.0, 2.0], 2, 1.0), TypeError, "`labels`.*integer"),
    ("string labels", lambda: partitions.pathological(["a", "b"], 2, 1), TypeError, "`labels`"),
    ("negative labels", lambda: partitions.shards([-1, 0, 1, 2], 2), ValueError, "`labels` must be >= 0"),
    ("2-D labels", lambda: partitions.dirichlet(np.zeros((4, 2), int), 2, 1.0), ValueError, "multilabel_dirichlet"),
    ("shards too many", lambda: partitions.shards(LABELS, 200, 2), ValueError, "`shards_per_partition`"),
    ("negative seed", lambda: partitions.iid(LABELS, 2, seed=-1), ValueError, "`seed` must be >= 0, got -1"),
    ("float seed", lambda: partitions.iid(LABELS, 2, seed=1.5), TypeError, "`seed` must be an integer"),
    ("bool count", lambda: partitions.pathological(LABELS, 4, True), TypeError, "`num_classes_per_partition`"),
    ("quantity alpha", lambda: partitions.quantity_skew(100, 4, 0), ValueError, "`alpha`"),
    ("multilabel 1-D", lambda: partitions.multilabel_dirichlet([1, 0, 1], 2, 1.0), ValueError, "`label_matrix`"),
    ("noise partitions", lambda: partitions.feature_noise_levels(0, 0.1), ValueError, "`num_partitions`"),
    ("exdir alpha zero", lambda: partitions.extended_dirichlet(LABELS, 4, num_classes_per_partition=2, alpha=0),
     ValueError, "`alpha` must be a finite number > 0, got 0"),
    ("exdir alpha vector length", lambda: partitions.extended_dirichlet(LABELS, 4, num_classes_per_partition=2,
                                                                        alpha=[1, 2]), ValueError, "`alpha` has 2"),
    ("exdir k > classes", lambda: partitions.extended_dirichlet(LABELS, 4, num_classes_per_partition=11, alpha=1),
     ValueError, r"`num_classes_per_partition`=11 exceeds the 10 classes"),
    ("exdir k float", lambda: partitions.extended_dirichlet(LABELS, 4, num_classes_per_partition=1.5, alpha=1),
     TypeError, "`num_classes_per_partition`"),
    ("exdir bad mode", lambda: partitions.extended_dirichlet(LABELS, 4, num_classes_per_partition=2, alpha=1,
                                                             class_assignment_mode="cyclic"), ValueError,
     "`class_assignment_mode`"),
    ("exdir unsatisfiable min size", lambda: partitions.extended_dirichlet(
        LABELS, 10, num_classes_per_partition=2, alpha=1, min_partition_size=21), ValueError,
     r"`min_partition_size`=21 is unsatisfiable"),
    ("exdir min size not reached", lambda: partitions.extended_dirichlet(
        LABELS, 10, num_classes_per_partition=2, alpha=0.01, min_partition_size=20, max_tries=3, seed=0), ValueError,
     r"`min_partition_size`=20 .* `max_tries`=3 .* a larger `num_classes_per_partition`"),
    ("exdir max_tries zero", lambda: partitions.extended_dirichlet(LABELS, 4, num_classes_per_partition=2, alpha=1,
                                                                   max_tries=0), ValueError, "`max_tries`"),
    ("exdir class too small", lambda: partitions.extended_dirichlet(
        np.repeat(np.arange(2), [1, 99]), 4, num_classes_per_partition=2, alpha=1, min_partition_size=0), ValueError,
     r"class 0 has 1 samples but 4 partitions hold it.*`num_partitions`"),
    ("exdir negative seed", lambda: partitions.extended_dirichlet(LABELS, 4, num_classes_per_partition=2, alpha=1,
                                                                  seed=-1), ValueError, "`seed`"),
    ("balanced alpha negative", lambda: partitions.balanced_dirichlet(LABELS, 4, alpha=-1), ValueError,
     "`alpha` must be a finite number > 0, got -1"),
    ("balanced alpha NaN", lambda: partitions.balanced_dirichlet(LABELS, 4, alpha=float("nan")), ValueError,
     "`alpha`"),
    ("balanced alpha vector length", lambda: partitions.balanced_dirichlet(LABELS, 4, alpha=[1.0] * 3), ValueError,
     "`alpha` has 3 values but there are 10 classes"),
    ("balanced num_partitions > samples", lambda: partitions.balanced_dirichlet(LABELS, 201, alpha=1), ValueError,
     "`num_partitions`.*200"),
    ("balanced 2-D labels", lambda: partitions.balanced_dirichlet(np.zeros((4, 2), int), 2, alpha=1), ValueError,
     "multilabel_dirichlet"),
    ("balanced float seed", lambda: partitions.balanced_dirichlet(LABELS, 2, alpha=1, seed=0.5), TypeError, "`seed`"),
]


@pytest.mark.parametrize("call, error, match", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_input_names_the_parameter(call, error, match):
    with pytest.raises(error, match=match):
        call()
