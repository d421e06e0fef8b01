"""Helpers for hidden tests: compare a student's answer with the reference and name the mistake.

Every check raises ``AssertionError`` with a one-line message meant for the student:
what was wrong (shape, dtype, largest error and where), and, when the answer matches a
known mistake, which one and where the notebook explains it. Messages never print
reference values, only shapes, errors and positions.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

# While a test cell runs under the grader, every comparison that passes appends what it saw
# here: (what, the student's value, tolerance). The grader then compares those values again,
# in its own process, with the reference's (transformer_course.grading.notebook.verify): a notebook that changes
# how tensors compare inside its own process cannot change that verdict.
RECORD: list[tuple[str, Any, dict[str, float] | None]] | None = None


def record(what: str, got: Any, tol: Mapping[str, float] | None = None) -> None:
    """Note a value that passed a comparison (``tol`` None: it must be equal, not just close)."""
    if RECORD is not None:
        value = got.detach().clone() if isinstance(got, torch.Tensor) else got
        RECORD.append((what, value, dict(tol) if tol is not None else None))


def generator(seed: int) -> torch.Generator:
    """A private RNG, so a student who reseeds torch cannot steer the test inputs."""
    return torch.Generator().manual_seed(seed)


def randn(*shape: int, gen: torch.Generator, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """Tolerances that accept every correct formula (matmul, einsum, float64 inside), whatever
    the order of its sums: ``rtol`` and ``atol`` per element, and ``scale``, an error allowed in
    proportion to the largest expected magnitude. A value summed over many terms (a gradient over
    a batch) carries rounding of the size of its terms, not of itself, and that rounding changes
    with threads, BLAS paths and fused kernels: measured, a float32 gradient of
    ``GroupedQueryAttention`` differs from its float64 value by up to 1.3e-6 of the largest entry,
    more than ``rtol``/``atol`` allow near zero. The rule is :func:`within`."""
    if dtype == torch.float64:
        return {"rtol": 1e-7, "atol": 1e-9, "scale": 1e-12}
    if dtype == torch.bfloat16:
        return {"rtol": 2e-2, "atol": 2e-2, "scale": 1e-2}
    return {"rtol": 1e-4, "atol": 1e-5, "scale": 2e-5}


def allowance(expected: torch.Tensor, tol: Mapping[str, float]) -> torch.Tensor:
    """The error :func:`within` allows each element of ``expected``: ``atol + rtol * |expected| + scale *
    max|expected|`` over its finite elements (float64; ``scale`` defaults to 0)."""
    e = expected.detach().double()
    finite = e[torch.isfinite(e)]
    largest = finite.abs().max().item() if finite.numel() else 0.0
    return tol["atol"] + tol.get("scale", 0.0) * largest + tol["rtol"] * e.abs()


def within(got: torch.Tensor, expected: torch.Tensor, tol: Mapping[str, float]) -> torch.Tensor:
    """Element-wise ``|got - expected| <=`` :func:`allowance` (the one comparison rule of the checks and
    of the grader's verification). Infinities match only themselves; NaN matches nothing."""
    g, e = got.detach().double(), expected.detach().double()
    return (g == e) | (torch.isfinite(g) & torch.isfinite(e) & ((g - e).abs() <= allowance(e, tol)))


# What PyTorch says when a tensor on one device meets one on another ("meta" standing in for a GPU).
# Only these: "Tensor.item() cannot be called on meta tensors" or "Cannot copy out of meta tensor"
# say that meta has no values, which a GPU has; code that reads a value is not a mistake.
_DEVICE_ERRORS = ("is not on the expected device", "Expected all tensors to be on the same device")


def on_another_device(call: Callable[[], Any], what: str, made: str) -> None:
    """Run ``call`` (the student's code on inputs on the meta device, which needs no GPU and, like a
    GPU, refuses to mix with CPU tensors) and fail, naming the mistake, when ``made`` was built on
    the CPU: the error, or a result on the CPU. Other failures on "meta" (``.item()`` of a value it
    does not have) decide nothing: this check then passes, and the value checks stand."""
    meta = torch.device("meta")
    try:
        result = call()
    except Exception as exc:  # noqa: BLE001 (decided by the message)
        mixed = any(e in str(exc) for e in _DEVICE_ERRORS)
        if isinstance(exc, NotImplementedError) and not mixed and "meta tensor" not in str(exc):
            raise  # the stub: not attempted (meta's "Cannot copy out of meta tensor" is a value read)
        if mixed:
            raise AssertionError(
                f"{what} fails when its inputs are on another device than the CPU (a GPU): {made} is made on "
                f"the CPU, and on a GPU this raises \"Expected all tensors to be on the same device\". Create it on "
                f"the input's device (`device=x.device`, or `torch.full_like`/`zeros_like`).") from None
        return
    results = result if isinstance(result, tuple | list) else (result,)
    for value in results:
        if isinstance(value, torch.Tensor) and value.device != meta:
            raise AssertionError(f"{what} returns a tensor on {value.device} for inputs on another device: {made} "
                                 f"is made on the CPU; create it on the input's device (`device=x.device`).")


def _describe(value: Any) -> str:
    if _remote(value):
        return type_name(value)
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)} {str(value.dtype).replace('torch.', '')}"
    return repr(value) if isinstance(value, int | float | bool | None) else type(value).__name__


def student_name(ns: Mapping[str, Any], name: str) -> Any:
    """The student's definition of ``name``, or a clear failure if it is missing.

    A function comes back wrapped so that an error it raises is reported with the inputs
    it was called with (shapes and dtypes), as a one-line ``AssertionError``.
    ``NotImplementedError`` passes through: the grader reports it as "not attempted".
    """
    if name not in ns:
        raise AssertionError(
            f"`{name}` is not defined: run its answer cell, and keep the name `{name}`."
        )
    obj = ns[name]
    function = inspect.isfunction(obj) or (_remote(obj) and type_name(obj) == "function")
    return guarded(obj, name) if function else obj


# Hints for errors whose cause is a classic mistake.
_ERROR_HINTS = {
    "view size is not compatible": " (a transpose leaves the tensor non-contiguous: call .contiguous() "
                                   "before .view(), or use .reshape())",
}


def guarded(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` whose errors (other than asserts and NotImplementedError) become one-line
    ``AssertionError``s that name the call and the shapes it got."""

    @functools.wraps(fn)
    def called(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (AssertionError, NotImplementedError):
            raise
        except Exception as exc:
            inputs = ", ".join([_describe(a) for a in args]
                               + [f"{k}={_describe(v)}" for k, v in kwargs.items()])
            message = " ".join(str(exc).split())[:300]
            hint = "".join(h for key, h in _ERROR_HINTS.items() if key in message)
            raise AssertionError(f"{name}({inputs}) raised {type(exc).__name__}: {message}{hint}") from None

    return called


def construct(cls: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """Instantiate a student's class, reporting errors in one line and keeping the global RNG."""
    state = torch.random.get_rng_state()
    try:
        return guarded(cls, name)(*args, **kwargs)
    finally:
        torch.random.set_rng_state(state)


def as_tensor(result: Any, what: str) -> torch.Tensor:
    if not isinstance(result, torch.Tensor):
        raise AssertionError(f"{what} should be a torch.Tensor, got {type(result).__name__}.")
    return result


def unpack_pair(result: Any, what: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Check that ``result`` is an ``(output, weights)`` pair of tensors."""
    if not isinstance(result, tuple | list) or len(result) != 2:
        got = f"a {type(result).__name__}" if not isinstance(result, tuple | list) else (
            f"{len(result)} values")
        raise AssertionError(f"{what} should return a pair (output, weights), got {got}.")
    return as_tensor(result[0], f"{what}'s output"), as_tensor(result[1], f"{what}'s weights")


def _close(got: torch.Tensor, expected: torch.Tensor, tol: Mapping[str, float] | None = None) -> bool:
    return got.shape == expected.shape and bool(within(got, expected, tol or tolerance(expected.dtype)).all())


def assert_matches(
    got: Any,
    expected: torch.Tensor,
    what: str,
    mistakes: Mapping[str, torch.Tensor] | None = None,
    hint: str = "",
    tol: Mapping[str, float] | None = None,
    recorded: bool = True,
) -> None:
    """Fail with a student-facing message unless ``got`` equals ``expected``.

    Args:
        got: the student's result.
        expected: the reference result (its shape and dtype are the contract).
        what: how to call the result in the message, e.g. "softmax(x, dim=1)".
        mistakes: known wrong results, by a description of the mistake that made them;
            if ``got`` equals one of them, the message names it.
        hint: appended to the message when no known mistake matches.
        tol: ``rtol``/``atol`` to compare with, when the expected values carry less precision
            than their dtype (default: :func:`tolerance` of ``expected.dtype``).
        recorded: whether ``got`` is recorded for the comparison outside the kernel (see
            :data:`RECORD`); False when ``expected`` is the student's own result (a property,
            such as "dropout_p=0 changes nothing"), which has no reference value.
    """
    got = as_tensor(got, what)
    for description, wrong in (mistakes or {}).items():
        # NaN-tolerant here: a mistake is named whether or not NaN rows were zeroed.
        if (wrong is not None and _close(torch.nan_to_num(got), torch.nan_to_num(wrong), tol)
                and not _close(got, expected, tol)):
            raise AssertionError(f"{what}: {description}")
    if got.shape != expected.shape:
        raise AssertionError(
            f"{what} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}. {hint}".strip()
        )
    if got.dtype != expected.dtype:
        raise AssertionError(
            f"{what} has dtype {got.dtype}, expected {expected.dtype} (the dtype of the inputs)."
        )
    bad = ~torch.isfinite(got.detach())
    if bad.any() and torch.isfinite(expected).all():
        index = tuple(int(i) for i in bad.nonzero()[0])
        raise AssertionError(
            f"{what} contains inf/NaN (first at index {index}) where every value should be "
            f"finite. {hint}".strip()
        )
    if not _close(got, expected, tol):
        g, e = got.detach().double(), expected.detach().double()
        # Equal infinities (a -inf logit kept as -inf) are no difference; inf where a number belongs is.
        diff = torch.where(g == e, torch.zeros_like(g), (g - e).abs()).nan_to_num(nan=math.inf, posinf=math.inf)
        index = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
        found = locate(got, expected, tol)
        raise AssertionError(
            f"{what} differs from the expected values: max abs error {diff.max().item():.3g} "
            f"at index {index}{'; ' + found if found else ''}. {hint}".strip()
        )
    if recorded:
        record(what, got, tol or tolerance(expected.dtype))


def locate(got: torch.Tensor, expected: torch.Tensor, tol: Mapping[str, float] | None = None) -> str:
    """Where and how ``got`` differs from ``expected`` (same shape), in words, without values:
    a constant factor or offset, a transpose, or the indices of an axis that hold every
    difference ("only columns 1, 3, 5 of the last axis differ"). '' when nothing simple fits."""
    g, e = got.detach().double(), expected.detach().double()
    tol = dict(tol or tolerance(expected.dtype))
    close = within(g, e, tol)
    facts = []
    if e.dim() >= 2 and e.size(-1) == e.size(-2) and bool(within(g, e.transpose(-1, -2), tol).all()):
        return "it equals the expected result with its last two axes swapped (a transpose)"
    usable = e.abs() > 1e-6
    if usable.sum() >= 2:
        ratio = g[usable] / e[usable]
        factor = ratio.median().item()
        # A factor of about 1 is no diagnosis: the values differ in some other way.
        if abs(factor - 1) > 1e-3 and torch.allclose(ratio, torch.full_like(ratio, factor), rtol=1e-3, atol=1e-6):
            return f"it is the expected result times {factor:.4g} everywhere (a wrong scale factor?)"
    offset = g - e
    shift = offset.median().item()
    if abs(shift) > 1e-5 + tol["atol"] and torch.allclose(
            offset, torch.full_like(offset, shift), rtol=0, atol=1e-5 + tol["atol"]):
        return f"it is the expected result plus {shift:.4g} everywhere (a constant offset)"
    if close.all() or not (~close).any():
        return ""
    names = {e.dim() - 1: "the last axis", e.dim() - 2: "the second-to-last axis"} if e.dim() >= 2 else {0: "axis 0"}
    for axis in range(e.dim()):
        others = [d for d in range(e.dim()) if d != axis]
        wrong = (~close).any(dim=others) if others else ~close
        if 0 < int(wrong.sum()) < wrong.numel():
            where = [int(i) for i in wrong.nonzero().flatten()]
            shown = ", ".join(map(str, where[:8])) + (", ..." if len(where) > 8 else "")
            label = names.get(axis, f"axis {axis}")
            facts.append(f"only indices {shown} of {label} (size {e.size(axis)}) differ")
    return "; ".join(facts[:2])


def upstream_from(module: Any) -> Callable[..., dict[str, Any]]:
    """``upstream(*names)`` for a checks module: the reference versions, by name, of the earlier
    exercises an exercise builds on (for :func:`reference_for` and :func:`isolate`)."""

    def upstream(*names: str) -> dict[str, Any]:
        return {name: getattr(module, name) for name in names}

    return upstream


@contextlib.contextmanager
def reference_for(ns: dict[str, Any], **replacements: Any) -> Iterator[None]:
    """Temporarily replace names in the notebook's namespace with reference versions.

    An exercise that calls the student's earlier functions is then graded on its own:
    a mistake in ``softmax`` costs the ``softmax`` points only, not those of every
    exercise built on it.
    """
    lend = getattr(ns, "lend", None)  # the grader's namespace of a kernel it judges (transformer_course.grading.judging.judge)
    if lend is not None:
        with lend(replacements):
            yield
        return
    missing = object()
    saved = {name: ns.get(name, missing) for name in replacements}
    ns.update(replacements)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is missing:
                ns.pop(name, None)
            else:
                ns[name] = value


def isolate(ns: dict[str, Any], test: Callable[[], None], **replacements: Any) -> Callable[[], None]:
    """Wrap a visible test so that it runs with reference versions of earlier exercises."""

    @functools.wraps(test)
    def run() -> None:
        with reference_for(ns, **replacements):
            test()

    return run


@contextlib.contextmanager
def forbid(targets: Mapping[tuple[Any, str], str]) -> Iterator[list[str]]:
    """Record calls to built-ins an exercise must not use (e.g. ``torch.softmax``).

    Args:
        targets: ``{(owner, attribute): label}``; each attribute is wrapped for the
            duration of the block and its label is appended to the yielded list when called.
    """
    used: list[str] = []
    saved = []
    _WATCHES.append(({_dotted(owner, attr): label for (owner, attr), label in targets.items()}, used))
    for (owner, attr), label in targets.items():
        original = getattr(owner, attr)
        saved.append((owner, attr, original))

        def spy(*args: Any, __original: Any = original, __label: str = label, **kwargs: Any) -> Any:
            used.append(__label)
            return __original(*args, **kwargs)

        setattr(owner, attr, spy)
    try:
        yield used
    finally:
        _WATCHES.pop()
        for owner, attr, original in saved:
            setattr(owner, attr, original)


# forbid() blocks now open, for code the judge runs in the student's kernel (transformer_course.grading.judging.judge).
_WATCHES: list[tuple[dict[str, str], list[str]]] = []


def _dotted(owner: Any, attr: str) -> str:
    if isinstance(owner, type):
        return f"{owner.__module__}.{owner.__qualname__}.{attr}"
    return f"{owner.__name__}.{attr}"


def watched() -> dict[str, str]:
    """The built-ins every open :func:`forbid` block watches, by dotted path: their labels."""
    return {path: label for paths, _ in _WATCHES for path, label in paths.items()}


def note_used(labels: list[str]) -> None:
    """Built-ins that code run elsewhere (the student's kernel) called inside the open blocks."""
    for _, used in _WATCHES:
        used.extend(labels)


def _remote(value: Any) -> bool:
    """Whether ``value`` is an object of the student's kernel (a proxy of transformer_course.grading.judging.judge)."""
    return hasattr(type(value), "_course_is")


def is_instance(value: Any, cls: type) -> bool:
    """``isinstance(value, cls)``, also for an object of the student's kernel (asked there)."""
    return value._course_is(cls) if _remote(value) else isinstance(value, cls)


def type_name(value: Any) -> str:
    """The name of ``value``'s class, also for an object of the student's kernel."""
    if _remote(value):
        return object.__getattribute__(value, "_type").rsplit(".", 1)[-1]
    return type(value).__name__


def copy_linear(student: torch.nn.Module, reference: torch.nn.Module, names: list[str]) -> None:
    """Copy the reference's ``nn.Linear`` parameters into the student's by SPEC names."""
    for name in names:
        mine = getattr(student, name, None)
        theirs = getattr(reference, name)
        if not is_instance(mine, torch.nn.Linear):
            raise AssertionError(
                f"attribute `{name}` should be an nn.Linear, got {type_name(mine)}; keep "
                "the names given in the stub's __init__."
            )
        if mine.weight.shape != theirs.weight.shape:
            raise AssertionError(
                f"`{name}.weight` has shape {tuple(mine.weight.shape)}, expected "
                f"{tuple(theirs.weight.shape)} (nn.Linear(in_features, out_features) stores "
                "(out_features, in_features))."
            )
        if (mine.bias is None) != (theirs.bias is None):
            want = "no bias (bias=False)" if theirs.bias is None else "a bias"
            raise AssertionError(f"`{name}` should have {want}.")
        with torch.no_grad():
            mine.weight.copy_(theirs.weight)
            if theirs.bias is not None:
                mine.bias.copy_(theirs.bias)


def copy_parameters(student: torch.nn.Module, reference: torch.nn.Module, what: str) -> None:
    """Copy every reference parameter into the student's module by its SPEC name
    (e.g. ``encoder.layers.0.self_attn.w_q.weight``), with a clear message for a missing
    or mis-shaped one."""
    if not is_instance(student, torch.nn.Module):
        raise AssertionError(f"{what} should be an nn.Module, got {type_name(student)}.")
    mine = dict(student.named_parameters())
    for name, theirs in reference.named_parameters():
        if name not in mine:
            raise AssertionError(
                f"{what} has no parameter `{name}`: keep the attribute names of the stub's __init__ "
                "(the grader copies reference weights by name)."
            )
        if mine[name].shape != theirs.shape:
            raise AssertionError(
                f"{what}: parameter `{name}` has shape {tuple(mine[name].shape)}, expected {tuple(theirs.shape)}."
            )
        with torch.no_grad():
            mine[name].copy_(theirs)
    extra = sorted(set(mine) - {name for name, _ in reference.named_parameters()})
    if extra:
        raise AssertionError(
            f"{what} has parameters the model does not need: {', '.join(extra[:4])}"
            f"{' ...' if len(extra) > 4 else ''} (check its __init__ against the stub)."
        )


def randomise(module: torch.nn.Module, gen: torch.Generator, scale: float = 0.3) -> torch.nn.Module:
    """Give every parameter private random values (LayerNorm gains near 1), so no default init hides a bug."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = randn(*p.shape, gen=gen) * scale
            p.copy_(1.0 + noise if name.endswith("norm1.weight") or "norm" in name and name.endswith("weight")
                    else noise)
    return module
