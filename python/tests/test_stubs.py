"""The type stubs (tapewise/_tapewise.pyi) against the module: the Literal types name exactly what
the module takes (dtypes, nodes, math modes, VJP paths), and every node method takes and returns
NodeId, so that a type checker catches a misspelt name or a float where a node id belongs."""

import ast
import typing
from pathlib import Path

import numpy as np
import pytest

import tapewise
from tapewise import _tapewise

STUB = ast.parse((Path(tapewise.__file__).parent / "_tapewise.pyi").read_text())


def aliases() -> dict:
    """{name: the expression} of every `Name: TypeAlias = ...` in the stub."""
    return {node.target.id: node.value for node in STUB.body
            if isinstance(node, ast.AnnAssign) and ast.unparse(node.annotation) == "TypeAlias"}


def literal_values(name: str) -> list:
    expression = aliases()[name]
    assert isinstance(expression, ast.Subscript) and ast.unparse(expression.value) == "Literal", ast.unparse(expression)
    elements = expression.slice.elts if isinstance(expression.slice, ast.Tuple) else [expression.slice]
    return [ast.literal_eval(element) for element in elements]


def stub_methods(class_name: str) -> dict:
    cls = next(node for node in STUB.body if isinstance(node, ast.ClassDef) and node.name == class_name)
    return {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}


def test_the_literal_types_name_what_the_module_takes():
    assert literal_values("DTypeName") == list(_tapewise.DTYPE_CODES)
    assert literal_values("OpName") == list(tapewise.NODE_NAMES)
    assert sorted(literal_values("MathMode")) == ["aten", "exact"] == sorted({tapewise.cpu().math, "aten"})
    assert literal_values("VjpPath") == ["fused", "staged"]
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf([1.0, 2.0])
    for path in literal_values("VjpPath"):
        tape.backward(x, path=path)
    with pytest.raises(tapewise.InvalidArgumentError, match="is not \"fused\" or \"staged\""):
        tape.backward(x, path="fast")
    for spelling in literal_values("NumpyDTypeSpelling"):
        assert tape.dtype(tape.leaf([1.0], dtype=spelling)) == np.dtype(spelling).name


def test_node_methods_take_and_return_node_ids():
    # What the node methods take: a Node, or its int id; what they return: a Node.
    assert ast.unparse(aliases()["NodeId"]) == "Union['Node', int]"
    methods = stub_methods("Tape")
    for name, arity, scalars in tapewise.ops():
        method = methods[name]
        assert ast.unparse(method.returns) == "Node", name
        parameters = [a for a in method.args.args if a.arg != "self"]
        assert [ast.unparse(a.annotation) for a in parameters] == ["NodeId"] * arity + ["float"] * len(scalars), name
    assert ast.unparse(methods["leaf"].returns) == ast.unparse(methods["apply"].returns) == "Node"
    assert ast.unparse(methods["dtype"].returns) == "DTypeName"
    for backward in ("backward", "backward_dense"):
        annotations = {a.arg: ast.unparse(a.annotation) for a in methods[backward].args.args if a.annotation}
        assert annotations["out"] == "NodeId" and annotations["path"] == "VjpPath"
        assert annotations["wanted"] == "Sequence[NodeId] | None"
    gradients = stub_methods("Gradients")
    for name in ("__getitem__", "get", "buffer", "host", "__contains__"):
        assert ast.unparse(gradients[name].args.args[1].annotation) == "NodeId", name
    backend = stub_methods("Backend")
    assert ast.unparse(backend["math"].returns) == "MathMode"
    assert typing.get_args(typing.get_type_hints(tapewise.cuda)["math"]) == ("aten", "exact")
