"""The book's API reference page, generated from the package at build time (``make book``).

Nothing here lists dmlbook's names: every section walks the package as it stands, so a loss,
miner or model added, renamed or removed changes the page with no edit here.

- **Losses**: one entry per name of the loss registry (``available_losses()``), with its class and
  the pure function it wraps (Sphinx autodoc: the docstrings, numpy style through napoleon), its
  declared hyper-parameters, and an example; then every other name of ``dmlbook.losses.__all__``.
- **Miners** (``dmlbook.mining.__all__``), **metrics** (``dmlbook.evaluate.__all__``), **models**
  (``dmlbook.models.__all__``: the ``nn.Module`` classes and the functions that build one),
  **data sets** (the data set registry, then ``dmlbook.data.__all__``), the engine's **config
  sections** (``dmlbook.engine.config_sections``) and the **command line** (its parser's help).

Examples. An entry whose docstring has a doctest (``>>>``) shows it and the test suite runs it
(``tests/test_api_reference.py``). Every other entry of a kind with a calling convention gets a
generated example, executed here, its printed output shown under it: a loss is called on a seeded
batch through ``get_loss``; a miner or metric with the batch's ``S``, ``labels`` or ``embeddings``
bound by parameter name; a model is built with its defaults; a data set is described by the
registry; a config section is shown with its defaults; a command prints its ``--help``. An entry
that neither has nor can get an example is listed in :func:`missing_examples` (the test fails on
it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import io
import sys
from dataclasses import dataclass, field

import torch

PRELUDE = """import torch
from dmlbook.core.similarity import cosine_similarity

torch.manual_seed(0)
embeddings = torch.randn(12, 16, requires_grad=True)
labels = torch.arange(4).repeat_interleave(3)  # 4 classes x 3 samples
S = cosine_similarity(embeddings)
"""
#: What a parameter of a miner or metric is bound to in a generated example, by its name.
BINDINGS = {"S": "S", "labels": "labels", "embeddings": "embeddings", "margin": "0.1"}
KINDS = ("losses", "miners", "metrics", "data sets", "models", "config sections", "command line")


@dataclass
class Entry:
    """One documented item: a heading, the autodoc targets, an example and its output."""

    kind: str
    title: str
    targets: list[str] = field(default_factory=list)
    text: str = ""
    example: str = ""
    output: str = ""
    doctest: bool = False


def run_example(code: str) -> str:
    """Execute ``code`` in a fresh namespace; returns what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<api example>", "exec"), {"__name__": "__api_example__"})
    return out.getvalue()


def _has_doctest(obj: object) -> bool:
    return ">>>" in (inspect.getdoc(obj) or "")


def _show(result: object) -> str:
    """Code that prints ``result`` readably, chosen by its type."""
    if isinstance(result, tuple) and all(isinstance(r, torch.Tensor) for r in result):
        return "for part in result:\n    print(tuple(part.shape), part.dtype, int(part.sum()))"
    if isinstance(result, torch.Tensor):
        return "print(tuple(result.shape), result.dtype, int(result.sum()))"
    if isinstance(result, dict):
        return "print({key: round(value, 4) for key, value in result.items()})"
    if isinstance(result, float):
        return "print(round(result, 4))"
    return "print(result)"


def bound_call(module: str, name: str, obj: object) -> str | None:
    """An example calling ``obj`` with the batch bound by parameter name, or None."""
    params = inspect.signature(obj).parameters.values()
    args = []
    for p in params:
        if p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name not in BINDINGS:
            return None
        args.append(
            f"{p.name}={BINDINGS[p.name]}" if p.kind is p.KEYWORD_ONLY else BINDINGS[p.name]
        )
    call = f"from {module} import {name}\n\n{PRELUDE}result = {name}({', '.join(args)})\n"
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(call, namespace)
    return call + _show(namespace["result"]) + "\n"


def _finish(entry: Entry, obj: object, make_example) -> Entry:
    """Attach the docstring's doctest, or a generated example (run now, its output kept)."""
    if obj is not None and _has_doctest(obj):
        entry.doctest = True
    else:
        entry.example = make_example() or ""
        entry.output = run_example(entry.example) if entry.example else ""
    return entry


def loss_entries() -> list[Entry]:
    from dmlbook.losses import available_losses, get_loss, loss_parameters

    entries, shown = [], set()
    for name in available_losses():
        cls = type(get_loss(name))
        function = getattr(cls, "loss_function", None)
        targets = [f"{cls.__module__}.{cls.__qualname__}"]
        if function is not None:
            targets.append(f"{function.__module__}.{function.__qualname__}")
        shown |= {cls.__name__, getattr(function, "__name__", "")}
        params = ", ".join(f"`{k}={v!r}`" for k, v in loss_parameters(name).items())
        code = (
            f"from dmlbook.losses import get_loss\n\n{PRELUDE}loss = get_loss({name!r})\n"
            "value = loss(embeddings, labels)\nvalue.backward()  # gradients reach the embeddings\n"
            "print(round(value.item(), 4), embeddings.grad.shape)\n"
        )
        entry = Entry(
            "losses", f'`get_loss("{name}")`', targets, f"Hyper-parameters: {params or 'none'}."
        )
        entries.append(_finish(entry, None, lambda code=code: code))
    entries += names_of("dmlbook.losses", "losses", skip=shown, examples=False)
    return entries


def names_of(
    module: str, kind: str, skip: set[str] = frozenset(), examples: bool = True
) -> list[Entry]:
    """One entry per name of ``module.__all__``; with ``examples``, its functions get one."""
    mod = importlib.import_module(module)
    entries = []
    for name in mod.__all__:
        if name in skip:
            continue
        obj = getattr(mod, name)
        entry = Entry(kind, f"`{name}`", [f"{module}.{name}"])
        if examples and inspect.isfunction(obj):
            entry = _finish(entry, obj, lambda name=name, obj=obj: bound_call(module, name, obj))
        entries.append(entry)
    return entries


def _is_model(obj: object) -> bool:
    """An ``nn.Module`` class, or a function whose return annotation names a dmlbook model."""
    if isinstance(obj, type):
        return issubclass(obj, torch.nn.Module)
    if not inspect.isfunction(obj):
        return False
    from dmlbook import models

    returns = str(inspect.signature(obj).return_annotation)
    return returns in models.__all__ and _is_model(getattr(models, returns))


def _defaults_only(obj: object) -> bool:
    params = inspect.signature(obj).parameters.values()
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params
    )


def model_entries() -> list[Entry]:
    from dmlbook import models

    entries = []
    for name in models.__all__:
        obj = getattr(models, name)
        entry = Entry("models", f"`{name}`", [f"dmlbook.models.{name}"])
        if _is_model(obj):
            code = (
                f"from dmlbook.models import {name}\n\nmodel = {name}()\n"
                'print(type(model).__name__, sum(p.numel() for p in model.parameters()), "parameters")\n'
            )
            entry = _finish(
                entry, obj, lambda code=code, obj=obj: code if _defaults_only(obj) else None
            )
        entries.append(entry)
    return entries


def dataset_entries() -> list[Entry]:
    from dmlbook.data import available_datasets

    entries = []
    for name in available_datasets():
        code = (
            "from dmlbook.data import dataset_info\n\n"
            f'info = dataset_info({name!r})\nprint(info.summary)\nprint("splits:", info.splits)\n'
            'print("options:", sorted(info.options() or {}))\n'
        )
        entries.append(
            _finish(
                Entry("data sets", f'`load_dataset("{name}", split)`'), None, lambda code=code: code
            )
        )
    return entries + names_of("dmlbook.data", "data sets", examples=False)


def config_entries() -> list[Entry]:
    from dmlbook.engine import config_sections

    entries = []
    for name in config_sections.__all__:
        obj = getattr(config_sections, name)
        entry = Entry("config sections", f"`{name}`", [f"dmlbook.engine.config_sections.{name}"])
        if dataclasses.is_dataclass(obj):
            code = f"from dmlbook.engine.config_sections import {name}\n\nprint({name}())\n"
            entry = _finish(entry, None, lambda code=code: code)
        entries.append(entry)
    return entries + [
        Entry("config sections", "`load_config`", ["dmlbook.engine.config.load_config"])
    ]


def cli_entries() -> list[Entry]:
    from dmlbook.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    entries = []
    for command in [None, *commands.choices]:
        argv = [command, "--help"] if command else ["--help"]
        code = (
            "from dmlbook.cli import main\n\ntry:\n"
            f"    main({argv!r})  # the shell's `dmlbook {' '.join(argv)}`\nexcept SystemExit:\n    pass\n"
        )
        title = f"`dmlbook {command}`" if command else "`dmlbook`"
        entries.append(_finish(Entry("command line", title), None, lambda code=code: code))
    return entries


def entries() -> list[Entry]:
    """Every entry of the page, in its order."""
    return (
        loss_entries()
        + names_of("dmlbook.mining", "miners")
        + names_of("dmlbook.evaluate", "metrics")
        + dataset_entries()
        + model_entries()
        + config_entries()
        + cli_entries()
    )


def missing_examples(found: list[Entry]) -> list[str]:
    """Entries of a kind that must have an example but have none."""
    needs = []
    for e in found:
        if e.example or e.doctest or not e.targets:
            continue
        obj = _resolve(e.targets[0])
        if (
            e.kind in ("miners", "metrics")
            and inspect.isfunction(obj)
            or e.kind == "models"
            and _is_model(obj)
        ):
            needs.append(f"{e.kind}: {e.title}")
    return needs


def _resolve(target: str) -> object:
    module, _, name = target.rpartition(".")
    return getattr(importlib.import_module(module), name)


def documented_at(target: str) -> str:
    """Where autodoc finds a data entry's ``#:`` comment: the module that assigns it.

    A constant re-exported by a package (``dmlbook.mining.TRIPLET_KINDS``) has its comment in a
    submodule (``dmlbook.mining.triplets``); documented under the package, autodoc finds no
    comment and shows the docstring of the value's type (``dict``'s, which is not valid reST).
    """
    from sphinx.pycode import ModuleAnalyzer

    module, _, name = target.rpartition(".")
    obj = _resolve(target)
    for modname in sorted(m for m in sys.modules if m == module or m.startswith(module + ".")):
        if getattr(sys.modules[modname], name, None) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
        except Exception:  # noqa: BLE001 - a module without source: try the next
            continue
        if ("", name) in docs:
            return f"{modname}.{name}"
    return target


def docstring_text(found: list[Entry]) -> str:
    """The docstrings the page renders: the text its links come from (``make check-book``)."""
    return "\n".join(inspect.getdoc(_resolve(t)) or "" for e in found for t in e.targets)


def page(found: list[Entry] | None = None) -> str:
    """The MyST page."""
    found = entries() if found is None else found
    lines = [
        "# API reference",
        "",
        "Generated from the package's docstrings when the book is built (`tools/api_reference.py`):",
        "every loss of the registry, every miner, metric, data set and model, the engine's config",
        "sections and the command line. Each example was run when this page was made; its output is",
        "shown under it.",
    ]
    for kind in KINDS:
        lines += ["", f"## {kind[0].upper()}{kind[1:]}"]
        for e in (e for e in found if e.kind == kind):
            lines += ["", f"### {e.title}", ""]
            if e.text:
                lines += [e.text, ""]
            for target in e.targets:
                obj = _resolve(target)
                directive = "autoclass" if isinstance(obj, type) else "autofunction"
                if not callable(obj):
                    directive, target = "autodata", documented_at(target)
                lines += ["```{eval-rst}", f".. {directive}:: {target}", "```", ""]
            if e.example:
                lines += ["```python", e.example.rstrip(), "```", ""]
                lines += ["```text", e.output.rstrip() or "(no output)", "```"]
    return "\n".join(lines) + "\n"
