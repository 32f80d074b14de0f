"""The plain data that crosses between a graded submission and the grader: JSON, never pickles.

A submission's answers reach the grader only as values this module can write: ``None``,
booleans, integers, floats (``nan`` and infinities included), strings, lists, tuples, dicts,
torch tensors and numpy arrays (their raw bytes, dtype and shape; ``requires_grad`` of a
tensor), torch dtypes, SymPy expressions and matrices (a tree of SymPy class names and their
arguments) and, for anything else, a *handle* (``{"$": "handle", "id": 3}``: an object that stays
in the submission's kernel, which the grader may ask for an attribute or call). ``decode`` builds
only those types: it never imports a module the message names, never unpickles and never
evaluates text, so that nothing a submission sends runs code in the grader's process (a SymPy
class is looked up by name among SymPy's own classes, and only a subclass of ``sympy.Basic`` is
built).

The same file runs on both sides: the grader imports it, and the kernel's answering module
(``coursework_answer``, bound read-only into the sandbox) imports it there. It needs only the
standard library; torch, numpy and SymPy are imported when a value of theirs is met. Tested by
``tests/test_coursework_remote.py``.
"""

from __future__ import annotations

import base64
import json
import math
import sys
from typing import Any

MAX_DEPTH = 100
# Reply size the grader accepts from a kernel (a larger one fails the call that asked for it).
MAX_MESSAGE_BYTES = 256 * 2**20
_NUMERIC = {
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
}


class Unencodable(TypeError):
    """A value that is not plain data (the kernel side turns it into a handle)."""


def _float(x: float) -> Any:
    return x if math.isfinite(x) else {"$": "float", "v": repr(x)}


def _array_fields(array) -> dict:
    import numpy as np

    name = str(array.dtype)
    if name not in _NUMERIC:
        raise Unencodable(f"an array of dtype {name}")
    data = np.ascontiguousarray(array).tobytes()
    return {"dtype": name, "shape": list(array.shape), "data": base64.b64encode(data).decode()}


def _sympy_tree(expr, depth: int) -> Any:
    import sympy as sp

    if depth > MAX_DEPTH:
        raise Unencodable("a SymPy expression nested too deeply")
    if isinstance(expr, sp.Symbol) and type(expr) is sp.Symbol:
        assume = {k: v for k, v in expr.assumptions0.items() if v is not None}
        return {"s": "Symbol", "name": expr.name, "assume": assume}
    if isinstance(expr, sp.Integer):
        return {"s": "Integer", "v": str(int(expr))}
    if isinstance(expr, sp.Rational):
        return {"s": "Rational", "p": str(expr.p), "q": str(expr.q)}
    if isinstance(expr, sp.Float):
        return {"s": "Float", "v": str(expr), "prec": expr._prec}
    singleton = type(expr).__name__
    if getattr(sp.S, singleton, None) is expr:
        return {"s": "S", "name": singleton}
    if isinstance(expr, sp.MatrixBase):
        items = [_sympy_tree(e, depth + 1) for e in expr]
        return {"s": "Matrix", "shape": list(expr.shape), "items": items}
    if isinstance(expr, sp.core.function.AppliedUndef):
        args = [_sympy_tree(a, depth + 1) for a in expr.args]
        return {"s": "Undef", "name": expr.func.__name__, "args": args}
    cls = type(expr)
    if getattr(sp, cls.__name__, None) is not cls and cls.__name__ not in _EXTRA_SYMPY:
        raise Unencodable(f"the SymPy class {cls.__name__}")
    return {"s": cls.__name__, "args": [_sympy_tree(a, depth + 1) for a in expr.args]}


_EXTRA_SYMPY = ("ExprCondPair", "Tuple", "BooleanTrue", "BooleanFalse")


def encode(value: Any, handle=None, depth: int = 0) -> Any:
    """``value`` as JSON-ready data; ``handle(obj)`` gives an id for what is not plain data.

    Without ``handle`` (the grader's side) such a value raises ``Unencodable``.
    """
    if depth > MAX_DEPTH:
        raise Unencodable("a value nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, complex):
        return {"$": "complex", "re": _float(value.real), "im": _float(value.imag)}
    if isinstance(value, list):
        return [encode(v, handle, depth + 1) for v in value]
    if isinstance(value, tuple):  # torch.return_types (values, indices) included
        return {"$": "tuple", "items": [encode(v, handle, depth + 1) for v in value]}
    if isinstance(value, dict):
        items = [
            [encode(k, handle, depth + 1), encode(v, handle, depth + 1)] for k, v in value.items()
        ]
        return {"$": "dict", "items": items}
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.is_quantized:
            raise Unencodable("a sparse or quantized tensor")
        out = {"$": "tensor", "grad": bool(value.requires_grad)}
        return out | _array_fields(value.detach().cpu().resolve_conj().resolve_neg().numpy())
    if torch is not None and isinstance(value, torch.dtype):
        return {"$": "dtype", "name": str(value).removeprefix("torch.")}
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return {"$": "ndarray"} | _array_fields(value)
    if np is not None and isinstance(value, np.generic):
        return encode(value.item(), handle, depth)
    sp = sys.modules.get("sympy")
    if sp is not None and isinstance(value, (sp.Basic, sp.MatrixBase)):
        try:
            return {"$": "sympy", "tree": _sympy_tree(value, 0)}
        except Unencodable:
            if handle is None:
                raise
    if handle is None:
        raise Unencodable(f"a {type(value).__name__}")
    return {"$": "handle", "id": handle(value), "type": type(value).__name__}


def dumps(value: Any, handle=None) -> str:
    return json.dumps(encode(value, handle), allow_nan=False, separators=(",", ":"))


def _array(data: dict):
    import numpy as np

    if data.get("dtype") not in _NUMERIC:
        raise ValueError(f"not a plain array dtype: {data.get('dtype')!r}")
    shape = [int(n) for n in data["shape"]]
    raw = base64.b64decode(data["data"], validate=True)
    array = np.frombuffer(raw, dtype=data["dtype"]).copy()
    return array.reshape(shape)


def _sympy(tree: Any, depth: int = 0):
    import sympy as sp

    if depth > MAX_DEPTH or not isinstance(tree, dict):
        raise ValueError("not a SymPy tree")
    kind = tree.get("s")
    if kind == "Symbol":
        assume = {str(k): bool(v) for k, v in dict(tree.get("assume", {})).items()}
        return sp.Symbol(str(tree["name"]), **assume)
    if kind == "Integer":
        return sp.Integer(int(str(tree["v"])))
    if kind == "Rational":
        return sp.Rational(int(str(tree["p"])), int(str(tree["q"])))
    if kind == "Float":
        return sp.Float(str(tree["v"]), precision=int(tree["prec"]))
    if kind == "S":
        value = getattr(sp.S, str(tree["name"]), None)
        if not isinstance(value, sp.Basic):
            raise ValueError(f"not a SymPy singleton: {tree['name']!r}")
        return value
    if kind == "Matrix":
        rows, cols = (int(n) for n in tree["shape"])
        return sp.Matrix(rows, cols, [_sympy(e, depth + 1) for e in tree["items"]])
    args = [_sympy(a, depth + 1) for a in tree.get("args", [])]
    if kind == "Undef":
        return sp.Function(str(tree["name"]))(*args)
    cls = getattr(sp, str(kind), None)
    if cls is None and kind in _EXTRA_SYMPY:
        from sympy.functions.elementary.piecewise import ExprCondPair

        cls = {"ExprCondPair": ExprCondPair}.get(kind, getattr(sp, str(kind), None))
    if not (isinstance(cls, type) and issubclass(cls, sp.Basic)):
        raise ValueError(f"not a SymPy class: {kind!r}")
    return cls(*args)


def decode(data: Any, handle=None, depth: int = 0) -> Any:
    """Build the value ``encode`` wrote; ``handle(id, type)`` builds a handle's stand-in.

    Raises ``ValueError`` on anything that is not such data.
    """
    if depth > MAX_DEPTH:
        raise ValueError("a value nested too deeply")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(v, handle, depth + 1) for v in data]
    if not isinstance(data, dict):
        raise ValueError(f"not plain data: {type(data).__name__}")
    kind = data.get("$")
    if kind == "float":
        if data["v"] not in ("nan", "inf", "-inf"):
            raise ValueError(f"not a float: {data['v']!r}")
        return float(data["v"])
    if kind == "complex":
        return complex(decode(data["re"]), decode(data["im"]))
    if kind == "tuple":
        return tuple(decode(v, handle, depth + 1) for v in data["items"])
    if kind == "dict":
        return {
            decode(k, handle, depth + 1): decode(v, handle, depth + 1) for k, v in data["items"]
        }
    if kind == "tensor":
        import torch

        tensor = torch.from_numpy(_array(data))
        return (
            tensor.requires_grad_() if data.get("grad") and tensor.is_floating_point() else tensor
        )
    if kind == "ndarray":
        return _array(data)
    if kind == "dtype":
        import torch

        dtype = getattr(torch, str(data["name"]), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"not a torch dtype: {data['name']!r}")
        return dtype
    if kind == "sympy":
        return _sympy(data["tree"])
    if kind == "handle":
        if handle is None:
            raise ValueError("a handle where plain data was expected")
        return handle(int(data["id"]), str(data.get("type", "object")))
    raise ValueError(f"not plain data: {kind!r}")


def loads(text: str, handle=None) -> Any:
    if len(text) > MAX_MESSAGE_BYTES:
        raise ValueError(f"a message of {len(text)} bytes (at most {MAX_MESSAGE_BYTES})")
    return decode(json.loads(text), handle)
