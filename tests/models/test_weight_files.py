"""Tests of dmlbook.models.weight_files: full SHA-256 checks of downloaded, cached and local weights.

No test downloads anything: sources are ``file://`` URLs, and the manifest's own entries are
checked against the digest prefixes their publishers put in the file names.
"""

from __future__ import annotations

import re

import pytest
import torch

from dmlbook.models import fetch_state_dict, resnet18
from dmlbook.models import weight_files as wf
from dmlbook.models.head import DEFAULT_WEIGHTS


def test_manifest_digests_agree_with_the_published_name_prefixes():
    for name, entry in wf.MANIFEST.items():
        assert entry.name == name and re.fullmatch(r"[0-9a-f]{64}", entry.sha256)
        prefix = re.search(r"-([0-9a-f]{8,})\.pth$", name)[1]  # published in the name
        assert entry.sha256.startswith(prefix), name
        assert entry.sources and all(s.endswith("/" + name) for s in entry.sources)
    assert {u.rsplit("/", 1)[1] for u in DEFAULT_WEIGHTS.values()} == set(wf.MANIFEST)


def test_other_weights_under_an_official_name_are_refused_cached_or_local(tmp_path):
    """Random weights saved as resnet18-f37072fd.pth in the hub cache used to load silently."""
    hub = tmp_path / "hub"
    hub.mkdir()
    fake = hub / "resnet18-f37072fd.pth"
    torch.save(resnet18().state_dict(), fake)
    with pytest.raises(ValueError, match=r"is not the official resnet18-f37072fd.pth .*Delete it"):
        fetch_state_dict(DEFAULT_WEIGHTS["resnet18"], model_dir=hub, progress=False)
    assert fake.is_file()  # not ours to delete: the user decides
    with pytest.raises(ValueError, match="give the file another name"):
        fetch_state_dict(fake)
    renamed = fake.rename(tmp_path / "my-resnet18.pth")
    assert fetch_state_dict(renamed).keys() == resnet18().state_dict().keys()


@pytest.mark.parametrize("damage", ["truncated", "empty", "text", "random"], ids=lambda d: d)
def test_unreadable_weight_files_are_one_line_naming_the_file(tmp_path, damage):
    good = tmp_path / "good.pth"
    torch.save({"w": torch.arange(1000.0)}, good)
    data = {
        "truncated": good.read_bytes()[:3000],
        "empty": b"",
        "text": b"not weights\n",
        "random": bytes(range(256)) * 8,
    }[damage]
    path = tmp_path / f"{damage}.pth"
    path.write_bytes(data)
    with pytest.raises(ValueError) as err:
        fetch_state_dict(path)
    message = str(err.value)
    assert message.startswith(f"{path} cannot be read (") and "\n" not in message
    assert "weights_only=False" not in message and message.endswith("Replace it with a good copy.")


def test_cached_file_that_cannot_be_read_says_to_delete_it(tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / "w-0123abcd.pth").write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(ValueError, match="w-0123abcd.pth cannot be read .*Delete it and run again"):
        fetch_state_dict("https://example.invalid/w-0123abcd.pth", model_dir=hub, progress=False)


def test_sources_mirror_first_then_the_next_source_after_a_bad_file(tmp_path, monkeypatch):
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    state = {"w": torch.arange(6.0)}
    torch.save(state, good / "w.pth")
    torch.save({"w": torch.zeros(6)}, bad / "w.pth")
    entry = wf.WeightFile(
        "w.pth",
        wf.file_sha256(good / "w.pth"),
        None,
        ((bad / "w.pth").as_uri(), (good / "w.pth").as_uri()),
    )
    monkeypatch.setitem(wf.MANIFEST, "w.pth", entry)
    url = (tmp_path / "gone" / "w.pth").as_uri()
    path = wf.cached_weights(url, model_dir=tmp_path / "hub1", progress=False)
    assert torch.equal(torch.load(path)["w"], state["w"])  # gone, then bad (deleted), then good
    monkeypatch.setenv("DMLBOOK_WEIGHTS_MIRROR", str(good))
    monkeypatch.setitem(wf.MANIFEST, "w.pth", entry.__class__("w.pth", entry.sha256, None, ()))
    path = wf.cached_weights(url, model_dir=tmp_path / "hub2", progress=False)
    assert wf.file_sha256(path) == entry.sha256  # from the mirror; url alone would fail
    monkeypatch.setenv("DMLBOOK_WEIGHTS_MIRROR", str(bad))
    with pytest.raises(ValueError) as err:
        wf.cached_weights(url, model_dir=tmp_path / "hub3", progress=False)
    message = str(err.value)
    assert "could not download w.pth (" in message and "\n" not in message
    assert "the file it gave is not the official w.pth" in message and "deleted" in message
    assert "model.pretrained=/path/to/file.pth" in message
    assert not (tmp_path / "hub3" / "w.pth").exists()
