"""Tests of dmlbook.models.pretrained: loading weights from a path, a file URL (hash prefix) and
loopback HTTP, wrapped and DataParallel state dicts, and the errors for mismatched or unsafe files.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading

import pytest
import torch

from dmlbook.models import BNInception, fetch_state_dict, load_pretrained, resnet18, resnet50
from dmlbook.models.bn_inception import squeeze_bn

from .layer_tables import port_style_state

pytestmark = pytest.mark.usefixtures("one_thread")


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
