"""The classifier registry: every model runs forward and backward; options and bad inputs behave."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import fedsim.models
from fedsim.models import create_model, list_models
from fedsim.models.layers import SqueezeExcitation

MODELS = list_models()
# (in_channels, image_size, num_classes): MNIST-like and CIFAR-100-like inputs
SHAPES = [(1, 28, 10), (3, 32, 100)]


def num_parameters(model: nn.Module) -> int:
    return sum(parameter.numel() for parameter in model.parameters())


def forward_backward(model: nn.Module, in_channels: int, image_size: int, num_classes: int) -> torch.Tensor:
    """Run one training step's forward and backward on a batch of 2; return the logits."""
    model.train()
    images = torch.randn(2, in_channels, image_size, image_size)
    labels = torch.arange(2) % num_classes
    logits = model(images)
    F.cross_entropy(logits, labels).backward()
    return logits


@pytest.mark.parametrize("in_channels, image_size, num_classes", SHAPES, ids=["1x28-10", "3x32-100"])
@pytest.mark.parametrize("name", MODELS)
def test_forward_backward(name, in_channels, image_size, num_classes):
    torch.manual_seed(0)
    model = create_model(name, num_classes=num_classes, in_channels=in_channels, image_size=image_size)
    print(f"\n{name} ({in_channels}, {image_size}, {num_classes}): {num_parameters(model):,} parameters")

    logits = forward_backward(model, in_channels, image_size, num_classes)

    assert logits.shape == (2, num_classes)
    assert torch.isfinite(logits).all()
    for parameter_name, parameter in model.named_parameters():
        if parameter.requires_grad:
            assert parameter.grad is not None, f"{parameter_name} got no gradient"
            assert torch.isfinite(parameter.grad).all(), f"{parameter_name} has a non-finite gradient"


@pytest.mark.parametrize("name", MODELS)
def test_tiny_images_work_or_fail_at_creation(name):
    # sklearn's 8x8 digits: a model either takes them or says so before any forward
    try:
        model = create_model(name, num_classes=10, in_channels=1, image_size=8)
    except ValueError as error:
        assert "`image_size`=8" in str(error) and "smallest supported" in str(error)
        return
    assert forward_backward(model, 1, 8, 10).shape == (2, 10)


@pytest.mark.parametrize("name", MODELS)
def test_same_seed_gives_same_initial_model(name):
    # federated clients and DDP ranks must start from one global model
    torch.manual_seed(3)
    first = create_model(name, num_classes=10)
    torch.manual_seed(3)
    second = create_model(name, num_classes=10)
    for (key, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items()):
        torch.testing.assert_close(a, b, msg=key)


def has_batch_norm(model: nn.Module) -> bool:
    return any(isinstance(module, nn.modules.batchnorm._BatchNorm) for module in model.modules())


@pytest.mark.parametrize("name", ["cnn", "simple-cnn", "resnet18", "mobilenet_v3_small"])
def test_group_norm_has_no_batch_statistics(name):
    model = create_model(name, num_classes=10, norm="group")
    assert not has_batch_norm(model)
    assert any(isinstance(module, nn.GroupNorm) for module in model.modules())
    assert not [key for key in model.state_dict() if "running" in key or "num_batches_tracked" in key]
    assert forward_backward(model, 1, 28, 10).shape == (2, 10)


@pytest.mark.parametrize(
    "name, default_has_batch_norm",
    [("cnn", False), ("simple-cnn", False), ("vgg11", False), ("resnet18", True), ("efficientnet_b0", True)],
)
def test_norm_default_and_batch(name, default_has_batch_norm):
    assert has_batch_norm(create_model(name, num_classes=10)) is default_has_batch_norm
    assert has_batch_norm(create_model(name, num_classes=10, norm="batch"))


@pytest.mark.parametrize("name", ["cnn", "simple-cnn"])
def test_squeeze_excitation_adds_parameters(name):
    plain = create_model(name, num_classes=10)
    with_se = create_model(name, num_classes=10, se=True)
    assert sum(isinstance(module, SqueezeExcitation) for module in with_se.modules()) == 2
    assert num_parameters(with_se) > num_parameters(plain)
    assert forward_backward(with_se, 1, 28, 10).shape == (2, 10)


def test_paper_parameter_counts():
    # McMahan et al. (2017) give 1,663,370 for the CNN and 199,210 for the 2NN on MNIST
    assert num_parameters(create_model("cnn", num_classes=10)) == 1_663_370
    assert num_parameters(create_model("mlp", num_classes=10)) == 199_210


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "efficientnet_b0"])
def test_small_image_stem(name):
    def first_conv(model):
        return next(module for module in model.modules() if isinstance(module, nn.Conv2d))

    small = first_conv(create_model(name, num_classes=10, in_channels=3, image_size=32))
    large = first_conv(create_model(name, num_classes=10, in_channels=3, image_size=64))
    assert small.stride == (1, 1) and large.stride == (2, 2)
    assert small.in_channels == large.in_channels == 3


def test_vit_gradient_checkpointing_gives_the_same_gradients():
    images = torch.randn(2, 3, 32, 32)
    labels = torch.tensor([1, 7])
    gradients = []
    for gradient_checkpointing in (False, True):
        torch.manual_seed(0)
        model = create_model(
            "vit-tiny", num_classes=10, in_channels=3, image_size=32, num_layers=2,
            gradient_checkpointing=gradient_checkpointing,
        )
        # torchvision zero-initialises the head, which would zero every other gradient
        nn.init.normal_(model.heads.head.weight, std=0.02)
        model.train()
        F.cross_entropy(model(images), labels).backward()
        gradients.append({key: parameter.grad for key, parameter in model.named_parameters()})
    plain, checkpointed = gradients
    assert plain.keys() == checkpointed.keys()
    assert plain["conv_proj.weight"].abs().sum() > 0
    torch.testing.assert_close(checkpointed, plain)


def test_list_models_pattern_and_exports():
    assert list_models("vit*") == ["vit-tiny"]
    assert set(list_models()) >= {"cnn", "simple-cnn", "mlp", "resnet18", "vgg11", "vit-tiny", "swin-tiny"}
    assert fedsim.models.__all__ == sorted(fedsim.models.__all__)


BAD_ARGUMENTS = [
    ("unknown name", dict(name="resnet1000"), ValueError, r"unknown model `model`='resnet1000'; known: .*cnn"),
    ("num_classes zero", dict(num_classes=0), ValueError, r"`num_classes` must be >= 1, got 0"),
    ("num_classes str", dict(num_classes="10"), TypeError, "`num_classes`.*str"),
    ("num_classes bool", dict(num_classes=True), TypeError, "`num_classes`"),
    ("in_channels negative", dict(in_channels=-1), ValueError, r"`in_channels` must be >= 1, got -1"),
    ("image_size zero", dict(image_size=0), ValueError, "`image_size`.*got 0"),
    ("image_size float", dict(image_size=28.0), TypeError, "`image_size`.*float"),
    ("image too small", dict(name="simple-cnn", image_size=8), ValueError,
     r"'simple-cnn': `image_size`=8 is too small: the smallest supported is 16"),
    ("image not patch multiple", dict(name="vit-tiny", image_size=30), ValueError,
     r"`image_size`=30 must be a multiple of `patch_size`=4; use image_size=28"),
    ("norm on vit", dict(name="vit-tiny", norm="batch"), ValueError, r"'vit-tiny': `norm`='batch'.*supports 'layer'"),
    ("norm on cnn", dict(norm="layer"), ValueError, r"`norm`='layer'.*'none', 'batch', 'group'"),
    ("norm type", dict(norm=2), TypeError, "`norm`"),
    ("se on resnet", dict(name="resnet18", se=True), ValueError, "`se`=True is not supported"),
    ("se type", dict(se="yes"), TypeError, "`se` must be a bool"),
    ("unknown option", dict(depth=3), TypeError, "depth"),
]


@pytest.mark.parametrize("arguments, error, match", [case[1:] for case in BAD_ARGUMENTS],
                         ids=[case[0] for case in BAD_ARGUMENTS])
def test_bad_arguments_name_the_parameter(arguments, error, match):
    arguments = {"name": "cnn", "num_classes": 10, **arguments}
    with pytest.raises(error, match=match):
        create_model(**arguments)
