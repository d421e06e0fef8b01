"""Hidden checks for notebook 05 (positional encoding and token embeddings)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from .. import nb05_positional_encoding as ref
from . import (
    assert_matches,
    construct,
    generator,
    guarded,
    randn,
    record,
    reference_for,
    student_name,
    tolerance,
    upstream_from,
)

# These checks run in the grader's process, the student's code in the kernel (transformer_course.grading.judging.judge).
JUDGED = True

SECTION_PE = "see section 1, 'The sinusoidal table'"
SECTION_MODULE = "see section 2, 'A module with a buffer'"
SECTION_EMBED = "see section 3, 'Token embeddings'"
upstream = upstream_from(ref)


PE_TOL = {"rtol": 0.0, "atol": 5e-5}  # float32 exp/log formulas differ by < 3e-5 at max_len <= 512


def _table(max_len: int, d: int, *, base: float = 10000.0, swap: bool = False, halves: bool = False,
           exponent: str = "2i", start: int = 0) -> torch.Tensor:
    """Sinusoidal tables, right and wrong, in float64 then float32."""
    pos = torch.arange(start, start + max_len, dtype=torch.float64)[:, None]
    i = torch.arange(d // 2, dtype=torch.float64)
    power = {"2i": 2 * i / d, "i": i / d, "4i": 4 * i / d}[exponent]
    angles = pos / base ** power
    first, second = (torch.cos(angles), torch.sin(angles)) if swap else (torch.sin(angles), torch.cos(angles))
    if halves:
        return torch.cat([first, second], dim=1).float()
    return torch.stack([first, second], dim=2).reshape(max_len, d).float()


def _pe_mistakes(max_len: int, d: int) -> dict[str, torch.Tensor]:
    return {
        f"sin and cos are swapped: even columns 2i hold sin, odd columns 2i+1 hold cos ({SECTION_PE}).":
            _table(max_len, d, swap=True),
        f"the exponent is i/D instead of 2i/D: pair i uses 10000^(2i/D) ({SECTION_PE}).":
            _table(max_len, d, exponent="i"),
        "the exponent uses the column index (4i/D for pair i); pair i, columns 2i and 2i+1, uses "
        f"10000^(2i/D) ({SECTION_PE}).": _table(max_len, d, exponent="4i"),
        f"the base is 1000 instead of 10000 ({SECTION_PE}).": _table(max_len, d, base=1000.0),
        f"the base is 100000 instead of 10000 ({SECTION_PE}).": _table(max_len, d, base=100000.0),
        "sin fills the first half of the columns and cos the second; the paper interleaves them: "
        f"sin in even columns, cos in odd ones ({SECTION_PE}).": _table(max_len, d, halves=True),
        f"positions start at 1; the first position is p = 0 (row 0 is [0, 1, 0, 1, ...]) ({SECTION_PE}).":
            _table(max_len, d, start=1),
    }


def _frequency_rules(d: int) -> dict[str, Any]:
    """How a table's columns may get their frequencies, right and wrong: description -> a function
    of the column indices ``c`` (float64) giving the factor the position is multiplied by."""
    rules: dict[str, Any] = {}
    for base in (10000, 1000, 100000):
        of = "" if base == 10000 else f" and base {base} instead of 10000"
        rules["are right" if base == 10000 else f"use base {base} instead of 10000"] = (
            lambda c, b=base: b ** -(2 * (c // 2) / d))
        rules[f"use the exponent c/D of their own column index c{of}"] = lambda c, b=base: b ** -(c / d)
        rules[f"use the exponent 2c/D with c the column index (the factor 2 counted twice){of}"] = (
            lambda c, b=base: b ** -(2 * c / d))
        rules[f"use the exponent i/D, without its factor 2{of}"] = lambda c, b=base: b ** -((c // 2) / d)
    rules["multiply the position by 10000^(2i/D) instead of dividing it (position / div_term?)"] = (
        lambda c: 10000.0 ** (2 * (c // 2) / d))
    rules["use the frequency exp(-2i): the exponent lost its factor ln(10000)/D (operator precedence, "
          "e.g. `/ d_model // 2`?)"] = lambda c: torch.exp(-2 * (c // 2))
    return rules


def _frequencies(got: torch.Tensor, max_len: int, d: int) -> str:
    """Which frequencies the sin columns and the cos columns of ``got`` use, in words ('' if no rule fits).
    Compared where the angle is small enough for float32 to hold it (< 100 rad)."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    rules = _frequency_rules(d)
    found = []
    for first, wave in ((0, torch.sin), (1, torch.cos)):
        columns = torch.arange(first, d, 2, dtype=torch.float64)
        mine = got.detach().double()[:, first::2]

        def fits(freq: Any, mine: torch.Tensor = mine, columns: torch.Tensor = columns,
                 wave: Any = wave) -> bool:
            angle = pos * freq(columns)
            usable = angle.abs() < 100
            return bool(usable.float().mean() >= 0.25 and torch.allclose(
                mine[usable], wave(angle)[usable], rtol=0, atol=1e-4))

        rule = next((name for name, freq in rules.items() if fits(freq)), None)
        if rule is None:
            return ""
        found.append(rule)
    (sin_rule, cos_rule) = found
    if sin_rule == cos_rule == "are right":
        return ""
    tail = "; each pair of columns 2i, 2i+1 shares the frequency 1/10000^(2i/D)"
    if sin_rule == cos_rule:
        return f"all columns {sin_rule}{tail}"
    return f"the sin columns (0, 2, ...) {sin_rule}; the cos columns (1, 3, ...) {cos_rule}{tail}"


def _check_table(got: Any, max_len: int, d: int, what: str) -> None:
    expected = ref.sinusoidal_positional_encoding(max_len, d)
    mistakes = _pe_mistakes(max_len, d)
    if isinstance(got, torch.Tensor) and got.dtype == torch.float64 and got.shape == expected.shape:
        raise AssertionError(f"{what} has dtype torch.float64; return float32 (.float()) ({SECTION_PE}).")
    if isinstance(got, torch.Tensor) and got.shape == expected.shape and got.dtype == expected.dtype:
        if torch.allclose(got, expected, **PE_TOL):
            record(what, got, PE_TOL)
            return
        named = any(torch.allclose(got, wrong, **PE_TOL) for wrong in mistakes.values())
        why = "" if named else _frequencies(got, max_len, d)
        if why:
            raise AssertionError(f"{what}: {why} ({SECTION_PE}).")
    assert_matches(got, expected, what, mistakes, tol=PE_TOL,
                   hint=f"Expected PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(...) ({SECTION_PE}).")


def check_sinusoidal_positional_encoding(ns: dict[str, Any]) -> None:
    fn = student_name(ns, "sinusoidal_positional_encoding")
    for max_len, d in [(50, 8), (1, 2), (128, 64), (7, 6)]:
        _check_table(fn(max_len, d), max_len, d, f"sinusoidal_positional_encoding({max_len}, {d})")
    try:
        ns["sinusoidal_positional_encoding"](10, 7)
    except ValueError:
        return
    except NotImplementedError:
        raise
    except Exception as exc:
        raise AssertionError(f"sinusoidal_positional_encoding(10, 7) raised {type(exc).__name__}; raise "
                             "ValueError for an odd d_model.") from None
    raise AssertionError("sinusoidal_positional_encoding(10, 7) should raise ValueError: d_model must be even.")


def _pe_buffer(module: nn.Module, what: str) -> torch.Tensor:
    params = dict(module.named_parameters())
    if "pe" in params:
        raise AssertionError(f"{what}: `pe` is an nn.Parameter, so the optimiser would change it; register "
                             f"it with self.register_buffer('pe', table) ({SECTION_MODULE}).")
    buffers = dict(module.named_buffers())
    if "pe" not in buffers:
        kind = type(getattr(module, "pe", None)).__name__
        raise AssertionError(f"{what}: `pe` is not a registered buffer (it is a {kind}), so .to(device) "
                             f"would not move it; use self.register_buffer('pe', table) ({SECTION_MODULE}).")
    return buffers["pe"]


def check_PositionalEncoding(ns: dict[str, Any]) -> None:  # noqa: N802 (the SPEC's class name)
    cls = student_name(ns, "PositionalEncoding")
    gen = generator(501)
    with reference_for(ns, sinusoidal_positional_encoding=ref.sinusoidal_positional_encoding):
        for d, max_len, length, dtype in [(16, 64, 10, torch.float32), (8, 20, 20, torch.float64),
                                          (4, 5, 1, torch.float32)]:
            module = construct(cls, "PositionalEncoding", d, dropout=0.0, max_len=max_len)
            what = f"PositionalEncoding({d}, dropout=0.0, max_len={max_len})"
            pe = _pe_buffer(module, what)
            table = ref.sinusoidal_positional_encoding(max_len, d)
            if pe.numel() != table.numel() or not torch.allclose(pe.reshape(table.shape).float(), table, **PE_TOL):
                raise AssertionError(f"{what}: the `pe` buffer should hold the ({max_len}, {d}) sinusoidal table, "
                                     f"got shape {tuple(pe.shape)}.")
            record(f"{what}: the `pe` buffer", pe.reshape(table.shape).float(), PE_TOL)
            module.to(dtype).eval()
            if dict(module.named_buffers())["pe"].dtype != dtype:
                raise AssertionError(f"{what}: .to({dtype}) did not convert `pe`; register it as a buffer.")
            x = randn(2, length, d, gen=gen, dtype=dtype)
            out = guarded(module, "PositionalEncoding.forward")(x)
            expected = x + table[:length].to(dtype)
            # The table is float32 by contract, so after .to(float64) it holds float32 precision:
            # a correct table built with another float32 formula differs by up to PE_TOL.
            assert_matches(out, expected, f"{what} on x {(2, length, d)}",
                           hint=f"Expected dropout(x + pe[:L]) ({SECTION_MODULE}).",
                           tol={"rtol": tolerance(dtype)["rtol"], "atol": PE_TOL["atol"]})
        module = construct(cls, "PositionalEncoding", 8, dropout=0.0, max_len=6)
        try:
            module(torch.zeros(1, 7, 8))
        except ValueError:
            pass
        except NotImplementedError:
            raise
        except Exception as exc:  # an IndexError, an assert, or PyTorch's broadcasting error
            raise AssertionError(
                f"a sequence longer than max_len raised {type(exc).__name__} ({' '.join(str(exc).split())[:80]}); "
                f"compare L with max_len first and raise a ValueError that names max_len ({SECTION_MODULE}).") from None
        else:
            raise AssertionError(f"PositionalEncoding(8, max_len=6) accepted a sequence of length 7; raise a "
                                 f"ValueError when L > max_len ({SECTION_MODULE}).")
        module = construct(cls, "PositionalEncoding", 8, dropout=0.5, max_len=16)
        x = torch.ones(4, 16, 8)
        module.train()
        torch.manual_seed(0)
        trained = module(x)
        module.eval()
        if (trained == 0).sum() == 0:
            raise AssertionError(f"with dropout=0.5 in train() mode nothing was dropped: apply nn.Dropout after "
                                 f"adding the table ({SECTION_MODULE}).")
        out = module(x)
        if not torch.allclose(out, x + ref.sinusoidal_positional_encoding(16, 8)[:16], **PE_TOL):
            raise AssertionError(f"in eval() mode the output should be x + pe[:L] exactly (no dropout) "
                                 f"({SECTION_MODULE}).")
        record("PositionalEncoding(8, dropout=0.5) in eval() mode", out, PE_TOL)


def check_TokenEmbedding(ns: dict[str, Any]) -> None:  # noqa: N802 (the SPEC's class name)
    cls = student_name(ns, "TokenEmbedding")
    gen = generator(502)
    for vocab, d, dtype in [(11, 16, torch.float32), (5, 4, torch.float64), (30, 1 * 2, torch.float32)]:
        mine = construct(cls, "TokenEmbedding", vocab, d)
        embedding = getattr(mine, "embedding", None)
        if not isinstance(embedding, nn.Embedding) or embedding.weight.shape != (vocab, d):
            raise AssertionError(f"TokenEmbedding({vocab}, {d}) needs an attribute `embedding` = "
                                 f"nn.Embedding({vocab}, {d}) ({SECTION_EMBED}).")
        weight = randn(vocab, d, gen=gen)
        with torch.no_grad():
            embedding.weight.copy_(weight)
        mine.to(dtype)
        tokens = torch.randint(0, vocab, (3, 5), generator=gen)
        out = guarded(mine, "TokenEmbedding.forward")(tokens)
        base = weight.to(dtype)[tokens]
        assert_matches(out, base * math.sqrt(d), f"TokenEmbedding({vocab}, {d}) on tokens (3, 5)", {
            f"is not scaled: multiply the embeddings by sqrt(d_model) ({SECTION_EMBED}).": base,
            f"is multiplied by d_model; the scale is sqrt(d_model) ({SECTION_EMBED}).": base * d,
            f"is divided by sqrt(d_model); the paper multiplies by it ({SECTION_EMBED}).": base / math.sqrt(d),
        }, hint=f"Expected embedding(tokens) * sqrt(d_model) ({SECTION_EMBED}).")
        out.sum().backward()
        if embedding.weight.grad is None:
            raise AssertionError("no gradient reaches `embedding.weight`.")
        expected_grad = torch.zeros(vocab, d, dtype=dtype).index_add_(
            0, tokens.flatten(), torch.full((tokens.numel(), d), math.sqrt(d), dtype=dtype))
        assert_matches(embedding.weight.grad, expected_grad, "gradient of `embedding.weight`")
