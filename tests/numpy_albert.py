"""An independent NumPy implementation of the reference ALBERT forward pass and its MLM and SOP
heads.

Weights are a dict keyed by the reference TF1 variable names, so the same function
checks both the Keras math and the checkpoint name mapping.
"""

from __future__ import annotations

import numpy as np


def layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def dense(w, prefix, x, act=None):
    y = x @ w[prefix + "/kernel"] + w[prefix + "/bias"]
    return act(y) if act else y


ACTIVATIONS = {"gelu": gelu, "relu": lambda x: np.maximum(x, 0.0), "tanh": np.tanh}


def block_scopes(cfg, layer, inner):
    """(attention scope, FFN scope) of block ``inner`` of ``layer``: the reference's
    group_{int(l/L*G)} under cross_layer_sharing "all"; otherwise a layer's own part is under
    group_{layer} and a shared part under group_{first layer of the group}."""
    layers, groups = cfg.num_hidden_layers, cfg.num_hidden_groups
    group = int(layer / layers * groups)
    sharing = getattr(cfg, "cross_layer_sharing", "all")
    first = min(n for n in range(layers) if int(n / layers * groups) == group)
    attention = {"all": group, "attention": first}.get(sharing, layer)
    ffn = {"all": group, "ffn": first}.get(sharing, layer)
    scope = "bert/encoder/transformer/group_{}/inner_group_" + str(inner)
    return scope.format(attention), scope.format(ffn)


def block(w, scopes, x, mask, heads, act):
    """One attention + FFN block; ``scopes`` = (attention scope, FFN scope) as block_scopes gives;
    x [B,S,H], mask [B,S]."""
    p, f = scopes
    b, s, h = x.shape
    d = h // heads

    def split(t):
        return t.reshape(b, s, heads, d).transpose(0, 2, 1, 3)

    q = split(dense(w, p + "/attention_1/self/query", x))
    k = split(dense(w, p + "/attention_1/self/key", x))
    v = split(dense(w, p + "/attention_1/self/value", x))
    scores = np.einsum("bnfd,bntd->bnft", q, k) / np.sqrt(d)
    scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
    ctx = np.einsum("bnft,bntd->bnfd", softmax(scores), v).transpose(0, 2, 1, 3).reshape(b, s, h)
    attn = dense(w, p + "/attention_1/output/dense", ctx)
    attn = layer_norm(attn + x, w[p + "/LayerNorm/gamma"], w[p + "/LayerNorm/beta"])
    inter = dense(w, f + "/ffn_1/intermediate/dense", attn, act)
    out = dense(w, f + "/ffn_1/intermediate/output/dense", inter)
    return layer_norm(out + attn, w[f + "/LayerNorm_1/gamma"], w[f + "/LayerNorm_1/beta"])


def forward(w, cfg, input_ids, input_mask, segment_ids, masked_lm_positions=None):
    """Returns dict with sequence_output, pooled_output, encoder_outputs (+ mlm/sop logits)."""
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    act = ACTIVATIONS[cfg.hidden_act]
    mask = input_mask.astype(np.float64)
    s = input_ids.shape[1]
    x = (w["bert/embeddings/word_embeddings"][input_ids]
         + w["bert/embeddings/token_type_embeddings"][segment_ids]
         + w["bert/embeddings/position_embeddings"][:s][None])
    x = layer_norm(x, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"])
    if cfg.embedding_size != cfg.hidden_size:
        x = dense(w, "bert/encoder/embedding_hidden_mapping_in", x)
    outputs = []
    for layer in range(cfg.num_hidden_layers):
        for inner in range(cfg.inner_group_num):
            x = block(w, block_scopes(cfg, layer, inner), x, mask, cfg.num_attention_heads, act)
            outputs.append(x)
    pooled = dense(w, "bert/pooler/dense", x[:, 0], np.tanh)
    result = {"sequence_output": x, "pooled_output": pooled, "encoder_outputs": outputs}
    if masked_lm_positions is not None:
        gathered = np.take_along_axis(x, masked_lm_positions[:, :, None], axis=1)
        t = dense(w, "cls/predictions/transform/dense", gathered, act)
        t = layer_norm(t, w["cls/predictions/transform/LayerNorm/gamma"],
                       w["cls/predictions/transform/LayerNorm/beta"])
        result["mlm_logits"] = (t @ w["bert/embeddings/word_embeddings"].T
                                + w["cls/predictions/output_bias"])
        result["sop_logits"] = (pooled @ w["cls/seq_relationship/output_weights"].T
                                + w["cls/seq_relationship/output_bias"])
    return result


def reference_variable_shapes(cfg, with_heads=True):
    """{reference TF1 variable name: shape}, written out independently of albert_tf."""
    v, e, h, i = cfg.vocab_size, cfg.embedding_size, cfg.hidden_size, cfg.intermediate_size
    shapes = {
        "bert/embeddings/word_embeddings": (v, e),
        "bert/embeddings/token_type_embeddings": (cfg.type_vocab_size, e),
        "bert/embeddings/position_embeddings": (cfg.max_position_embeddings, e),
        "bert/embeddings/LayerNorm/beta": (e,), "bert/embeddings/LayerNorm/gamma": (e,),
        "bert/pooler/dense/kernel": (h, h), "bert/pooler/dense/bias": (h,),
    }
    if e != h:
        shapes["bert/encoder/embedding_hidden_mapping_in/kernel"] = (e, h)
        shapes["bert/encoder/embedding_hidden_mapping_in/bias"] = (h,)
    for layer in range(cfg.num_hidden_layers):
        for k in range(cfg.inner_group_num):
            p, f = block_scopes(cfg, layer, k)
            for name in ("query", "key", "value"):
                shapes[f"{p}/attention_1/self/{name}/kernel"] = (h, h)
                shapes[f"{p}/attention_1/self/{name}/bias"] = (h,)
            shapes[f"{p}/attention_1/output/dense/kernel"] = (h, h)
            shapes[f"{p}/attention_1/output/dense/bias"] = (h,)
            shapes[f"{f}/ffn_1/intermediate/dense/kernel"] = (h, i)
            shapes[f"{f}/ffn_1/intermediate/dense/bias"] = (i,)
            shapes[f"{f}/ffn_1/intermediate/output/dense/kernel"] = (i, h)
            shapes[f"{f}/ffn_1/intermediate/output/dense/bias"] = (h,)
            for scope, ln in ((p, "LayerNorm"), (f, "LayerNorm_1")):
                shapes[f"{scope}/{ln}/beta"] = (h,)
                shapes[f"{scope}/{ln}/gamma"] = (h,)
    if with_heads:
        shapes.update({
            "cls/predictions/transform/dense/kernel": (h, e),
            "cls/predictions/transform/dense/bias": (e,),
            "cls/predictions/transform/LayerNorm/beta": (e,),
            "cls/predictions/transform/LayerNorm/gamma": (e,),
            "cls/predictions/output_bias": (v,),
            "cls/seq_relationship/output_weights": (2, h),
            "cls/seq_relationship/output_bias": (2,),
        })
    return shapes
