"""The submission's side of grading: answer the grader's requests, in the sandboxed kernel.

Bound read-only into the sandbox beside ``coursework_channel``. The grader (its driver,
``coursework_grade``) sends one request at a time as a kernel cell,
``__import__("coursework_answer").serve('<json>')``, and reads one reply, a line of plain data
(``coursework_channel``) after ``MARK`` on the kernel's standard output. Requests:

* ``describe``: for names the tests use, whether the notebook defines each as a function or as
  a value (and the value);
* ``call``: call a function the notebook defines (or a handle) on the test's arguments; the
  reply holds the result, the arguments the call changed in place (so that a test can check
  that an answer leaves its inputs alone) and which result tensors autograd reaches;
* ``vjp``: the gradient of an earlier call's result tensors, given the gradients of the
  grader's loss in them (``torch.autograd.grad``), so that ``.backward()`` in the grader's
  test reaches through the student's function;
* ``getattr``: an attribute of a handle (``model.state_dict``, then a ``call`` of it).

Nothing here is trusted: the submission can replace this module, print a reply of its own or
intercept the request. Whatever the grader reads is only ever taken as the submission's answer,
as if its function had returned it: a test's inputs, expected values and comparisons never
enter the kernel.
"""

from __future__ import annotations

import functools
import json
import sys
import traceback
import types

import coursework_channel as channel

MARK = "\x1edmlbook-answer:"
_handles: dict[int, object] = {}
_calls: dict[int, tuple[list, list]] = {}


def _handle(obj: object) -> int:
    for key, value in _handles.items():
        if value is obj:
            return key
    key = len(_handles) + 1
    _handles[key] = obj
    return key


def _namespace() -> dict:
    ip = sys.modules.get("IPython")
    shell = ip.get_ipython() if ip is not None else None
    return shell.user_ns if shell is not None else sys.modules["__main__"].__dict__


def tensors_in(value) -> list:
    """The tensors of a (nested) value, in a fixed order (both sides walk the same structure)."""
    torch = sys.modules.get("torch")
    out = []
    if torch is not None and isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            out += tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            out += tensors_in(v)
    return out


_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)


def _describe(request: dict) -> dict:
    ns, found = _namespace(), {}
    for name in request["names"]:
        if name not in ns or name.startswith("__"):
            found[name] = {"kind": "missing"}
            continue
        value = ns[name]
        if isinstance(value, _FUNCTIONS):  # other callables (a model) come back as handles
            found[name] = {"kind": "function"}
        else:
            found[name] = {"kind": "value", "value": channel.encode(value, _handle)}
    return {"names": found}


def _call(request: dict) -> dict:
    import contextlib

    target = request["target"]
    function = _namespace()[target["name"]] if "name" in target else _handles[target["handle"]]
    args = channel.decode(request["args"])
    kwargs = channel.decode(request["kwargs"])
    inputs = tensors_in([args, kwargs])
    before = [t.detach().clone() for t in inputs]
    torch = sys.modules.get("torch")
    mode = contextlib.nullcontext()
    if torch is not None and request.get("inference"):
        mode = torch.inference_mode()
    elif torch is not None:
        mode = torch.set_grad_enabled(bool(request.get("grad", True)))
    with mode:
        result = function(*args, **kwargs)
    changed = [
        [i, channel.encode(t.detach())]
        for i, (t, old) in enumerate(zip(inputs, before, strict=True))
        if t.shape != old.shape or t.dtype != old.dtype or not _same(t.detach(), old)
    ]
    outputs = [t for t in tensors_in(result) if t.requires_grad]
    call = len(_calls) + 1
    _calls[call] = ([t for t in inputs if t.requires_grad], outputs)
    value = channel.encode(result, _handle)
    return {"value": value, "changed": changed, "call": call}


def _same(a, b) -> bool:
    return a.shape == b.shape and a.numpy().tobytes() == b.numpy().tobytes()


def _vjp(request: dict) -> dict:
    import torch

    inputs, outputs = _calls[int(request["call"])]
    grads = [channel.decode(g) for g in request["grads"]]
    pairs = [(o, g) for o, g in zip(outputs, grads, strict=True) if g is not None]
    if not inputs or not pairs:
        return {"grads": [None] * len(inputs)}
    got = torch.autograd.grad(
        [o for o, _ in pairs],
        inputs,
        [g.to(o.dtype) for o, g in pairs],
        allow_unused=True,
        retain_graph=True,
    )
    return {"grads": [None if g is None else channel.encode(g.detach()) for g in got]}


def _getattr(request: dict) -> dict:
    value = getattr(_handles[int(request["handle"])], str(request["name"]))
    return {"value": channel.encode(value, _handle)}


_OPS = {"describe": _describe, "call": _call, "vjp": _vjp, "getattr": _getattr}


def serve(text: str) -> None:
    """Answer one request (JSON); write ``MARK`` and the reply as one line."""
    try:
        request = json.loads(text)
        reply = {"ok": True} | _OPS[request["op"]](request)
    except BaseException as err:  # the student's code raised: that is its answer
        tail = traceback.format_exception(type(err), err, err.__traceback__)[-3:]
        reply = {"ok": False, "error": f"{type(err).__name__}: {err}"[:2000]}
        reply["traceback"] = "".join(tail)[-3000:]
    try:
        line = json.dumps(reply, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as err:
        line = json.dumps({"ok": False, "error": f"the answer is not plain data: {err}"[:2000]})
    sys.stdout.write("\n" + MARK + line + "\n")
    sys.stdout.flush()
