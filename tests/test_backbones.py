"""Tests of the benchmark backbones (ResNet, BN-Inception), weight loading and the embedding head.

torchvision and the ``pretrainedmodels`` port do not import here, so the expected state-dict keys
and shapes are generated in this file from independent, hand-written layer tables:

* ResNet-50/18: the stage table of He et al. 2016 (Table 1) with torchvision's module naming
  (``layerS.B.convN``, ``downsample.0/1``, ``fc``); torchvision's ``resnet50()`` has 25,557,032
  parameters and 320 state-dict entries, ``resnet18()`` 11,689,512.
* BN-Inception: every convolution of Cadene's ``pretrainedmodels/models/bninception.py``
  (commit 181b05df642c83345d06db17cbd5357fc0e8734c), transcribed as ``name in out kernel``:
  69 biased convolutions each followed by ``<name>_bn``, then ``last_linear`` (1024 -> 1000):
  11,295,240 parameters; 485 state-dict entries, 416 without ``num_batches_tracked`` (the port's
  file predates those counters).
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading

import pytest
import torch
from torch import nn

from dmlbook.models import (
    BNInception,
    EmbeddingModel,
    GlobalPool,
    ResNet,
    available_backbones,
    bn_inception,
    build_backbone,
    fetch_state_dict,
    load_pretrained,
    resnet18,
    resnet50,
)
from dmlbook.models.bn_inception import BN_INCEPTION_INPUT, squeeze_bn
from dmlbook.models.head import DEFAULT_WEIGHTS


@pytest.fixture(autouse=True)
def one_thread():
    """Single-threaded CPU math (fast and steady on a shared two-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ------------------------------------------------------------------------------------------
# expected key lists, from the architecture tables
# ------------------------------------------------------------------------------------------


def _conv(keys: dict, name: str, c_in: int, c_out: int, k: int, bias: bool = False) -> None:
    keys[f"{name}.weight"] = (c_out, c_in, k, k)
    if bias:
        keys[f"{name}.bias"] = (c_out,)


def _bn(keys: dict, name: str, c: int, counter: bool = True) -> None:
    for p in ("weight", "bias", "running_mean", "running_var"):
        keys[f"{name}.{p}"] = (c,)
    if counter:
        keys[f"{name}.num_batches_tracked"] = ()


# He et al. 2016, Table 1: (blocks, width) of conv2_x .. conv5_x
RESNET50_STAGES = [(3, 64), (4, 128), (6, 256), (3, 512)]
RESNET18_STAGES = [(2, 64), (2, 128), (2, 256), (2, 512)]


def torchvision_resnet_keys(stages: list[tuple[int, int]], bottleneck: bool) -> dict:
    keys: dict = {}
    _conv(keys, "conv1", 3, 64, 7)
    _bn(keys, "bn1", 64)
    c_in = 64
    for s, (blocks, width) in enumerate(stages, start=1):
        out = width * (4 if bottleneck else 1)
        for b in range(blocks):
            p = f"layer{s}.{b}."
            if bottleneck:
                _conv(keys, p + "conv1", c_in, width, 1)
                _bn(keys, p + "bn1", width)
                _conv(keys, p + "conv2", width, width, 3)
                _bn(keys, p + "bn2", width)
                _conv(keys, p + "conv3", width, out, 1)
                _bn(keys, p + "bn3", out)
            else:
                _conv(keys, p + "conv1", c_in, width, 3)
                _bn(keys, p + "bn1", width)
                _conv(keys, p + "conv2", width, width, 3)
                _bn(keys, p + "bn2", width)
            if b == 0 and (c_in != out or s > 1):
                _conv(keys, p + "downsample.0", c_in, out, 1)
                _bn(keys, p + "downsample.1", out)
            c_in = out
    keys["fc.weight"] = (1000, c_in)
    keys["fc.bias"] = (1000,)
    return keys


# Cadene's bninception.py, constructor order: name, in channels, out channels, kernel.
BN_INCEPTION_CONVS = """
conv1_7x7_s2 3 64 7
conv2_3x3_reduce 64 64 1
conv2_3x3 64 192 3
inception_3a_1x1 192 64 1
inception_3a_3x3_reduce 192 64 1
inception_3a_3x3 64 64 3
inception_3a_double_3x3_reduce 192 64 1
inception_3a_double_3x3_1 64 96 3
inception_3a_double_3x3_2 96 96 3
inception_3a_pool_proj 192 32 1
inception_3b_1x1 256 64 1
inception_3b_3x3_reduce 256 64 1
inception_3b_3x3 64 96 3
inception_3b_double_3x3_reduce 256 64 1
inception_3b_double_3x3_1 64 96 3
inception_3b_double_3x3_2 96 96 3
inception_3b_pool_proj 256 64 1
inception_3c_3x3_reduce 320 128 1
inception_3c_3x3 128 160 3
inception_3c_double_3x3_reduce 320 64 1
inception_3c_double_3x3_1 64 96 3
inception_3c_double_3x3_2 96 96 3
inception_4a_1x1 576 224 1
inception_4a_3x3_reduce 576 64 1
inception_4a_3x3 64 96 3
inception_4a_double_3x3_reduce 576 96 1
inception_4a_double_3x3_1 96 128 3
inception_4a_double_3x3_2 128 128 3
inception_4a_pool_proj 576 128 1
inception_4b_1x1 576 192 1
inception_4b_3x3_reduce 576 96 1
inception_4b_3x3 96 128 3
inception_4b_double_3x3_reduce 576 96 1
inception_4b_double_3x3_1 96 128 3
inception_4b_double_3x3_2 128 128 3
inception_4b_pool_proj 576 128 1
inception_4c_1x1 576 160 1
inception_4c_3x3_reduce 576 128 1
inception_4c_3x3 128 160 3
inception_4c_double_3x3_reduce 576 128 1
inception_4c_double_3x3_1 128 160 3
inception_4c_double_3x3_2 160 160 3
inception_4c_pool_proj 576 128 1
inception_4d_1x1 608 96 1
inception_4d_3x3_reduce 608 128 1
inception_4d_3x3 128 192 3
inception_4d_double_3x3_reduce 608 160 1
inception_4d_double_3x3_1 160 192 3
inception_4d_double_3x3_2 192 192 3
inception_4d_pool_proj 608 128 1
inception_4e_3x3_reduce 608 128 1
inception_4e_3x3 128 192 3
inception_4e_double_3x3_reduce 608 192 1
inception_4e_double_3x3_1 192 256 3
inception_4e_double_3x3_2 256 256 3
inception_5a_1x1 1056 352 1
inception_5a_3x3_reduce 1056 192 1
inception_5a_3x3 192 320 3
inception_5a_double_3x3_reduce 1056 160 1
inception_5a_double_3x3_1 160 224 3
inception_5a_double_3x3_2 224 224 3
inception_5a_pool_proj 1056 128 1
inception_5b_1x1 1024 352 1
inception_5b_3x3_reduce 1024 192 1
inception_5b_3x3 192 320 3
inception_5b_double_3x3_reduce 1024 192 1
inception_5b_double_3x3_1 192 224 3
inception_5b_double_3x3_2 224 224 3
inception_5b_pool_proj 1024 128 1
"""


def port_bn_inception_keys(counters: bool = True) -> dict:
    keys: dict = {}
    for line in BN_INCEPTION_CONVS.split("\n"):
        if line.strip():
            name, c_in, c_out, k = line.split()
            _conv(keys, name, int(c_in), int(c_out), int(k), bias=True)
            _bn(keys, name + "_bn", int(c_out), counter=counters)
    keys["last_linear.weight"] = (1000, 1024)
    keys["last_linear.bias"] = (1000,)
    return keys


def shapes(model: nn.Module) -> dict:
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@functools.lru_cache(maxsize=1)
def _resnet50() -> ResNet:
    torch.manual_seed(0)
    return resnet50()


# ------------------------------------------------------------------------------------------
# ResNet
# ------------------------------------------------------------------------------------------


def test_resnet50_keys_and_shapes_match_torchvision_exactly():
    model = _resnet50()
    expected = torchvision_resnet_keys(RESNET50_STAGES, bottleneck=True)
    assert list(shapes(model)) == list(expected)  # same names, same order
    assert shapes(model) == expected
    assert len(expected) == 320
    assert n_params(model) == 25_557_032


def test_resnet18_keys_and_parameter_count():
    model = resnet18()
    assert shapes(model) == torchvision_resnet_keys(RESNET18_STAGES, bottleneck=False)
    assert n_params(model) == 11_689_512


def test_resnet50_v15_stride_on_3x3_and_forward_shapes():
    model = _resnet50().eval()
    first = model.layer2[0]
    assert first.conv1.stride == (1, 1) and first.conv2.stride == (2, 2)
    assert first.downsample[0].stride == (2, 2)
    assert not any(m.bias is not None for m in model.modules() if isinstance(m, nn.Conv2d))
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        assert model.features(x).shape == (2, 2048, 2, 2)
        assert model(x).shape == (2, 1000)
    assert model.num_features == 2048


def test_resnet_without_classifier_and_narrow_width():
    model = resnet18(num_classes=0, width=8)
    assert isinstance(model.fc, nn.Identity) and model.num_features == 64
    assert model(torch.randn(3, 3, 32, 32)).shape == (3, 64)
    with pytest.raises(ValueError, match="pretrained weights need width=64"):
        resnet18("unused.pth", width=8)
    with pytest.raises(ValueError, match=r"shape \(N, 3, H, W\)"):
        model(torch.randn(2, 1, 32, 32))


# ------------------------------------------------------------------------------------------
# BN-Inception
# ------------------------------------------------------------------------------------------


def test_bn_inception_keys_match_the_pretrained_port():
    model = BNInception()
    expected = port_bn_inception_keys()
    assert list(shapes(model)) == list(expected)
    assert shapes(model) == expected
    assert len(expected) == 485 and len(port_bn_inception_keys(counters=False)) == 416
    assert n_params(model) == 11_295_240
    assert sum(isinstance(m, nn.Conv2d) for m in model.modules()) == 69


def test_bn_inception_forward_shapes_and_input_spec():
    model = BNInception().eval()
    with torch.no_grad():
        assert model.features(torch.randn(1, 3, 224, 224)).shape == (1, 1024, 7, 7)
        assert model.features(torch.randn(2, 3, 64, 64)).shape == (2, 1024, 2, 2)
        assert model(torch.randn(2, 3, 64, 64)).shape == (2, 1000)
        assert model.features(torch.randn(1, 3, 227, 227)).shape == (1, 1024, 7, 7)  # MS crop
    with pytest.raises(ValueError, match="32k-1 to 32k\\+6"):
        model.features(torch.randn(1, 3, 112, 112))  # 4e: strided conv 4x4, max pool 3x3
    assert BN_INCEPTION_INPUT.color == "BGR" and BN_INCEPTION_INPUT.scale == 255.0
    assert BN_INCEPTION_INPUT.mean == (104.0, 117.0, 128.0)


def test_bn_inception_batchnorm_momentum_is_pytorch_convention():
    model = BNInception()
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(bns) == 69 and all(m.momentum == 0.1 and m.eps == 1e-5 for m in bns)
    with pytest.raises(ValueError, match="Caffe's convention"):
        BNInception(bn_momentum=0.9)
    # One training step moves the running mean 10 % of the way to the batch mean, no more.
    bn = model.conv1_7x7_s2_bn
    before = bn.running_mean.clone()
    seen = {}
    model.conv1_7x7_s2.register_forward_hook(lambda m, i, o: seen.update(out=o.detach()))
    model.train()(torch.randn(2, 3, 64, 64) * 50)
    batch_mean = seen["out"].mean(dim=(0, 2, 3))
    assert torch.allclose(bn.running_mean, 0.9 * before + 0.1 * batch_mean, atol=1e-4)


# ------------------------------------------------------------------------------------------
# loading weights
# ------------------------------------------------------------------------------------------


def port_style_state(model: BNInception) -> dict:
    """A state dict as older copies of the port store it: [1, C] BN tensors, no counters."""
    out = {}
    for k, v in model.state_dict().items():
        if k.endswith("num_batches_tracked"):
            continue
        out[k] = v.reshape(1, -1).clone() if "_bn." in k else v.clone()
    return out


def test_load_resnet_from_path_wrapped_and_dataparallel(tmp_path):
    torch.manual_seed(1)
    src = resnet18()
    path = tmp_path / "weights.pth"
    torch.save({"state_dict": {f"module.{k}": v for k, v in src.state_dict().items()}}, path)
    model = resnet18(path)
    for k, v in src.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    headless = resnet18(path, num_classes=0)
    assert headless.load_report.ignored == ["fc.weight", "fc.bias"]


def test_load_from_file_url_checks_the_hash_prefix(tmp_path):
    torch.manual_seed(2)
    src = resnet18()
    raw = tmp_path / "raw.pth"
    torch.save(src.state_dict(), raw)
    digest = hashlib.sha256(raw.read_bytes()).hexdigest()
    good = tmp_path / f"resnet18-{digest[:8]}.pth"
    raw.rename(good)
    cache = tmp_path / "hub"
    state = fetch_state_dict(good.as_uri(), model_dir=cache, check_hash=True, progress=False)
    assert torch.equal(state["fc.weight"], src.fc.weight)
    assert (cache / good.name).is_file()
    bad = tmp_path / "resnet18-00000000.pth"
    bad.write_bytes(good.read_bytes())
    with pytest.raises(ValueError, match="does not start with 00000000.*, deleted"):
        fetch_state_dict(bad.as_uri(), model_dir=tmp_path / "hub2", check_hash=True, progress=False)
    assert not (tmp_path / "hub2" / bad.name).exists()


def test_bn_inception_port_file_over_loopback_http(tmp_path):
    torch.manual_seed(3)
    src = BNInception()
    torch.save(port_style_state(src), tmp_path / "bn_inception-test.pth")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/bn_inception-test.pth"
        model = BNInception()
        report = load_pretrained(
            model, url, convert=squeeze_bn, model_dir=tmp_path / "hub", progress=False
        )
    finally:
        server.shutdown()
    assert len(report.loaded) == 416 and len(report.defaulted) == 69
    for k, v in src.state_dict().items():
        if not k.endswith("num_batches_tracked"):
            assert torch.equal(model.state_dict()[k], v), k
    assert model.conv1_7x7_s2_bn.weight.shape == (64,)


def test_bn_inception_builder_squeezes_and_drops_the_classifier(tmp_path):
    src = BNInception()
    path = tmp_path / "port.pth"
    torch.save(port_style_state(src), path)
    model = bn_inception(path, num_classes=0)
    assert isinstance(model.last_linear, nn.Identity)
    assert torch.equal(
        model.inception_5b_pool_proj_bn.running_var, src.inception_5b_pool_proj_bn.running_var
    )
    assert sorted(model.load_report.ignored) == ["last_linear.bias", "last_linear.weight"]


def test_mismatched_weights_raise_clear_errors(tmp_path):
    state = resnet18().state_dict()
    missing = {k: v for k, v in state.items() if k != "layer1.0.conv1.weight"}
    with pytest.raises(ValueError, match=r"1 missing key\(s\): layer1.0.conv1.weight"):
        load_pretrained(resnet18(), missing)
    extra = dict(state, **{"head.weight": torch.zeros(3)})
    with pytest.raises(ValueError, match=r"1 unexpected key\(s\): head.weight"):
        load_pretrained(resnet18(), extra)
    with pytest.raises(
        ValueError, match=r"shape mismatch.*fc.weight: file \(1000, 512\) vs model \(10, 512\)"
    ):
        load_pretrained(resnet18(num_classes=10), state)
    with pytest.raises(ValueError, match="num_classes=0"):
        load_pretrained(BNInception(), state)  # another architecture altogether
    with pytest.raises(FileNotFoundError, match="not found"):
        resnet50(tmp_path / "nope.pth")
    with pytest.raises(ValueError, match="could not download .* local path"):
        fetch_state_dict("http://127.0.0.1:9/none.pth", model_dir=tmp_path, progress=False)


class _NotATensor:
    pass


def test_weights_only_refuses_pickled_objects(tmp_path):
    path = tmp_path / "evil.pth"
    torch.save({"fc.weight": torch.zeros(2), "payload": _NotATensor()}, path)
    with pytest.raises(ValueError, match="weights_only"):
        fetch_state_dict(path)
    torch.save([torch.zeros(2)], tmp_path / "list.pth")
    with pytest.raises(ValueError, match="does not hold a state dict"):
        fetch_state_dict(tmp_path / "list.pth")


def test_squeeze_bn_only_touches_batchnorm_tensors():
    state = {
        "a_bn.weight": torch.ones(1, 4),
        "a_bn.num_batches_tracked": torch.tensor(3),
        "a.weight": torch.ones(1, 4),
    }
    out = squeeze_bn(state)
    assert out["a_bn.weight"].shape == (4,) and out["a.weight"].shape == (1, 4)


# ------------------------------------------------------------------------------------------
# head and backbone registry
# ------------------------------------------------------------------------------------------


def test_backbone_registry():
    assert available_backbones() == ["bn_inception", "resnet18", "resnet50"]
    assert DEFAULT_WEIGHTS["resnet50"].endswith("resnet50-0676ba61.pth")  # V1, not V2
    assert DEFAULT_WEIGHTS["bn_inception"].endswith("bn_inception-52deb4733.pth")
    with pytest.raises(ValueError, match="Did you mean 'resnet50'"):
        build_backbone("resnet51")
    with pytest.raises(ValueError, match="bad options"):
        build_backbone("resnet18", depth=3)
    assert isinstance(build_backbone("resnet18", width=8).fc, nn.Identity)


def test_global_pooling_modes():
    x = torch.arange(8.0).view(1, 2, 2, 2)
    assert torch.equal(GlobalPool("max")(x), torch.tensor([[3.0, 7.0]]))
    assert torch.equal(GlobalPool("avg")(x), torch.tensor([[1.5, 5.5]]))
    assert torch.equal(GlobalPool("avg+max")(x), torch.tensor([[4.5, 12.5]]))
    with pytest.raises(ValueError, match="pooling must be one of"):
        GlobalPool("sum")


def _small(freeze_bn: bool = False, dim: int | None = 8) -> EmbeddingModel:
    torch.manual_seed(0)
    return EmbeddingModel(build_backbone("resnet18", width=8), dim, freeze_bn=freeze_bn)


def test_embedding_model_unit_norm_float32_under_bf16_autocast():
    model = _small()
    x = torch.randn(4, 3, 32, 32)
    with torch.autocast("cpu", torch.bfloat16):
        emb = model(x)
    assert emb.dtype == torch.float32 and emb.shape == (4, 8)
    assert torch.allclose(emb.norm(dim=1), torch.ones(4), atol=1e-5)
    assert _small(dim=None)(x).shape == (4, 64)
    assert model.input_spec.color == "RGB"
    with pytest.raises(TypeError, match="features"):
        EmbeddingModel(nn.Linear(3, 3), 8)


def test_frozen_bn_keeps_statistics_but_trains_affine():
    model = _small(freeze_bn=True).train()
    bns = [m for m in model.backbone.modules() if isinstance(m, nn.BatchNorm2d)]
    assert bns and not any(m.training for m in bns) and model.embedding.training
    stats = [m.running_mean.clone() for m in bns]
    weight = bns[0].weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(6, 3, 32, 32)).sum(0).pow(2).sum()
    loss.backward()
    opt.step()
    assert all(torch.equal(m.running_mean, s) for m, s in zip(bns, stats, strict=True))
    assert not torch.equal(bns[0].weight, weight)
    assert _small(freeze_bn=False).train().backbone.bn1.training


def test_frozen_backbone_and_param_groups():
    model = _small()
    groups = model.param_groups(1e-5, head_lr_mult=10)
    assert [g["name"] for g in groups] == ["backbone", "head"]
    assert groups[0]["lr"] == 1e-5 and groups[1]["lr"] == pytest.approx(1e-4)
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))
    model.freeze_backbone(True)
    model.train()
    assert model.backbone_frozen and not model.backbone.training and model.embedding.training
    assert not any(p.requires_grad for p in model.backbone.parameters())
    model(torch.randn(4, 3, 32, 32)).sum().backward()
    assert model.embedding.weight.grad is not None
    assert all(p.grad is None for p in model.backbone.parameters())
    model.freeze_backbone(False)
    assert all(p.requires_grad for p in model.backbone.parameters())
