"""Hidden checks for notebook 04 (padding and causal masks)."""

from __future__ import annotations

import re
from typing import Any

import torch

from .. import nb04_masking as ref
from . import generator, randn, record, reference_for, student_name, tolerance, upstream_from, within

# These checks run in the grader's process, the student's code in the kernel (transformer_course.grading.judging.judge).
JUDGED = True

SECTION_PADDING = "see section 1, 'Padding masks'"
SECTION_CAUSAL = "see section 2, 'Causal masks'"
SECTION_DECODER = "see section 3, 'The decoder mask'"


upstream = upstream_from(ref)


def _assert_mask(got: Any, expected: torch.Tensor, what: str, mistakes: dict[str, torch.Tensor | None],
                 hint: str, inputs: str = "") -> None:
    """``inputs``: the facts about the inputs that decide the mask (which positions are padding),
    shown when the mask is wrong in no known way."""
    if not isinstance(got, torch.Tensor):
        raise AssertionError(f"{what} should be a torch.Tensor, got {type(got).__name__}.")
    if got.dtype != torch.bool:
        raise AssertionError(f"{what} has dtype {got.dtype}; masks are bool (True = may attend), e.g. "
                             "tokens != pad_id, not an int or float tensor.")
    for message, wrong in mistakes.items():
        if wrong is not None and got.shape == wrong.shape and torch.equal(got, wrong) and not (
                got.shape == expected.shape and torch.equal(got, expected)):
            raise AssertionError(f"{what}: {message}")
    if got.shape != expected.shape:
        raise AssertionError(f"{what} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}. {hint}")
    if not torch.equal(got, expected):
        wrong = (got != expected).nonzero()[0].tolist()
        facts = f" The inputs: {inputs}." if inputs else ""
        raise AssertionError(f"{what} is wrong at index {tuple(wrong)} (and maybe elsewhere).{facts} {hint}")
    record(what, got)


def _on_input_device(call: Any, message: str) -> None:
    """Whether ``call(device)`` returns its mask on ``device`` (its inputs are made there).

    First with CPU inputs while tensors made without ``device=`` default to "meta": a mask built
    from its inputs, or on the device it is given, comes back on the CPU. Anything else (a 0-dim
    ``torch.tensor(pad_id)`` meeting CPU tokens) is decided on "meta" inputs, which is slower: the
    first comparison on "meta" imports torch._dynamo, about a second. The default device is a
    torch-function mode, which the grader's runner turns off around tests; it is turned back on
    for this call only (where torch lacks the switch, only the slow way runs).
    """
    enable = getattr(torch._C, "_EnableTorchFunction", None)
    try:
        if enable is not None:
            with enable(), torch.device("meta"):
                if getattr(call(torch.device("cpu")), "device", None) == torch.device("cpu"):
                    return
    except Exception:  # noqa: BLE001 (decided below)
        pass
    try:
        out = call(torch.device("meta"))
    except Exception:  # noqa: BLE001 (a tensor made on the CPU met one on "meta")
        out = None
    if getattr(out, "device", None) != torch.device("meta"):
        raise AssertionError(message)


def _padding_facts(tokens: torch.Tensor, pad_id: int) -> str:
    """Which positions of each sentence are padding, in words (inputs only, no expected values)."""
    rows = []
    for row, sentence in enumerate(tokens):
        pads = (sentence == pad_id).nonzero().flatten().tolist()
        rows.append(f"sentence {row} " + (f"has padding at positions {pads}" if pads else "has no padding"))
    return "; ".join(rows)


def _tokens(gen: torch.Generator, lengths: list[int], length: int, pad_id: int) -> torch.Tensor:
    tokens = torch.randint(pad_id + 1, pad_id + 20, (len(lengths), length), generator=gen)
    for row, n in enumerate(lengths):
        tokens[row, n:] = pad_id
    return tokens


def check_make_padding_mask(ns: dict[str, Any]) -> None:
    make_padding_mask = student_name(ns, "make_padding_mask")
    gen = generator(401)
    for lengths, length, pad_id in [([5, 3, 1], 5, 0), ([4], 4, 0), ([2, 6], 6, 1), ([1], 1, 3)]:
        tokens = _tokens(gen, lengths, length, pad_id)
        expected = ref.make_padding_mask(tokens, pad_id)
        keep = tokens != pad_id
        mistakes = {
            f"the mask is inverted: True must mark real tokens (tokens != pad_id) ({SECTION_PADDING}).":
                (tokens == pad_id)[:, None, None, :],
            f"has shape (B, L): add two axes, (B, 1, 1, L), so it broadcasts over heads and queries "
            f"({SECTION_PADDING}).": keep,
            "has shape (B, 1, L), which broadcasts against the scores (B, h, Lq, Lk) along the wrong axes; "
            f"use (B, 1, 1, L) ({SECTION_PADDING}).": keep[:, None, :],
            "has shape (B, 1, L, 1): that masks queries, not keys; padded KEYS must be blocked, "
            f"(B, 1, 1, L) ({SECTION_PADDING}).": keep[:, None, :, None],
            "ignores pad_id (it treats 0 as padding): compare with the pad_id argument.":
                (tokens != 0)[:, None, None, :] if pad_id != 0 else None,
        }
        _assert_mask(make_padding_mask(tokens, pad_id), expected,
                     f"make_padding_mask(tokens {tuple(tokens.shape)}, pad_id={pad_id})", mistakes,
                     hint=f"Expected (tokens != pad_id) with shape (B, 1, 1, L) ({SECTION_PADDING}).",
                     inputs=f"pad_id={pad_id}; {_padding_facts(tokens, pad_id)}")
    _on_input_device(lambda device: make_padding_mask(torch.tensor([[4, 5, 0]], device=device), 0),
                     "make_padding_mask must return the mask on the device of `tokens`: build it from tokens "
                     "(a new tensor needs device=tokens.device).")


def check_padding_has_no_effect(ns: dict[str, Any]) -> None:
    """With the student's padding mask, each padded sentence gives at its real positions what it
    gives alone (through the reference attention layer). A wrong result names what the mask got
    wrong for that sentence: inverted, a sentence without padding blocked, or pads let through."""
    from .. import nb03_multi_head

    make_padding_mask = student_name(ns, "make_padding_mask")
    gen = generator(404)
    for lengths, length, pad_id in [([6, 4, 1], 6, 0), ([3, 3], 3, 2), ([5, 2], 5, 1)]:
        tokens = _tokens(gen, lengths, length, pad_id)
        what = f"make_padding_mask(tokens {tuple(tokens.shape)}, pad_id={pad_id})"
        mask = make_padding_mask(tokens, pad_id)
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise AssertionError(f"{what} should be a bool tensor (True = may attend), got "
                                 f"{getattr(mask, 'dtype', type(mask).__name__)} ({SECTION_PADDING}).")
        if mask.shape != (len(lengths), 1, 1, length):
            raise AssertionError(f"{what} has shape {tuple(mask.shape)}; the attention layer needs (B, 1, 1, L) "
                                 f"= {(len(lengths), 1, 1, length)}, one entry per key ({SECTION_PADDING}).")
        state = torch.random.get_rng_state()
        torch.manual_seed(404)  # the layer's initial weights, the same for every answer
        layer = nb03_multi_head.MultiHeadAttention(8, 2).eval()
        torch.random.set_rng_state(state)
        x = randn(len(lengths), length, 8, gen=gen)
        with torch.no_grad():
            padded, _ = layer(x, x, x, mask=mask)
            for row, n in enumerate(lengths):
                alone, _ = layer(x[row : row + 1, :n], x[row : row + 1, :n], x[row : row + 1, :n])
                if within(padded[row, :n], alone[0], tolerance(torch.float32)).all():
                    record(f"{what}: sentence {row}, real positions", padded[row, :n], tolerance(torch.float32))
                    continue
                pads = (tokens[row] == pad_id).nonzero().flatten().tolist()
                mine = mask[row, 0, 0].int().tolist()
                facts = (f"sentence {row} " + (f"has padding at positions {pads}" if pads else "has no padding")
                         + f" and your mask for it is {mine} (1 = may attend)")
                if mask[:, 0, 0].equal(tokens == pad_id):  # over the whole batch: a row without pads is ambiguous
                    why = "the mask is inverted: True must mark the real tokens, tokens != pad_id"
                elif not pads:
                    why = "a sentence without padding must have every key allowed"
                else:
                    why = "the mask must be True exactly at the real tokens and False at the pads"
                raise AssertionError(f"{what}: {facts}; in the batch its real positions differ from the sentence "
                                     f"run alone: {why} ({SECTION_PADDING}).")


def check_make_causal_mask(ns: dict[str, Any]) -> None:
    make_causal_mask = student_name(ns, "make_causal_mask")
    for size in (1, 2, 5, 9):
        expected = ref.make_causal_mask(size)
        ones = torch.ones(size, size, dtype=torch.bool)
        mistakes = {
            "True marks the FUTURE (the 'subsequent mask' of some tutorials); here True = may attend: "
            f"keep the lower triangle incl. the diagonal, torch.tril ({SECTION_CAUSAL}).":
                ones.triu(1)[None, None],
            f"keeps the upper triangle: a position may see itself and the past, not the future ({SECTION_CAUSAL}).":
                ones.triu()[None, None],
            f"leaves out the diagonal: a position may attend to itself (tril, not tril(-1)) ({SECTION_CAUSAL}).":
                ones.tril(-1)[None, None],
            f"has shape (size, size): add two leading axes, (1, 1, size, size) ({SECTION_CAUSAL}).": ones.tril(),
        }
        _assert_mask(make_causal_mask(size), expected, f"make_causal_mask({size})", mistakes,
                     hint=f"Expected torch.ones(size, size, dtype=torch.bool).tril() with shape (1, 1, size, size) "
                          f"({SECTION_CAUSAL}).")
    _on_input_device(lambda device: make_causal_mask(3, device=device),
                     "make_causal_mask(size, device=d) must create the mask on device d "
                     "(pass device= to the tensor constructor).")
    default = make_causal_mask(3)
    if default.device != torch.device("cpu"):
        raise AssertionError("make_causal_mask(size) with no device should give a CPU tensor.")


def _batch_as_length(tokens: torch.Tensor) -> str:
    b, t = tokens.shape
    return (f"the causal mask was built for length {b}, the batch size B = tokens.size(0); the length T = {t} is "
            f"axis 1 of tokens (B, T): use tokens.size(1) ({SECTION_DECODER}).")


def _decoder_mask(ns: dict[str, Any], tokens: torch.Tensor, pad_id: int) -> Any:
    """The student's decoder mask, with reference upstream functions. An error is reported with the
    shape of ``tokens``; when the causal mask was made for the batch size instead of the length
    (``tokens.size(0)``, ``len(tokens)``), the message says so."""
    sizes: list[int] = []

    def causal(size: int, *args: Any, **kwargs: Any) -> torch.Tensor:
        sizes.append(int(size))
        return ref.make_causal_mask(size, *args, **kwargs)

    b, t = tokens.shape
    try:
        with reference_for(ns, make_padding_mask=ref.make_padding_mask, make_causal_mask=causal):
            got = ns["make_decoder_mask"](tokens, pad_id)
    except (AssertionError, NotImplementedError):
        raise
    except Exception as exc:
        message = " ".join(str(exc).split())[:200]
        sizes_in_error = {int(n) for n in re.findall(r"\((\d+)\)", message)}
        if b != t and (b in sizes or sizes_in_error == {b, t}):
            raise AssertionError(f"make_decoder_mask(tokens {(b, t)}, pad_id={pad_id}) raised "
                                 f"{type(exc).__name__} ({message}): {_batch_as_length(tokens)}") from None
        raise AssertionError(f"make_decoder_mask(tokens {(b, t)} int64, pad_id={pad_id}) raised "
                             f"{type(exc).__name__}: {message}") from None
    if b != t and b in sizes and t not in sizes:
        raise AssertionError(f"make_decoder_mask(tokens {(b, t)}, pad_id={pad_id}): {_batch_as_length(tokens)}")
    return got


def check_make_decoder_mask(ns: dict[str, Any]) -> None:
    make_decoder_mask = student_name(ns, "make_decoder_mask")
    gen = generator(403)
    for lengths, length, pad_id in [([5, 3, 1], 5, 0), ([2], 2, 0), ([6, 4], 6, 2)]:
        tokens = _tokens(gen, lengths, length, pad_id)
        expected = ref.make_decoder_mask(tokens, pad_id)
        padding = ref.make_padding_mask(tokens, pad_id)
        causal = ref.make_causal_mask(length)
        mistakes = {
            "combines padding and causal masks with OR; a key must be real AND not in the future: & "
            f"({SECTION_DECODER}).": padding | causal,
            f"is the padding mask only (broadcast): the decoder also needs the causal mask ({SECTION_DECODER}).":
                padding.expand(-1, -1, length, -1),
            f"is the causal mask only: padded target tokens must be blocked too ({SECTION_DECODER}).":
                causal.expand(len(lengths), -1, -1, -1),
            "blocks padded QUERIES instead of padded keys: transpose back to (B, 1, 1, T) & causal "
            f"({SECTION_DECODER}).": padding.transpose(-2, -1) & causal,
        }
        got = _decoder_mask(ns, tokens, pad_id)
        if len(lengths) == 1 < length:  # a causal mask of the batch size broadcasts only when B = 1
            mistakes[_batch_as_length(tokens)] = padding & ref.make_causal_mask(1)
        _assert_mask(got, expected,
                     f"make_decoder_mask(tokens {tuple(tokens.shape)}, pad_id={pad_id})", mistakes,
                     hint=f"Expected make_padding_mask(tokens, pad_id) & make_causal_mask(T), shape (B, 1, T, T) "
                          f"({SECTION_DECODER}).")
    with reference_for(ns, **upstream("make_padding_mask", "make_causal_mask")):
        _on_input_device(lambda device: make_decoder_mask(torch.tensor([[4, 5, 0]], device=device), 0),
                         "make_decoder_mask must build its mask on the device of `tokens` "
                         "(make_causal_mask(T, device=tokens.device)).")
