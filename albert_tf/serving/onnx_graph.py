"""Rewrites of tf2onnx's ALBERT graph into fewer, larger ONNX operators (standard ONNX only).

tf2onnx writes what TensorFlow computes op by op: every layer norm as ten nodes (two
``GlobalAveragePool`` for the moments, ``Sqrt``, ``Reciprocal``, ...), and every ``Reshape`` of
the dynamic length L with its target computed at run time from ``Shape``, ``Cast``, ``Slice`` and
``Concat`` nodes. ONNX Runtime's own fusions do not recognise either (its layer-norm fusion
looks for ``ReduceMean``), and neither does onnxruntime.transformers' optimizer (measured on
albert base with onnxruntime 1.32.0: ``model_type`` "bert", "bert_tf" and "bert_keras" fuse the
GELU only, which the session fuses anyway; the attention and embedding fusions find none of
their patterns). ``optimize`` therefore rewrites the graph itself:

- ``static_reshapes``: a ``Reshape`` whose output shape ONNX's shape inference (with data
  propagation) knows up to one dimension gets that shape as a constant, the unknown dimension as
  -1; the nodes that computed the old target are then unused and removed;
- ``fuse_layer_norms``: the ten-node layer norm becomes one ``LayerNormalization`` (opset 17),
  which ONNX Runtime's session then fuses further where its own patterns match;
- ``unflatten_matmuls``: each dense layer's product takes its [1, L, K] input directly, without
  the ``Reshape`` to [L, K] before it and back after it;
- ``fuse_parallel_matmuls``: the attention's query, key and value products of one input become
  one product with the three weights side by side (and one bias ``Add``), then a ``Split``: one
  larger matrix product instead of three, and, in the int8 file, one quantization of the input
  instead of three.

ALBERT's layers share one set of weights: the twelve layers' nodes read the same initializers,
and each rewrite keeps them shared (a fused node takes the same gamma and beta names). The
result uses standard operators only, so the file stays an ONNX model that any engine runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper


def _consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    """{tensor name: the nodes that read it}."""
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    return readers


def _dims(value_info: Any) -> list[int | None]:
    """The dimensions of a tensor's inferred type, None for one not known as a number."""
    return [dim.dim_value if dim.HasField("dim_value") else None
            for dim in value_info.type.tensor_type.shape.dim]


def remove_unused_nodes(graph: onnx.GraphProto) -> int:
    """Removes every node none of whose outputs is read (by a node or as a graph output), until
    none is left; returns how many were removed. Initializers no node reads are removed too."""
    removed = 0
    while True:
        read = {name for node in graph.node for name in node.input}
        read |= {output.name for output in graph.output}
        unused = [node for node in graph.node if not any(name in read for name in node.output)]
        if not unused:
            break
        for node in unused:
            graph.node.remove(node)
        removed += len(unused)
    read = {name for node in graph.node for name in node.input}
    for tensor in [tensor for tensor in graph.initializer if tensor.name not in read]:
        graph.initializer.remove(tensor)
    return removed


def static_reshapes(model: onnx.ModelProto) -> int:
    """Gives every ``Reshape`` whose output shape is inferred up to at most one dimension a
    constant target ([1, -1, 768] for [1, L, 768]); returns how many were changed. The inference
    is ONNX's own (``infer_shapes`` with ``data_prop``), which follows the shape arithmetic."""
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True).graph
    shapes = {info.name: _dims(info) for info in inferred.value_info}
    changed = 0
    for index, node in enumerate(model.graph.node):
        dims = shapes.get(node.output[0]) if node.op_type == "Reshape" else None
        if not dims or sum(dim is None for dim in dims) > 1 or 0 in dims:
            continue
        target = np.array([-1 if dim is None else dim for dim in dims], np.int64)
        name = f"{node.output[0]}/static_shape"
        model.graph.initializer.append(numpy_helper.from_array(target, name))
        node.input[1] = name
        changed += 1
    return changed


def _only_reader(readers: dict, name: str, op_type: str) -> onnx.NodeProto | None:
    """The one node reading ``name``, if it is one of ``op_type``."""
    nodes = readers.get(name, [])
    return nodes[0] if len(nodes) == 1 and nodes[0].op_type == op_type else None


def _other_input(node: onnx.NodeProto, name: str) -> str:
    """The input of a two-input node that is not ``name``."""
    first, second = node.input
    return second if first == name else first


def _match_layer_norm(node: onnx.NodeProto, readers: dict,
                      constants: dict[str, np.ndarray]) -> tuple[list, str, str, str, float] | None:
    """(the pattern's nodes, x, gamma, beta, epsilon) if ``node`` (a ``GlobalAveragePool``) is
    the mean of tf2onnx's layer norm over the last axis of x:
    d = x - mean(x); y = d * (gamma / sqrt(mean(d * d) + epsilon)) + beta."""
    x, mean = node.input[0], node.output[0]
    sub = _only_reader(readers, mean, "Sub")
    if sub is None or list(sub.input) != [x, mean]:
        return None
    centred = sub.output[0]
    square = next((n for n in readers.get(centred, []) if n.op_type == "Mul"
                   and list(n.input) == [centred, centred]), None)
    scale = next((n for n in readers.get(centred, []) if n.op_type == "Mul" and n is not square),
                 None)
    if square is None or scale is None or len(readers[centred]) != 3:
        return None
    variance = _only_reader(readers, square.output[0], "GlobalAveragePool")
    shifted = variance and _only_reader(readers, variance.output[0], "Add")
    root = shifted and _only_reader(readers, shifted.output[0], "Sqrt")
    inverse = root and _only_reader(readers, root.output[0], "Reciprocal")
    times_gamma = inverse and _only_reader(readers, inverse.output[0], "Mul")
    if times_gamma is None or _other_input(scale, centred) != times_gamma.output[0]:
        return None
    plus_beta = _only_reader(readers, scale.output[0], "Add")
    epsilon = _other_input(shifted, variance.output[0])
    gamma = _other_input(times_gamma, inverse.output[0])
    beta = plus_beta and _other_input(plus_beta, scale.output[0])
    if beta is None or not all(name in constants for name in (epsilon, gamma, beta)):
        return None
    if constants[epsilon].size != 1 or constants[gamma].ndim != 1 or constants[beta].ndim != 1:
        return None
    nodes = [node, sub, square, variance, shifted, root, inverse, times_gamma, scale, plus_beta]
    return nodes, x, gamma, beta, float(constants[epsilon].reshape(()))


def fuse_layer_norms(model: onnx.ModelProto) -> int:
    """Replaces each layer norm tf2onnx wrote over the last axis of a [1, L, H] tensor by one
    ``LayerNormalization`` (axis -1, the same gamma, beta and epsilon); returns how many. A
    ``GlobalAveragePool`` means over the axes after the second, the last one for rank 3: only
    inputs inferred to have rank 3 are taken."""
    graph = model.graph
    ranks = {info.name: len(_dims(info)) for info in
             onnx.shape_inference.infer_shapes(model).graph.value_info}
    constants = {tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer}
    readers = _consumers(graph)
    fused = 0
    for node in list(graph.node):
        if node.op_type != "GlobalAveragePool" or node not in graph.node:
            continue
        match = _match_layer_norm(node, readers, constants)
        if match is None or ranks.get(node.input[0]) != 3:
            continue
        nodes, x, gamma, beta, epsilon = match
        last = nodes[-1]
        layer_norm = helper.make_node("LayerNormalization", [x, gamma, beta], [last.output[0]],
                                      name=f"{last.name}/LayerNormalization", axis=-1,
                                      epsilon=epsilon)
        graph.node.insert(list(graph.node).index(last), layer_norm)
        for pattern_node in nodes:
            graph.node.remove(pattern_node)
        fused += 1
    return fused


def _constant_target(node: onnx.NodeProto, constants: dict[str, np.ndarray]) -> list[int] | None:
    """A ``Reshape``'s target when it is a constant, else None."""
    target = constants.get(node.input[1]) if node.op_type == "Reshape" else None
    return None if target is None else target.tolist()


def unflatten_matmuls(model: onnx.ModelProto) -> int:
    """Feeds each dense layer's [1, L, K] input to its ``MatMul`` directly instead of through a
    ``Reshape`` to [L, K] (ONNX's MatMul broadcasts over the leading axes), and drops the
    ``Reshape`` back to [1, L, N] after it (and after its bias ``Add``), which is then a copy of
    its input's shape; returns how many products were changed. Taken only where the products'
    output (and bias sum) has no other reader, so that no other node sees another shape."""
    graph = model.graph
    shapes = {info.name: _dims(info) for info in
              onnx.shape_inference.infer_shapes(model).graph.value_info}
    constants = {tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer}
    producers = {name: node for node in graph.node for name in node.output}
    readers = _consumers(graph)
    changed = 0
    for matmul in [node for node in graph.node if node.op_type == "MatMul"]:
        flatten = producers.get(matmul.input[0])
        weight = constants.get(matmul.input[1])
        if flatten is None or weight is None or weight.ndim != 2:
            continue
        source = shapes.get(flatten.input[0], [])
        if (_constant_target(flatten, constants) != [-1, weight.shape[0]] or len(source) != 3
                or source[0] != 1 or source[2] != weight.shape[0]):
            continue
        last = matmul
        bias = _only_reader(readers, matmul.output[0], "Add")
        if bias is not None and constants.get(_other_input(bias, matmul.output[0]),
                                              np.empty([0, 0])).ndim == 1:
            last = bias
        restore = _only_reader(readers, last.output[0], "Reshape")
        target = restore and _constant_target(restore, constants)
        if not target or target[:2] != [1, -1]:
            continue
        matmul.input[0] = flatten.input[0]
        if target == [1, -1, weight.shape[1]]:
            last.output[0] = restore.output[0]
            graph.node.remove(restore)
        changed += 1
    return changed


def fuse_parallel_matmuls(model: onnx.ModelProto) -> int:
    """Computes the products of one input with several weights (the attention's query, key and
    value) as one ``MatMul`` with the weights side by side, its bias ``Add`` with the biases side
    by side, and a ``Split`` into the former outputs; returns how many groups were fused. The
    joined weights are stored once per set of weights, which ALBERT's layers share (the
    classifier's last layer computes its query for the first token only, so it joins its key and
    value alone: a second joined weight)."""
    graph = model.graph
    constants = {tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer}
    readers = _consumers(graph)
    groups: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        weight = constants.get(node.input[1]) if node.op_type == "MatMul" else None
        if weight is not None and weight.ndim == 2 and node.input[0] not in constants:
            groups.setdefault(node.input[0], []).append(node)
    joined: dict[tuple[str, ...], str] = {}
    fused = 0
    for source, matmuls in groups.items():
        if len(matmuls) < 2 or len({constants[m.input[1]].shape[0] for m in matmuls}) != 1:
            continue
        # One order (by weight name) for every group, so that the groups of the same weights
        # share one joined weight whatever order the graph lists their products in.
        matmuls.sort(key=lambda node: node.input[1])
        biases = [_only_reader(readers, m.output[0], "Add") for m in matmuls]
        bias_names = [bias and _other_input(bias, m.output[0]) for bias, m in zip(biases, matmuls)]
        with_bias = all(name in constants and constants[name].ndim == 1 for name in bias_names)
        names = tuple(m.input[1] for m in matmuls) + (tuple(bias_names) if with_bias else ())
        if names not in joined:
            joined[names] = f"{matmuls[0].input[1]}/joined_{len(joined)}"
            weight = np.concatenate([constants[m.input[1]] for m in matmuls], axis=1)
            graph.initializer.append(numpy_helper.from_array(weight, joined[names]))
            if with_bias:
                bias = np.concatenate([constants[name] for name in bias_names])
                graph.initializer.append(numpy_helper.from_array(bias, joined[names] + "/bias"))
            widths = np.array([constants[m.input[1]].shape[1] for m in matmuls], np.int64)
            graph.initializer.append(numpy_helper.from_array(widths, joined[names] + "/widths"))
        ends = biases if with_bias else matmuls
        product = f"{matmuls[0].output[0]}/joined"
        new_nodes = [helper.make_node("MatMul", [source, joined[names]], [product],
                                      name=f"{matmuls[0].name}/joined")]
        if with_bias:
            new_nodes.append(helper.make_node("Add", [product, joined[names] + "/bias"],
                                              [product + "/bias"], name=f"{matmuls[0].name}/bias"))
        new_nodes.append(helper.make_node("Split", [new_nodes[-1].output[0],
                                                    joined[names] + "/widths"],
                                          [end.output[0] for end in ends], axis=-1,
                                          name=f"{matmuls[0].name}/split"))
        position = min(list(graph.node).index(m) for m in matmuls)
        for node in reversed(new_nodes):
            graph.node.insert(position, node)
        for node in [*matmuls, *(biases if with_bias else [])]:
            graph.node.remove(node)
        fused += 1
    return fused


def optimize(model: onnx.ModelProto) -> dict[str, int]:
    """Rewrites ``model`` (tf2onnx's export of an albert_tf model) in place, as the module
    docstring says, and checks the result; returns {rewrite: count}."""
    counts = {"static_reshapes": static_reshapes(model)}
    counts["removed_nodes"] = remove_unused_nodes(model.graph)
    counts["layer_norms"] = fuse_layer_norms(model)
    counts["unflattened_matmuls"] = unflatten_matmuls(model)
    counts["joined_matmuls"] = fuse_parallel_matmuls(model)
    counts["removed_nodes"] += remove_unused_nodes(model.graph)
    onnx.checker.check_model(model)
    return counts
