"""Hidden checks for notebook 06 (the encoder-decoder Transformer).

Each module is built with the REFERENCE versions of the modules it contains (so a wrong
``PositionwiseFeedForward`` costs its own points only), reference weights are copied in by
the SPEC names, and outputs are compared in eval mode.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from .. import nb06_transformer as ref
from ..nb04_masking import make_causal_mask, make_decoder_mask, make_padding_mask
from . import (
    assert_matches,
    construct,
    copy_parameters,
    forbid,
    generator,
    guarded,
    is_instance,
    randn,
    randomise,
    reference_for,
    student_name,
    upstream_from,
)

# These checks run in the grader's process, the student's code in the kernel (transformer_course.grading.judging.judge).
JUDGED = True

SECTION_FFN = "see section 1, 'Position-wise feed-forward'"
SECTION_LN = "see section 2, 'Layer normalisation'"
SECTION_ENC = "see section 3, 'Add & norm: the encoder layer'"
SECTION_DEC = "see section 4, 'The decoder layer'"
SECTION_STACK = "see section 5, 'Stacks of layers'"
SECTION_MODEL = "see section 6, 'The whole model'"

_BUILTIN_LAYER_NORM = {
    (torch, "layer_norm"): "torch.layer_norm",
    (F, "layer_norm"): "torch.nn.functional.layer_norm",
    (torch.nn.LayerNorm, "forward"): "nn.LayerNorm",
    (torch, "batch_norm"): "torch.batch_norm",
    (torch, "group_norm"): "torch.group_norm",
}


def _layer_norm_mistakes(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                         ) -> dict[str, torch.Tensor | None]:
    """Outputs of known mistakes, keyed by the message that names them."""
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    unbiased = x.var(-1, unbiased=True, keepdim=True)
    centred = x - mean
    return {
        "uses the unbiased variance (divides by D - 1, the default of x.var() and x.std()); layer "
        f"normalisation divides by D: x.var(dim=-1, unbiased=False) ({SECTION_LN}).":
            centred / torch.sqrt(unbiased + eps) * weight + bias,
        "divides by (std + eps) with the unbiased std; use the biased variance and put eps inside the "
        f"square root: (x - mean) / sqrt(var + eps) ({SECTION_LN}).":
            centred / (unbiased.sqrt() + eps) * weight + bias,
        f"adds eps to the standard deviation; eps goes inside the square root: sqrt(var + eps) ({SECTION_LN}).":
            centred / (var.sqrt() + eps) * weight + bias,
        f"ignores eps: divide by sqrt(var + eps), not sqrt(var) ({SECTION_LN}).":
            centred / var.sqrt() * weight + bias,
        f"does not subtract the mean (that is RMSNorm); layer normalisation centres each vector ({SECTION_LN}).":
            x / torch.sqrt(x.square().mean(-1, keepdim=True) + eps) * weight + bias,
        f"ignores weight and bias: scale by the gain `weight`, then add `bias` ({SECTION_LN}).":
            centred / torch.sqrt(var + eps),
        f"swaps weight and bias: the output is normalised * weight + bias ({SECTION_LN}).":
            centred / torch.sqrt(var + eps) * bias + weight,
        "normalises over the first axis (across the batch, like BatchNorm); layer normalisation uses "
        f"each vector's own D features, the last axis ({SECTION_LN}).": None if x.dim() < 2 else (
            (x - x.mean(0, keepdim=True)) / torch.sqrt(x.var(0, unbiased=False, keepdim=True) + eps)
            * weight + bias),
    }


def check_layer_norm(ns: dict[str, Any]) -> None:
    layer_norm = student_name(ns, "layer_norm")
    gen = generator(607)
    # A large eps first: it tells apart where eps goes (inside the root, on the std, nowhere).
    for shape, dtype, eps in [((3, 6), torch.float64, 0.5), ((5, 8), torch.float32, 1e-5),
                              ((2, 3, 4), torch.float64, 1e-5), ((1, 1, 16), torch.float32, 1e-5)]:
        x = randn(*shape, gen=gen, dtype=dtype) * 3 + 1
        weight = 1 + randn(shape[-1], gen=gen, dtype=dtype) * 0.5
        bias = randn(shape[-1], gen=gen, dtype=dtype)
        with forbid(_BUILTIN_LAYER_NORM) as used:
            got = layer_norm(x, weight, bias) if eps == 1e-5 else layer_norm(x, weight, bias, eps=eps)
        if used:
            raise AssertionError(f"layer_norm calls the built-in {used[0]}; this exercise is to write it by hand "
                                 f"from mean, variance and sqrt ({SECTION_LN}).")
        what = f"layer_norm(x {shape} {str(dtype).replace('torch.', '')}, eps={eps})"
        mistakes = _layer_norm_mistakes(x, weight, bias, eps)
        assert_matches(got, ref.layer_norm(x, weight, bias, eps), what,
                       {k: v for k, v in mistakes.items() if v is not None},
                       hint=f"Expected (x - mean) / sqrt(var + eps) * weight + bias over the last axis ({SECTION_LN}).")
PARTS = ["PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder"]


upstream = upstream_from(ref)


def _pair(ns: dict[str, Any], name: str, *args: Any, gen: torch.Generator, deps: tuple[str, ...] = (),
          dtype: torch.dtype = torch.float64, inspect: Any = None, **kwargs: Any) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The student's module and a randomised reference with the same weights, both in eval mode.
    ``inspect(module)`` runs on the student's module before the weights are copied."""
    cls = student_name(ns, name)
    with reference_for(ns, **upstream(*deps)):
        mine = construct(cls, name, *args, **kwargs)
    if inspect is not None:
        inspect(mine)
    reference = randomise(getattr(ref, name)(*args, **kwargs), gen)
    copy_parameters(mine, reference, f"{name}{args}")
    return mine.to(dtype).eval(), reference.to(dtype).eval()


def _call(ns: dict[str, Any], fn: Any, name: str, *args: Any, deps: tuple[str, ...] = ()) -> Any:
    with reference_for(ns, **upstream(*deps)), torch.no_grad():
        return guarded(fn, name)(*args)


def _padding(lengths: list[int], size: int) -> torch.Tensor:
    return (torch.arange(size) < torch.tensor(lengths)[:, None])[:, None, None, :]  # (B, 1, 1, size)


def _assert_eval_deterministic(ns: dict[str, Any], module: torch.nn.Module, name: str, args: tuple, deps=()) -> None:
    first, second = _call(ns, module, name, *args, deps=deps), _call(ns, module, name, *args, deps=deps)
    if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) and not torch.equal(first, second):
        raise AssertionError(f"{name} in eval() mode gives a different output on each call: dropout must be "
                             "off in evaluation (use nn.Dropout, which follows train()/eval()).")


def _assert_dropout(ns: dict[str, Any], module: torch.nn.Module, name: str, args: tuple, deps=()) -> None:
    """Same output twice in eval mode; different outputs in train mode (dropout is used)."""
    module.eval()
    _assert_eval_deterministic(ns, module, name, args, deps)
    first = _call(ns, module, name, *args, deps=deps)
    module.train()
    outs = [_call(ns, module, name, *args, deps=deps) for _ in range(3)]
    module.eval()
    if all(torch.allclose(out, first) for out in outs):
        raise AssertionError(f"{name} with dropout=0.5 gives the same output in train() mode as in eval(): "
                             "apply dropout (paper section 5.4).")


def check_PositionwiseFeedForward(ns: dict[str, Any]) -> None:  # noqa: N802 (SPEC names)
    gen = generator(601)
    for b, length, d, d_ff in [(2, 5, 8, 32), (1, 1, 4, 4), (3, 2, 6, 10)]:
        mine, reference = _pair(ns, "PositionwiseFeedForward", d, d_ff, 0.5, gen=gen)
        x = randn(b, length, d, gen=gen, dtype=torch.float64)
        w_1, w_2 = reference.w_1, reference.w_2
        with torch.no_grad():
            mistakes = {
                f"there is no ReLU between w_1 and w_2: FFN(x) = w_2(relu(w_1(x))) ({SECTION_FFN}).": w_2(w_1(x)),
                f"the ReLU is applied after w_2; it goes between w_1 and w_2 ({SECTION_FFN}).":
                    torch.relu(w_2(w_1(x))),
                f"w_2 is applied before w_1 ({SECTION_FFN}).": None if d != d_ff else w_1(torch.relu(w_2(x))),
            }
            expected = reference(x)
        _assert_eval_deterministic(ns, mine, "PositionwiseFeedForward.forward", (x,))
        got = _call(ns, mine, "PositionwiseFeedForward.forward", x)
        assert_matches(got, expected, f"PositionwiseFeedForward({d}, {d_ff}) on x {(b, length, d)} in eval mode",
                       mistakes)
    x = randn(2, 4, 6, gen=gen, dtype=torch.float64)
    _assert_dropout(ns, mine, "PositionwiseFeedForward.forward", (x,))
    # Where the dropout goes: with one seed, it draws the same mask wherever it is applied to the same tensor.
    mine.train(), reference.train()
    got, expected = _seeded(guarded(mine, "PositionwiseFeedForward.forward"), x), _seeded(reference, x)
    mine.eval(), reference.eval()
    w_1, w_2, p = reference.w_1, reference.w_2, reference.dropout.p
    mistakes = {
        f"dropout is applied to the output of w_2; it goes on the hidden activations, between the ReLU and "
        f"w_2 ({SECTION_FFN}).": _seeded(lambda z: F.dropout(w_2(torch.relu(w_1(z))), p, True), x),
        f"dropout is applied to the input x; it goes on the hidden activations, between the ReLU and w_2 "
        f"({SECTION_FFN}).": _seeded(lambda z: w_2(torch.relu(w_1(F.dropout(z, p, True)))), x),
    }
    assert_matches(got, expected, f"PositionwiseFeedForward(6, {w_1.out_features}) in train() mode (dropout "
                   f"p={p}, seed 0)", mistakes,
                   hint=f"Dropout goes on the hidden activations: w_2(dropout(relu(w_1(x)))) ({SECTION_FFN}).")


def _encoder_layer_mistakes(reference: ref.EncoderLayer, x: torch.Tensor, mask: torch.Tensor) -> dict:
    attn = lambda y, m=mask: reference.self_attn(y, y, y, m)[0]  # noqa: E731
    ffn, n1, n2 = reference.feed_forward, reference.norm1, reference.norm2
    pre = x + attn(n1(x))
    y = n1(x + attn(x, None))
    no_res = n1(attn(x))
    return {
        f"this is pre-LN (x + sublayer(norm(x))); the paper's layer is post-LN: norm(x + sublayer(x)) ({SECTION_ENC}).":
            pre + ffn(n2(pre)),
        f"the padding mask is not passed to self-attention ({SECTION_ENC}).": n2(y + ffn(y)),
        f"the residual connection is missing: norm(x + sublayer(x)), not norm(sublayer(x)) ({SECTION_ENC}).":
            n2(no_res + ffn(no_res)),
        f"the residual connections are missing: norm(x + sublayer(x)), not norm(sublayer(x)) ({SECTION_ENC}).":
            n2(ffn(no_res)),
        f"norm1 and norm2 are swapped ({SECTION_ENC}).": (lambda z: n1(z + ffn(z)))(n2(x + attn(x))),
    }


def _seeded(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with the global RNG seeded to 0 (and restored after): dropout draws the same
    masks, in the same order, for every implementation that applies it at the same places."""
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(0)
        return fn(*args)


def _placements(residual: Any, sublayers: list[str], x: torch.Tensor, norms: list[Any], p: float,
                section: str) -> dict[str, torch.Tensor]:
    """Train-mode outputs (seed 0) of a post-LN stack of residual steps with dropout in the wrong
    places: ``residual(y, i)`` is sub-layer ``i`` on ``y``, ``norms[i]`` its LayerNorm."""
    def run(where: str) -> torch.Tensor:
        torch.manual_seed(0)
        y = x
        for i, norm in enumerate(norms):
            out = residual(y, i)
            if where == "sublayer" or where == f"only {i}":
                out = F.dropout(out, p, True)
            total = y + out
            if where == "after sum":
                total = F.dropout(total, p, True)
            y = norm(total)
            if where == "after norm":
                y = F.dropout(y, p, True)
        return y

    names = list(sublayers)
    mistakes = {
        f"dropout is applied to the residual sum, norm(dropout(x + sublayer(x))); it goes on the sub-layer's "
        f"output before the sum: norm(x + dropout(sublayer(x))) ({section}).": "after sum",
        f"dropout is applied after the LayerNorm; it goes on the sub-layer's output before the sum: "
        f"norm(x + dropout(sublayer(x))) ({section}).": "after norm",
    }
    for i, name in enumerate(names):
        others = ", ".join(n for j, n in enumerate(names) if j != i)
        mistakes[f"dropout is applied to the {name} output only; every sub-layer's output gets it ({others} "
                 f"too): norm(x + dropout(sublayer(x))) ({section})."] = f"only {i}"
    return {message: _seeded(run, where) for message, where in mistakes.items()}


def _assert_residual_dropout(ns: dict[str, Any], module: torch.nn.Module, reference: torch.nn.Module, name: str,
                             args: tuple, deps: tuple, sublayers: dict[str, Any], section: str) -> None:
    """The layer's own dropout goes on each sub-layer's output, before the residual sum, in train() mode.

    The sub-layers (attention, feed-forward) have dropout of their own, so a layer that never calls
    its ``dropout`` still gives a different output in train() mode; with the sub-layers held in
    eval(), only the layer's own dropout acts, and with one seed it draws the same masks in the same
    order as the reference's wherever it is applied at the same places (``nn.Dropout`` or
    ``F.dropout`` alike). ``sublayers``: attribute name -> ``fn(layer, y)`` that runs it.
    """
    module.eval()
    quiet = _call(ns, module, name, *args, deps=deps)
    for layer in (module, reference):
        layer.train()
        for child in sublayers:
            getattr(layer, child).eval()
    with reference_for(ns, **upstream(*deps)):
        got = _seeded(guarded(module, name), *args)
    expected = _seeded(reference, *args)
    module.eval()
    reference.eval()
    if torch.allclose(got, quiet):
        raise AssertionError(
            f"{name} in train() mode, with its sub-layers' own dropout off, gives exactly its eval() output: "
            "the layer never applies its dropout to the sub-layer outputs. Each residual is "
            f"norm(x + dropout(sublayer(x))), dropout in train() only (paper section 5.4; {section}).")
    calls = list(sublayers.values())
    norms = [getattr(reference, f"norm{i + 1}") for i in range(len(calls))]
    with torch.no_grad():
        mistakes = _placements(lambda y, i: calls[i](reference, y), list(sublayers), args[0], norms,
                               reference.dropout.p, section)
    assert_matches(got, expected, f"{name} in train() mode (dropout p={reference.dropout.p}, its sub-layers' own "
                   "dropout off, seed 0)", mistakes,
                   hint=f"Dropout goes on each sub-layer's output before the sum: norm(x + dropout(sublayer(x))) "
                        f"({section}).")


def check_EncoderLayer(ns: dict[str, Any]) -> None:  # noqa: N802
    gen = generator(602)
    deps = ("PositionwiseFeedForward",)
    for b, length, d, h, d_ff, lengths in [(2, 6, 8, 2, 16, [6, 3]), (1, 1, 4, 1, 8, [1]), (3, 4, 12, 3, 8, [4, 2, 1])]:
        mine, reference = _pair(ns, "EncoderLayer", d, h, d_ff, 0.5, gen=gen, deps=deps)
        x = randn(b, length, d, gen=gen, dtype=torch.float64)
        mask = _padding(lengths, length)
        with torch.no_grad():
            expected, mistakes = reference(x, mask), _encoder_layer_mistakes(reference, x, mask)
        _assert_eval_deterministic(ns, mine, "EncoderLayer.forward", (x, mask,), deps)
        got = _call(ns, mine, "EncoderLayer.forward", x, mask, deps=deps)
        assert_matches(got, expected, f"EncoderLayer({d}, {h}, {d_ff}) on x {(b, length, d)} with a padding mask",
                       mistakes)
    _assert_dropout(ns, mine, "EncoderLayer.forward", (x, mask), deps)
    _assert_residual_dropout(ns, mine, reference, "EncoderLayer.forward", (x, mask), deps, {
        "self_attn": lambda layer, y: layer.self_attn(y, y, y, mask)[0],
        "feed_forward": lambda layer, y: layer.feed_forward(y)}, SECTION_ENC)


def _decoder_layer_mistakes(reference: ref.DecoderLayer, x, memory, src_mask, tgt_mask) -> dict:
    sa = lambda y, m: reference.self_attn(y, y, y, m)[0]  # noqa: E731
    ca = lambda y, kv, m: reference.cross_attn(y, kv, kv, m)[0]  # noqa: E731
    ffn, n1, n2, n3 = reference.feed_forward, reference.norm1, reference.norm2, reference.norm3

    def finish(y):
        return n3(y + ffn(y))

    y = n1(x + sa(x, tgt_mask))
    no_causal = n1(x + sa(x, None))
    square = memory.size(1) == x.size(1)  # these two mistakes only run (rather than crash) when S == T
    swapped = n1(x + sa(x, src_mask)) if square else None
    return {
        f"src_mask and tgt_mask are swapped: tgt_mask (causal and padding, (B, 1, T, T)) goes on the "
        f"self-attention over x, src_mask ((B, 1, 1, S)) on the cross-attention over memory ({SECTION_DEC}).":
            finish(n2(swapped + ca(swapped, memory, tgt_mask))) if square else None,
        f"cross-attention takes its queries from memory and its keys and values from the decoder; queries come "
        f"from the decoder (x), keys and values from memory ({SECTION_DEC}).":
            finish(n2(y + reference.cross_attn(memory, y, y, src_mask)[0])) if square else None,
        "cross-attention takes its keys and values from the decoder input; they come from the encoder "
        f"output `memory` ({SECTION_DEC}).": finish(n2(y + ca(y, y, tgt_mask))),
        f"the target mask is not applied in the masked self-attention: position t can see later tokens ({SECTION_DEC}).":
            finish(n2(no_causal + ca(no_causal, memory, src_mask))),
        f"the source padding mask is not passed to cross-attention ({SECTION_DEC}).": finish(n2(y + ca(y, memory, None))),
        f"cross-attention comes before self-attention; the order is self, cross, feed-forward ({SECTION_DEC}).":
            (lambda z: finish(n2(z + sa(z, tgt_mask))))(n1(x + ca(x, memory, src_mask))),
        f"this is pre-LN; the paper's layer is post-LN: norm(x + sublayer(x)) ({SECTION_DEC}).":
            (lambda a: (lambda c: c + ffn(n3(c)))(a + ca(n2(a), memory, src_mask)))(x + sa(n1(x), tgt_mask)),
    }


def check_DecoderLayer(ns: dict[str, Any]) -> None:  # noqa: N802
    gen = generator(603)
    deps = ("PositionwiseFeedForward",)
    # The square case (S == T) first: a swapped mask or input runs there and is named, where S != T crashes.
    for b, t, s, d, h, d_ff in [(2, 4, 4, 12, 3, 8), (1, 1, 3, 4, 1, 8), (2, 5, 7, 8, 2, 16)]:
        mine, reference = _pair(ns, "DecoderLayer", d, h, d_ff, 0.5, gen=gen, deps=deps)
        x = randn(b, t, d, gen=gen, dtype=torch.float64)
        memory = randn(b, s, d, gen=gen, dtype=torch.float64)
        src_mask = _padding([s, max(1, s - 2)][:b], s)
        tgt_mask = _padding([t, max(1, t - 1)][:b], t) & make_causal_mask(t)
        with torch.no_grad():
            expected = reference(x, memory, src_mask, tgt_mask)
            mistakes = _decoder_layer_mistakes(reference, x, memory, src_mask, tgt_mask)
        _assert_eval_deterministic(ns, mine, "DecoderLayer.forward", (x, memory, src_mask, tgt_mask,), deps)
        got = _call(ns, mine, "DecoderLayer.forward", x, memory, src_mask, tgt_mask, deps=deps)
        assert_matches(got, expected, f"DecoderLayer({d}, {h}, {d_ff}) on x {(b, t, d)}, memory {(b, s, d)} "
                       "with padding and causal masks", mistakes)
    _assert_dropout(ns, mine, "DecoderLayer.forward", (x, memory, src_mask, tgt_mask), deps)
    _assert_residual_dropout(ns, mine, reference, "DecoderLayer.forward", (x, memory, src_mask, tgt_mask), deps, {
        "self_attn": lambda layer, y: layer.self_attn(y, y, y, tgt_mask)[0],
        "cross_attn": lambda layer, y: layer.cross_attn(y, memory, memory, src_mask)[0],
        "feed_forward": lambda layer, y: layer.feed_forward(y)}, SECTION_DEC)


def _check_stack(ns: dict[str, Any], name: str, layer_name: str, seed: int) -> None:
    gen = generator(seed)
    deps = ("PositionwiseFeedForward", "EncoderLayer", "DecoderLayer")
    for num_layers, b, t, s, d, h, d_ff in [(3, 2, 5, 6, 8, 2, 16), (1, 1, 2, 3, 4, 1, 4), (2, 2, 3, 3, 6, 3, 6)]:
        def structure(mine: torch.nn.Module, num_layers: int = num_layers) -> None:
            layers = getattr(mine, "layers", None)
            if not is_instance(layers, torch.nn.ModuleList):
                raise AssertionError(f"{name}.layers should be an nn.ModuleList of {layer_name}s ({SECTION_STACK}).")
            if len(layers) != num_layers:
                raise AssertionError(f"{name}({num_layers}, ...) has {len(layers)} layers, expected {num_layers}.")
            if num_layers > 1 and len({id(layer) for layer in layers}) < num_layers:
                raise AssertionError(f"{name}'s layers are the SAME module repeated ([layer] * N shares one set of "
                                     f"weights); build N independent {layer_name}s ({SECTION_STACK}).")

        mine, reference = _pair(ns, name, num_layers, d, h, d_ff, 0.0, gen=gen, deps=deps, inspect=structure)
        x = randn(b, t, d, gen=gen, dtype=torch.float64)
        if name == "Encoder":
            mask = _padding([t, max(1, t - 2)][:b], t)
            args = (x, mask)
        else:
            memory = randn(b, s, d, gen=gen, dtype=torch.float64)
            mask = _padding([s, max(1, s - 1)][:b], s)
            args = (x, memory, mask, make_causal_mask(t))
        with torch.no_grad():
            expected = reference(*args)
            first_only = reference.layers[0](*args)
            last_only = reference.layers[-1](*args)
            final_norm = torch.nn.functional.layer_norm(expected, (d,))
        mistakes = {
            f"only the first layer's output is returned: feed each layer's output to the next ({SECTION_STACK}).":
                first_only if num_layers > 1 else None,
            f"every layer gets the stack's input; each layer's input is the previous layer's output ({SECTION_STACK}).":
                last_only if num_layers > 1 else None,
            f"a final LayerNorm is applied; as in the paper's post-LN design, each layer already ends with a LayerNorm, so the stack returns the last layer's output as it is ({SECTION_STACK}).":
                final_norm,
        }
        got = _call(ns, mine, f"{name}.forward", *args, deps=deps)
        assert_matches(got, expected, f"{name}({num_layers}, {d}, {h}, {d_ff}) on x {(b, t, d)}", mistakes)


def check_Encoder(ns: dict[str, Any]) -> None:  # noqa: N802
    _check_stack(ns, "Encoder", "EncoderLayer", 604)


def check_Decoder(ns: dict[str, Any]) -> None:  # noqa: N802
    _check_stack(ns, "Decoder", "DecoderLayer", 605)


def _tokens(lengths: list[int], size: int, vocab: int, gen: torch.Generator, pad_id: int) -> torch.Tensor:
    tokens = torch.randint(0, vocab, (len(lengths), size), generator=gen)
    tokens[tokens == pad_id] = (pad_id + 1) % vocab
    return tokens.masked_fill(torch.arange(size) >= torch.tensor(lengths)[:, None], pad_id)


def _pads(tokens: torch.Tensor, pad_id: int) -> str:
    """Where ``tokens`` holds padding, as (row, position) pairs, e.g. "(1, 2), (1, 3)"."""
    return ", ".join(f"({r}, {c})" for r, c in (tokens == pad_id).nonzero().tolist()) or "(none)"


def _scale_mistakes(side: str, stack: str, method: str, call: str, embedded: torch.Tensor, run,
                    d_model: int) -> dict[str, torch.Tensor]:
    """The two ways to get TokenEmbedding's sqrt(d_model) scale wrong on one side of the model (scaled
    again, or undone), each with what ``run`` (the rest of ``method`` from the embeddings on) gives then."""
    root = math.sqrt(d_model)
    return {
        f"the {side} embeddings are scaled by sqrt(d_model) = {root:.3g} twice: TokenEmbedding already "
        f"multiplies by it, so {method} must not scale {call} again ({SECTION_MODEL}).": run(embedded * root),
        f"the {side} embeddings reach the {stack} without the sqrt(d_model) = {root:.3g} scale (or divided "
        f"by it): TokenEmbedding applies it, use {call} as it is ({SECTION_MODEL}).": run(embedded / root),
    }


def check_Transformer(ns: dict[str, Any]) -> None:  # noqa: N802
    gen = generator(606)
    deps = tuple(PARTS)
    for src_v, tgt_v, d, h, n, d_ff, pad_id, src_len, tgt_len in [
        (11, 13, 8, 2, 2, 16, 0, [6, 3], [5, 2]),
        (7, 7, 4, 1, 1, 8, 3, [1], [1]),
        (9, 12, 12, 3, 2, 8, 1, [4, 4, 2], [3, 1, 3]),
    ]:
        kwargs = dict(d_model=d, num_heads=h, num_layers=n, d_ff=d_ff, dropout=0.5, max_len=32, pad_id=pad_id)
        mine, reference = _pair(ns, "Transformer", src_v, tgt_v, gen=gen, deps=deps, **kwargs)
        if getattr(mine, "pad_id", pad_id) != pad_id:
            raise AssertionError(f"Transformer(..., pad_id={pad_id}) stores pad_id={mine.pad_id}.")
        src = _tokens(src_len, max(src_len), src_v, gen, pad_id)
        tgt = _tokens(tgt_len, max(tgt_len), tgt_v, gen, pad_id)
        what = f"Transformer({src_v}, {tgt_v}, d_model={d}, num_heads={h}, num_layers={n}, pad_id={pad_id})"
        src_mask, tgt_mask = make_padding_mask(src, pad_id), make_decoder_mask(tgt, pad_id)
        with torch.no_grad():
            memory = reference.encode(src, src_mask)
            expected = reference(src, tgt)
            states = reference.decode(tgt, memory, src_mask, tgt_mask)
            mistakes = {
                f"forward does not apply the causal mask to the target: use make_decoder_mask ({SECTION_MODEL}).":
                    reference.generator(reference.decode(tgt, memory, src_mask, make_padding_mask(tgt, pad_id))),
                f"forward's target mask is causal only; use make_decoder_mask(tgt, self.pad_id), padding AND causal "
                f"({SECTION_MODEL}). The logits differ only at the padded target positions (row, position) "
                f"{_pads(tgt, pad_id)}, whose queries attend to padding.":
                    reference.generator(reference.decode(tgt, memory, src_mask, make_causal_mask(tgt.size(1)))),
                f"forward does not mask the source padding ({SECTION_MODEL}).":
                    reference.generator(reference.decode(tgt, reference.encode(src, None), None, tgt_mask)),
                f"forward returns the decoder states; apply the generator to get logits ({SECTION_MODEL}).": states,
                f"forward returns log-probabilities; return the raw logits, the loss applies log_softmax ({SECTION_MODEL}).":
                    torch.log_softmax(expected, dim=-1),
                f"forward returns probabilities (a softmax over the logits); return the raw logits, the loss applies "
                f"log_softmax itself ({SECTION_MODEL}).": torch.softmax(expected, dim=-1),
            }
            if pad_id != 0:
                zero_src, zero_tgt = make_padding_mask(src, 0), make_decoder_mask(tgt, 0)
                mistakes[f"forward builds its masks with pad_id 0, not the model's own self.pad_id (here {pad_id}; "
                         f"{SECTION_MODEL})."] = reference.generator(
                    reference.decode(tgt, reference.encode(src, zero_src), zero_src, zero_tgt))
            # (each lambda runs inside _scale_mistakes, in this iteration: B023 does not apply)
            scale_src = _scale_mistakes("source", "encoder", "encode", "src_embed(src)", reference.src_embed(src),
                                        lambda x: reference.encoder(reference.positional_encoding(x),  # noqa: B023
                                                                    src_mask), d)  # noqa: B023
            scale_tgt = _scale_mistakes("target", "decoder", "decode", "tgt_embed(tgt)", reference.tgt_embed(tgt),
                                        lambda x: reference.decoder(reference.positional_encoding(x),  # noqa: B023
                                                                    memory, src_mask, tgt_mask), d)  # noqa: B023
        got_memory = _call(ns, mine.encode, "Transformer.encode", src, src_mask, deps=deps)
        assert_matches(got_memory, memory, f"{what}.encode(src {tuple(src.shape)}, src_mask)", scale_src,
                       hint=f"memory = encoder(positional_encoding(src_embed(src)), src_mask) ({SECTION_MODEL}).")
        got_states = _call(ns, mine.decode, "Transformer.decode", tgt, memory, src_mask, tgt_mask, deps=deps)
        assert_matches(got_states, states, f"{what}.decode(tgt {tuple(tgt.shape)}, memory, src_mask, tgt_mask)", scale_tgt,
                       hint=f"decoder(positional_encoding(tgt_embed(tgt)), memory, src_mask, tgt_mask) ({SECTION_MODEL}).")
        _assert_eval_deterministic(ns, mine, "Transformer.forward", (src, tgt,), deps)
        got = _call(ns, mine, "Transformer.forward", src, tgt, deps=deps)
        assert_matches(got, expected, f"{what}(src {tuple(src.shape)}, tgt {tuple(tgt.shape)}) (its logits)",
                       mistakes)
    _assert_dropout(ns, mine, "Transformer.forward", (src, tgt), deps)
