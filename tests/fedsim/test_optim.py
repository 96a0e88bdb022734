"""fedsim's SGD against torch.optim.SGD: the same steps, the same state dict, and no torch._dynamo import."""

import subprocess
import sys

import pytest
import torch

from fedsim.client.optim import SGD, OptimizerConfig

SETTINGS = [
    {"momentum": 0.0, "weight_decay": 0.0},
    {"momentum": 0.9, "weight_decay": 0.0},
    {"momentum": 0.5, "weight_decay": 0.01},
    {"momentum": 0.9, "weight_decay": 0.01, "nesterov": True},
]


def params_and_gradients(steps: int, dtype=torch.float64):
    generator = torch.Generator().manual_seed(0)
    params = [torch.randn(shape, generator=generator, dtype=dtype) for shape in [(4, 3), (3,), (2, 2, 2)]]
    gradients = [[torch.randn(p.shape, generator=generator, dtype=dtype) for p in params] for _ in range(steps)]
    return params, gradients


def run_steps(optimizer, params, gradients) -> None:
    for step_gradients in gradients:
        for param, gradient in zip(params, step_gradients):
            param.grad = gradient.clone()
        optimizer.step()


@pytest.mark.numerics
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("settings", SETTINGS)
def test_sgd_steps_as_torch_sgd_does(settings, dtype):
    # the same elementwise operations in the same order: equal to the last bit on any CPU
    params, gradients = params_and_gradients(4, dtype)
    ours, theirs = [p.clone() for p in params], [p.clone() for p in params]
    run_steps(SGD(ours, lr=0.1, **settings), ours, gradients)
    run_steps(torch.optim.SGD(theirs, lr=0.1, **settings), theirs, gradients)
    for mine, reference in zip(ours, theirs):
        assert torch.equal(mine, reference)


@pytest.mark.parametrize("settings", SETTINGS[1:])
def test_a_state_dict_moves_between_sgd_and_torch_sgd_either_way(settings):
    params, gradients = params_and_gradients(4)
    straight = [p.clone() for p in params]
    run_steps(torch.optim.SGD(straight, lr=0.1, **settings), straight, gradients)
    for first, second in [(torch.optim.SGD, SGD), (SGD, torch.optim.SGD)]:
        before = [p.clone() for p in params]
        optimizer = first(before, lr=0.1, **settings)
        run_steps(optimizer, before, gradients[:2])
        after = [p.clone() for p in before]
        resumed = second(after, lr=0.1, **settings)
        resumed.load_state_dict(optimizer.state_dict())
        run_steps(resumed, after, gradients[2:])
        for mine, reference in zip(after, straight):
            assert torch.equal(mine, reference), (first.__module__, second.__module__)


def test_loaded_state_is_a_copy_on_the_parameters_dtype():
    params, gradients = params_and_gradients(1)
    source = SGD(params, lr=0.1, momentum=0.9)
    run_steps(source, params, gradients)
    target_params = [p.float() for p in params]
    target = SGD(target_params, lr=0.1, momentum=0.9)
    target.load_state_dict(source.state_dict())
    loaded = target.state[target_params[0]]["momentum_buffer"]
    assert loaded.dtype == torch.float32
    loaded.zero_()  # the source's buffer is not shared
    assert source.state[params[0]]["momentum_buffer"].abs().sum() > 0


def test_a_state_dict_of_other_parameters_is_refused():
    params, _ = params_and_gradients(1)
    with pytest.raises(ValueError, match="holds 3 parameters in 1 group.*has 2 in one"):
        SGD(params[:2], lr=0.1).load_state_dict(SGD(params, lr=0.1).state_dict())


def test_zero_grad_zeroes_or_drops_the_gradients():
    params, gradients = params_and_gradients(1)
    optimizer = SGD(params, lr=0.1)
    for param, gradient in zip(params, gradients[0]):
        param.grad = gradient.clone()
    kept = params[0].grad
    optimizer.zero_grad(set_to_none=False)
    assert params[0].grad is kept and not kept.any()
    optimizer.zero_grad()
    assert all(param.grad is None for param in params)


def test_the_client_optimizer_builds_fedsim_sgd_and_torch_adam():
    params = [torch.zeros(2, requires_grad=True)]
    assert isinstance(OptimizerConfig(lr=0.1, momentum=0.9, nesterov=True).build(params), SGD)
    assert isinstance(OptimizerConfig(name="adam", lr=0.1).build(params), torch.optim.Adam)


def test_sgd_does_not_import_torch_dynamo():
    # the point of fedsim's SGD: torch.optim's optimizers import torch._dynamo, 1.2 s or more per process
    code = ("import sys, torch; from fedsim.client.optim import SGD; p = torch.zeros(2, requires_grad=True); "
            "p.grad = torch.ones(2); o = SGD([p], lr=0.1, momentum=0.9); o.step(); o.zero_grad(); o.state_dict(); "
            "print('torch._dynamo' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_a_loss_scaler_unscales_into_sgd_and_skips_an_infinite_step():
    # fp16 AMP on CUDA steps the optimizer through torch.amp.GradScaler, which reads param_groups
    param = torch.nn.Parameter(torch.ones(3))
    optimizer, scaler = SGD([param], lr=0.1), torch.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale((param * torch.tensor([1.0, 2.0, 3.0])).sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    stepped = param.detach().clone()
    torch.testing.assert_close(stepped, torch.tensor([0.9, 0.8, 0.7]), rtol=1e-6, atol=0.0)
    param.grad = torch.tensor([float("inf"), 0.0, 0.0])
    scaler.step(optimizer)
    scaler.update()
    assert torch.equal(param.detach(), stepped) and scaler.get_scale() == 512.0
