"""Client-level DP's round (DP-FedAvg) against its rules worked by hand, in float64, and what a DP run records.

The rules, each a test that a wrong rule fails: one flat clip over every tensor, Gaussian noise of
standard deviation z C on the sum drawn from the run's seed and round, a fixed denominator qN
whatever the number of clients that came, weights alike, then the server step; adaptive clipping's
geometric update on a noised count; Poisson sampling's counts.
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from fedsim.build import RunSetup
from fedsim.client import get_state
from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.privacy.mechanism import ClientPrivacy
from fedsim.privacy.plan import PrivacyPlan, client_sampling
from fedsim.results.folder import read_rows
from fedsim.schedule import sample_clients
from fedsim.seeding import Stream, torch_generator

from .numerics import EXACT, assert_rows_close
from .test_algorithms import FULL_BATCH
from .test_user_algorithms import trained_models

pytest.importorskip("dp_accounting")

# 4 clients, each taking part with chance 1/2 (rounds of 1, 3 and 2 clients under seed 0, where qN = 2),
# a server step of 0.7 and FedAvgM's momentum: a rule that divides by the clients that came, clips tensor
# by tensor, or draws other noise lands elsewhere
POISSON = {**FULL_BATCH, "num_partitions": 4, "fraction": 0.5, "client_sampling": "poisson", "rounds": 3,
           "server_lr": 0.7, "server_momentum": 0.5}


def flat_norm(tensors) -> float:
    return float(torch.sqrt(sum((t.double() ** 2).sum() for t in tensors)))


def dp_fedavg_by_hand(config, clip: float, noise: float) -> list[torch.Tensor]:
    """The global model after ``config.rounds`` rounds of DP-FedAvg, every rule written out.

    x <- x - lr_s * v,  v = momentum * v - (sum_k clip_C(y_k - x) + z C xi_r) / (q N),  xi_r ~ N(0, I) drawn from
    (seed, DP_NOISE, r) tensor by tensor.
    """
    setup = RunSetup.build(config)
    x = get_state(setup.model)
    velocity = None
    expected = config.fraction * config.num_partitions
    for round_index in range(config.rounds):
        clients = sample_clients(config.num_partitions, config.fraction, config.seed, round_index,
                                 poisson=True).tolist()
        total = [torch.zeros_like(xi) for xi in x]
        for y in trained_models(setup, x, clients):
            delta = [yi - xi for yi, xi in zip(y, x)]
            factor = min(1.0, clip / flat_norm(delta))
            total = [ti + factor * di for ti, di in zip(total, delta)]
        generator = torch_generator(config.seed, Stream.DP_NOISE, round_index)
        total = [ti + noise * clip * torch.randn(ti.shape, generator=generator, dtype=ti.dtype) for ti in total]
        gradient = [-ti / expected for ti in total]
        velocity = gradient if velocity is None else [config.server_momentum * v + g
                                                      for v, g in zip(velocity, gradient)]
        x = [xi - config.server_lr * v for xi, v in zip(x, velocity)]
    return x


def client_update_norms(config) -> list[float]:
    """The norms of round 0's updates (which the clip is chosen between)."""
    setup = RunSetup.build(config)
    x = get_state(setup.model)
    clients = sample_clients(config.num_partitions, config.fraction, config.seed, 0, poisson=True).tolist()
    return sorted(flat_norm([yi - xi for yi, xi in zip(y, x)]) for y in trained_models(setup, x, clients))


def test_the_poisson_rounds_of_the_hand_worked_case_vary_in_size():
    counts = [len(sample_clients(4, 0.5, 0, r, poisson=True)) for r in range(3)]
    assert counts != [2, 2, 2] and len(set(counts)) > 1  # so a denominator of the clients that came differs from qN


@pytest.mark.numerics
@pytest.mark.parametrize("noise", [0.0, 0.8])
def test_a_dp_round_clips_flat_adds_the_rounds_noise_and_divides_by_the_expected_clients(noise):
    config = RunConfig(**POISSON, dp_clip=1.0, dp_noise=noise)
    # a clip between round 0's update norms: some updates are clipped and some are not
    norms = client_update_norms(config)
    clip = (norms[0] + norms[-1]) / 2 if len(norms) > 1 else norms[0] / 2
    config = config.replace(dp_clip=clip)
    torch.testing.assert_close(run(config).global_state, dp_fedavg_by_hand(config, clip, noise), **EXACT)


def test_the_clip_takes_every_tensor_as_one_vector_below_at_and_above_the_clip():
    """Three clients whose updates' norms are 0.5, 1 (= C) and 2 over two tensors; z = 0, qN = 3."""
    global_state = [torch.ones(2, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)]
    config = RunConfig(num_partitions=3, fraction=1.0, dp_clip=1.0, dp_noise=0.0, dtype="float64")
    privacy = ClientPrivacy(PrivacyPlan.for_config(config, config.num_partitions), global_state, seed=0)
    # each update: (3, 4) split over the tensors, scaled to its norm
    unit = [torch.tensor([0.6, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.8, 0.0], dtype=torch.float64)]
    updates = [[tensor * scale for tensor in unit] for scale in (0.5, 1.0, 2.0)]
    total = [torch.zeros_like(t) for t in global_state]
    privacy.begin_round()
    norms = [privacy.add_update(total, [g + u for g, u in zip(global_state, update)]) for update in updates]
    assert norms == pytest.approx([0.5, 1.0, 2.0], rel=1e-15)
    assert float(privacy.count) == pytest.approx(0.5 + 0.5 - 0.5)  # two at or below C, each bit less 1/2
    # by hand: 0.5 u + 1 u + (1 / 2) 2 u = 2.5 u, u the unit update (0.6, 0 | 0, 0.8, 0)
    torch.testing.assert_close(total, [torch.tensor([1.5, 0.0], dtype=torch.float64),
                                       torch.tensor([0.0, 2.0, 0.0], dtype=torch.float64)], **EXACT)
    privacy.release(total, round_index=0)
    # divided by qN = 3, the global model added back: the combination the server step takes
    torch.testing.assert_close(total, [torch.tensor([1.5, 1.0], dtype=torch.float64),
                                       torch.tensor([0.0, 2.0 / 3, 0.0], dtype=torch.float64)], **EXACT)


def test_the_noise_has_standard_deviation_z_c_over_qn_per_coordinate():
    """Zero updates over 40 rounds of a 2,500-coordinate model: the released mean is the noise over qN alone.

    (n - 1) s^2 / sigma^2 is chi-square with n - 1 degrees of freedom; the bounds hold with chance 1 - 1e-6.
    """
    z, clip, clients, fraction = 1.3, 0.7, 50, 0.2
    config = RunConfig(num_partitions=clients, fraction=fraction, client_sampling="poisson", dp_clip=clip,
                       dp_noise=z, dtype="float64")
    global_state = [torch.zeros(50, 40, dtype=torch.float64), torch.zeros(500, dtype=torch.float64)]
    privacy = ClientPrivacy(PrivacyPlan.for_config(config, config.num_partitions), global_state, seed=3)
    released = []
    for round_index in range(40):
        total = [torch.zeros_like(t) for t in global_state]
        privacy.release(total, round_index)
        released.append(torch.cat([t.reshape(-1) for t in total]))
    values = torch.cat(released)
    n, sigma = values.numel(), z * clip / (fraction * clients)
    statistic = (n - 1) * float(values.var()) / sigma**2
    low, high = stats.chi2.ppf([0.5e-6, 1 - 0.5e-6], n - 1)
    assert low < statistic < high, (statistic / (n - 1), low / (n - 1), high / (n - 1))
    assert abs(float(values.mean())) < 5 * sigma / math.sqrt(n)
    assert not torch.equal(released[0], released[1])  # each round its own draw


@pytest.mark.numerics
def test_with_no_noise_and_no_clipping_dp_fedavg_is_fedavg_with_weights_alike():
    config = RunConfig(**{**FULL_BATCH, "num_partitions": 4, "fraction": 0.5, "server_lr": 0.7})
    private = run(config.replace(dp_clip=1e6, dp_noise=0.0)).global_state
    torch.testing.assert_close(private, run(config.replace(weights="equal")).global_state, **EXACT)


def test_poisson_sampling_takes_qn_clients_a_round_on_average_with_binomial_variance():
    clients, fraction, rounds = 100, 0.1, 4000
    counts = np.array([len(sample_clients(clients, fraction, 7, r, poisson=True)) for r in range(rounds)])
    mean, variance = clients * fraction, clients * fraction * (1 - fraction)
    assert abs(counts.mean() - mean) < 5 * math.sqrt(variance / rounds)
    # the sample variance of a binomial count: relative standard error about sqrt(2 / rounds)
    assert abs(counts.var(ddof=1) / variance - 1) < 5 * math.sqrt(2 / rounds)
    assert (counts == 0).sum() == 0 or clients * fraction < 5


def test_adaptive_clipping_follows_the_geometric_update_on_the_noised_count():
    """Three rounds of known update norms; the count's noise is drawn after the update's, from the round's stream."""
    gamma, lr, sigma_b, z = 0.5, 0.2, 2.0, 0.9
    config = RunConfig(num_partitions=10, fraction=0.4, client_sampling="poisson", dp_clip=1.0, dp_noise=z,
                       dp_adaptive_quantile=gamma, dp_clip_lr=lr, dp_count_noise=sigma_b, dtype="float64")
    plan = PrivacyPlan.for_config(config, config.num_partitions)
    assert plan.update_noise == pytest.approx((z**-2 - (2 * sigma_b) ** -2) ** -0.5, rel=1e-15)
    global_state = [torch.zeros(4, dtype=torch.float64)]
    privacy = ClientPrivacy(plan, global_state, seed=5)
    clip, expected = 1.0, 4.0  # qN
    for round_index, norms in enumerate([[0.3, 0.5, 2.0], [0.1, 0.2, 0.4, 0.6, 3.0], [5.0]]):
        privacy.begin_round()
        total = [torch.zeros(4, dtype=torch.float64)]
        for norm in norms:
            privacy.add_update(total, [torch.tensor([norm, 0.0, 0.0, 0.0], dtype=torch.float64)])
        privacy.release(total, round_index)
        generator = torch_generator(5, Stream.DP_NOISE, round_index)
        torch.randn(4, generator=generator, dtype=torch.float64)  # the update's noise comes first
        count_noise = float(torch.randn((), generator=generator, dtype=torch.float64)) * sigma_b
        shifted = sum((1.0 if norm <= clip else 0.0) - 0.5 for norm in norms)
        unclipped = min(1.0, max(0.0, (shifted + count_noise) / expected + 0.5))
        clip = clip * math.exp(-lr * (unclipped - gamma))
        assert privacy.clip == pytest.approx(clip, rel=1e-12), round_index


def test_an_adaptive_clip_whose_noise_leaves_none_for_the_update_is_refused():
    config = RunConfig(num_partitions=10, fraction=0.5, dp_clip=1.0, dp_noise=1.0, dp_adaptive_quantile=0.5)
    with pytest.raises(ValueError, match=r"`dp_noise`=1.0 leaves no noise for the update .* below twice "
                                         r"`dp_count_noise` \(0.5\)"):
        PrivacyPlan.for_config(config, config.num_partitions)


def test_a_round_without_clients_still_releases_the_noise_under_dp_and_keeps_the_model_without():
    empty = next(r for r in range(20) if len(sample_clients(4, 0.25, 0, r, poisson=True)) == 0)
    base = {**FULL_BATCH, "num_partitions": 4, "fraction": 0.25, "client_sampling": "poisson", "rounds": empty + 1}
    before = run(RunConfig(**{**base, "rounds": empty})).global_state
    torch.testing.assert_close(run(RunConfig(**base)).global_state, before, rtol=0, atol=0)
    private = RunConfig(**base, dp_clip=1.0, dp_noise=0.5)
    before, after = run(private.replace(rounds=empty)), run(private)
    generator = torch_generator(0, Stream.DP_NOISE, empty)
    expected = [x + 0.5 * torch.randn(x.shape, generator=generator, dtype=x.dtype) / 1.0 for x in before.global_state]
    torch.testing.assert_close(after.global_state, expected, **EXACT)
    assert after.rows[-1]["clients"] == 0 and after.rows[-1]["epsilon"] > before.rows[-1]["epsilon"]


def test_the_accountant_is_told_the_sampling_of_the_training_clients():
    fixed = client_sampling(RunConfig(num_partitions=10, fraction=0.25, dp_clip=1.0, dp_noise=1.0), 10)
    assert (fixed.kind, fixed.num_clients, fixed.per_round) == ("fixed", 10, 2)  # round(2.5) clients a round
    assert fixed.per_round == len(sample_clients(10, 0.25, 0, 0))
    # 2 of 10 clients held out: the rounds sample the other 8, each with chance 1/2
    config = RunConfig(**{**FULL_BATCH, "num_partitions": 10, "alpha": 5.0}, fraction=0.5, holdout_clients=0.2,
                       local_test_fraction=0.2, client_sampling="poisson", dp_clip=1.0, dp_noise=1.0)
    held = run(config.replace(rounds=1)).summary
    assert (held["dp_sampling"], held["dp_population"], held["dp_sampling_rate"]) == ("poisson", 8, 0.5)


@pytest.mark.numerics
def test_a_resumed_dp_run_spends_the_epsilon_of_an_unbroken_one(tmp_path):
    config = RunConfig(**POISSON, dp_clip=0.5, dp_noise=0.8, dp_adaptive_quantile=0.5, dp_count_noise=1.0)
    unbroken = run(config, tmp_path / "unbroken")
    run(config.replace(rounds=1), tmp_path / "broken")
    resumed = run(config, tmp_path / "broken", resume=True)
    torch.testing.assert_close(resumed.global_state, unbroken.global_state, **EXACT)
    assert_rows_close(*(read_rows(tmp_path / name / "metrics.csv") for name in ("broken", "unbroken")))
    assert [row["epsilon"] for row in resumed.rows] == [row["epsilon"] for row in unbroken.rows]
    epsilons = [row["epsilon"] for row in unbroken.rows]
    assert epsilons == sorted(epsilons) and len(set(epsilons)) == len(epsilons)  # it grows every round
    clips = [row["dp_clip"] for row in unbroken.rows]
    assert clips[0] == 0.5 and len(set(clips)) == len(clips)  # the adaptive clip moves
    summary = resumed.summary
    assert summary["dp_epsilon"] == epsilons[-1] and summary["dp_rounds"] == config.rounds
    assert (summary["dp_sampling"], summary["dp_sampling_rate"], summary["dp_population"]) == ("poisson", 0.5, 4)


def test_a_target_epsilon_sets_the_noise_the_run_spends_it_with():
    config = RunConfig(**{**POISSON, "rounds": 2}, dp_clip=1.0, dp_target_epsilon=4.0)
    result = run(config)
    assert result.summary["dp_epsilon"] == pytest.approx(4.0, abs=1e-3)
    assert result.summary["dp_noise_multiplier"] > 0


@pytest.mark.parametrize("settings, message", [
    ({"strategy": "scaffold"}, r"`strategy`='scaffold''s clients send more than their update \(its round sums: "
                               r"control_sum\)"),
    ({"strategy": "fednova"}, r"`strategy`='fednova' weighs each client's model by its own rule"),
])
def test_methods_whose_clients_dp_cannot_bound_are_refused_with_the_reason(settings, message):
    config = RunConfig(**{**FULL_BATCH, **settings}, dp_clip=1.0, dp_noise=1.0)
    with pytest.raises(ValueError, match=message):
        run(config)


def test_a_user_method_that_combines_other_than_by_a_sum_is_refused():
    from .test_user_algorithms import MEDIAN

    config = RunConfig(**{**FULL_BATCH, "strategy": MEDIAN}, dp_clip=1.0, dp_noise=1.0)
    with pytest.raises(ValueError, match=r"combines the round's models other than by a sum"):
        run(config)


@pytest.mark.parametrize("settings, message", [
    ({"strategy": "allreduce", "dp_clip": 1.0}, r"privacy unit would be a sample: DP-SGD"),
    ({"dp_clip": 1.0, "dp_noise": 1.0, "weights": "size"}, r"`weights`='size' weighs clients unalike"),
    ({"dp_clip": 1.0}, r"`dp_clip`=1.0 needs a noise multiplier"),
    ({"dp_clip": 1.0, "dp_noise": 1.0, "dp_target_epsilon": 3.0}, r"both set the noise multiplier"),
    ({"dp_noise": 1.0}, r"`dp_noise`=1.0 does nothing without `dp_clip`"),
    ({"dp_clip": 1.0, "dp_noise": 1.0, "dp_clip_lr": 0.5}, r"does nothing without `dp_adaptive_quantile`"),
    ({"dp_clip": 1.0, "dp_noise": 1.0, "dp_accountant": "pld"}, r"`dp_accountant`='pld' cannot account "
                                                                 r"`client_sampling`='fixed'"),
    ({"dp_clip": 0.0, "dp_noise": 1.0}, r"`dp_clip` must be a finite number > 0, got 0.0"),
    ({"dp_clip": 1.0, "dp_noise": 1.0, "dp_delta": 1.0}, r"`dp_delta` must be in \(0.0, 1.0\), got 1.0"),
    ({"client_sampling": "uniform"}, r"`client_sampling`"),
])
def test_dp_settings_that_contradict_each_other_are_refused_by_name(settings, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**settings)


@pytest.mark.numerics
def test_workers_add_up_the_clipped_updates_and_the_count_as_one_process_does():
    config = RunConfig(**{**POISSON, "vectorize": False}, dp_clip=0.5, dp_noise=0.8, dp_adaptive_quantile=0.5,
                       dp_count_noise=1.0)
    alone, shared = run(config), run(config, workers=2)
    torch.testing.assert_close(shared.global_state, alone.global_state, **EXACT)
    assert [row["dp_clip"] for row in shared.rows] == pytest.approx([row["dp_clip"] for row in alone.rows], rel=1e-12)
