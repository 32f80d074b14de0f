"""Check dmlbook's backbones against the reference implementations (not a test).

dmlbook writes ResNet-50/18 and BN-Inception itself, because torchvision and the BN-Inception port
(Cadene's ``pretrainedmodels``) do not import with the CPU torch this project pins. This script
compares them with those references wherever the reference *model code* can be loaded:

* torchvision's ``resnet50`` and ``resnet18`` (``torchvision/models/resnet.py``);
* the port's ``BNInception`` (``pretrainedmodels/models/bninception.py``), the network behind
  ``bn_inception-52deb4733.pth``.

For each pair it checks, on random weights (every parameter *and* BatchNorm buffer drawn at
random, so that BatchNorm is not the identity) in float64:

1. state-dict keys: the same names in the same order, and the same shapes and dtypes;
2. the reference accepts dmlbook's state dict with ``strict=True``;
3. eval-mode outputs, train-mode outputs, the running statistics after one train-mode step
   (this catches a BatchNorm momentum that differs), and the gradients of every parameter;
4. the loading path: the reference's weights saved to a file in the format the real weight files
   use (for the port: no ``num_batches_tracked`` counters, BatchNorm tensors as ``[1, C]`` as in
   older copies) and loaded with ``dmlbook.models.resnet50(pretrained=...)`` /
   ``bn_inception(pretrained=...)`` give the reference's outputs.

Installing the references
-------------------------
On a machine where ``import torchvision`` works, nothing special is needed. With this project's
CPU torch the compiled torchvision operators (``torchvision::nms`` ...) cannot be registered, so
``import torchvision`` fails; the model code itself is plain PyTorch. The script then loads
``torchvision.models`` without running ``torchvision/__init__.py`` (which registers those
operators) and says so in the results. The port's package ``__init__`` imports torchvision
models, so its ``bninception.py`` is always loaded as a file. ``make verify-backbones`` installs
both beside the venv without their dependencies and runs this script; by hand::

    pip install --no-deps --target build/refs torchvision==0.28.0 pretrainedmodels==0.7.4
    PYTHONPATH=build/refs python bench/verify_backbones.py

(torchvision 0.28 is the release built against torch 2.13.) Results go to
``bench/results/backbones_verified.md``; the script exits with status 1 if any check fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import sys
import tempfile
import types
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import torch
from torch import nn

from dmlbook.models import bn_inception, resnet18, resnet50

RESULTS = Path(__file__).resolve().parent / "results"
SIZE = 224  # the port's global pool is a fixed 7 x 7 average: it only takes 224-pixel inputs
TOLERANCE = 1e-9  # float64; the same operations in the same order agree to rounding


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise SystemExit(
            f"{name} is not installed: install it next to dmlbook without its dependencies "
            f"(`pip install --no-deps --target DIR {name}` and PYTHONPATH=DIR), see this "
            "script's docstring"
        )
    return Path(spec.origin).parent


def load_torchvision() -> tuple[types.ModuleType, str]:
    """``torchvision.models.resnet`` and a line saying how it was imported."""
    try:
        import torchvision.models.resnet as tv_resnet
        from torchvision import __version__
    except (ImportError, RuntimeError, OSError) as err:
        root = _package_dir("torchvision")
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        package = types.ModuleType("torchvision")
        package.__path__ = [str(root)]
        package.__file__ = str(root / "__init__.py")
        sys.modules["torchvision"] = package
        import torchvision.models.resnet as tv_resnet
        from torchvision.version import __version__

        how = (
            f"torchvision {__version__}: model code imported without `torchvision/__init__.py` "
            f"(`import torchvision` fails with this torch: {type(err).__name__}: "
            f"{str(err).splitlines()[0][:120]})"
        )
        return tv_resnet, how
    return tv_resnet, f"torchvision {__version__}, imported normally"


def load_port() -> tuple[types.ModuleType, str]:
    """The port's ``bninception.py`` loaded as a file, and a line naming it."""
    path = _package_dir("pretrainedmodels") / "models" / "bninception.py"
    spec = importlib.util.spec_from_file_location("reference_bninception", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    version = "unknown version"
    meta = list(path.parents[2].glob("pretrainedmodels-*.dist-info")) + list(
        path.parents[2].glob("pretrainedmodels-*.egg-info")
    )
    if meta:
        version = meta[0].name.split("-")[1].removesuffix(".dist").removesuffix(".egg")
    return module, f"pretrainedmodels {version}, `models/bninception.py` loaded as a file"


def randomize(model: nn.Module, seed: int) -> None:
    """Draw every floating parameter and buffer at random (running variances positive)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if not t.is_floating_point():
                continue
            if name.endswith("running_var"):
                t.copy_(0.5 + torch.rand(t.shape, generator=g, dtype=t.dtype))
            elif name.endswith(("running_mean", "bias")):
                t.copy_(0.1 * torch.randn(t.shape, generator=g, dtype=t.dtype))
            elif t.ndim == 1:  # BatchNorm scale
                t.copy_(0.8 + 0.4 * torch.rand(t.shape, generator=g, dtype=t.dtype))
            else:  # conv / linear weight, fan-in scaled so activations stay O(1)
                fan_in = t[0].numel()
                t.copy_(torch.randn(t.shape, generator=g, dtype=t.dtype) * (2.0 / fan_in) ** 0.5)


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    with torch.no_grad():
        return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def compare(
    name: str,
    ours: nn.Module,
    theirs: nn.Module,
    reload: Callable[[Path], nn.Module],
    to_file_format: Callable[[dict], dict],
    size: int,
    batch: int,
) -> list[tuple[str, bool, str]]:
    """Run checks 1-4 of the module docstring; rows of (check, passed, detail)."""
    rows: list[tuple[str, bool, str]] = []
    a, b = ours.state_dict(), theirs.state_dict()
    same_names = list(a) == list(b)
    rows.append((
        "state-dict keys: same names, same order",
        same_names,
        f"{len(a)} vs {len(b)} entries"
        + ("" if same_names else f"; only ours: {sorted(set(a) - set(b))[:3]}, "
           f"only theirs: {sorted(set(b) - set(a))[:3]}"),
    ))  # fmt: skip
    mismatched = [k for k in a if k in b and (a[k].shape, a[k].dtype) != (b[k].shape, b[k].dtype)]
    rows.append(("shapes and dtypes", not mismatched, f"{len(mismatched)} differ"))
    n_params = sum(p.numel() for p in theirs.parameters())
    try:
        theirs.load_state_dict(a, strict=True)
        rows.append(("reference loads our state dict (strict)", True, f"{n_params:,} parameters"))
    except RuntimeError as err:
        rows.append(("reference loads our state dict (strict)", False, str(err)[:200]))
        return rows

    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 3, size, size, generator=g, dtype=torch.float64)
    ours.eval(), theirs.eval()
    with torch.no_grad():
        d = _max_diff(ours(x), theirs(x))
    rows.append(("eval-mode outputs (max relative difference)", d <= TOLERANCE, f"{d:.1e}"))

    ours.train(), theirs.train()
    out_a, out_b = ours(x), theirs(x)
    d = _max_diff(out_a, out_b)
    rows.append(("train-mode outputs", d <= TOLERANCE, f"{d:.1e}"))
    running = [k for k in a if k.endswith(("running_mean", "running_var"))]
    sa, sb = ours.state_dict(), theirs.state_dict()
    d = max(_max_diff(sa[k], sb[k]) for k in running)
    rows.append((
        f"running statistics after one train step ({len(running)} tensors)", d <= TOLERANCE,
        f"{d:.1e}",
    ))  # fmt: skip
    out_a.square().sum().backward()
    out_b.square().sum().backward()
    # Relative to the largest gradient of the network, not of each tensor: the bias of a conv
    # followed by train-mode BatchNorm has an exactly zero gradient (BatchNorm removes the mean),
    # which both networks compute as rounding noise of order 1e-13.
    grads_b = dict(theirs.named_parameters())
    scale = max(float(p.grad.abs().max()) for p in grads_b.values())
    d = max(float((p.grad - grads_b[k].grad).abs().max()) for k, p in ours.named_parameters())
    rows.append(("gradients of every parameter", d / scale <= TOLERANCE, f"{d / scale:.1e}"))

    theirs.eval()
    file_state = {}  # weight files are float32: round the reference to float32 values first
    with torch.no_grad():
        for key, t in theirs.state_dict().items():
            if t.is_floating_point():
                t.copy_(t.float())
            file_state[key] = t.float() if t.is_floating_point() else t
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.pth"
        torch.save(to_file_format(file_state), path)
        loaded = reload(path).double().eval()
    with torch.no_grad():
        d = _max_diff(loaded(x), theirs(x))
    rows.append(("dmlbook loader on the reference's weight file", d <= TOLERANCE, f"{d:.1e}"))
    return rows


def port_file_format(state: dict) -> dict:
    """As the port's weight files store it: no counters, BatchNorm tensors as ``[1, C]``."""
    return {
        k: (v.reshape(1, -1) if "_bn." in k else v)
        for k, v in state.items()
        if not k.endswith("num_batches_tracked")
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--out", type=Path, default=RESULTS / "backbones_verified.md")
    args = p.parse_args()
    torch.set_grad_enabled(True)

    tv_resnet, tv_how = load_torchvision()
    port, port_how = load_port()
    cases = [
        ("resnet50", resnet50, tv_resnet.resnet50, tv_how, lambda s: s),
        ("resnet18", resnet18, tv_resnet.resnet18, tv_how, lambda s: s),
        ("bn_inception", bn_inception, port.BNInception, port_how, port_file_format),
    ]
    lines, ok = [], True
    for seed, (name, build, reference, how, to_file) in enumerate(cases):
        ours, theirs = build().double(), reference().double()
        randomize(ours, seed)
        rows = compare(
            name, ours, theirs,
            lambda path, build=build: build(pretrained=path, check_hash=False),
            to_file, SIZE, args.batch,
        )  # fmt: skip
        lines += [f"## {name} vs {how}", "", "| check | result | detail |", "|---|---|---|"]
        for check, passed, detail in rows:
            lines.append(f"| {check} | {'pass' if passed else 'FAIL'} | {detail} |")
            print(f"{name:>12}  {'pass' if passed else 'FAIL'}  {check}: {detail}")
            ok &= passed
        lines.append("")

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = [
        "# dmlbook backbones vs the reference implementations",
        "",
        f"- Date: {stamp}; torch {torch.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()} CPU",
        f"- Written by `bench/verify_backbones.py`: random weights (parameters and BatchNorm "
        f"buffers), float64, {args.batch} x 3 x {SIZE} x {SIZE} inputs; differences "
        f"are max |ours - reference| / max |reference|, tolerance {TOLERANCE:.0e}.",
        f"- Overall: {'all checks pass' if ok else 'SOME CHECKS FAIL'}",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(header + lines))
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
