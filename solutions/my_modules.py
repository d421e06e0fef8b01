"""Your own building blocks from notebooks 01-06, to train with in notebook 07.

``load(folder)`` runs the answer cells of your filled-in notebooks 01-06 (in order, in one
namespace, so your ``DecoderLayer`` is built from your ``MultiHeadAttention``), then checks
each block against the course's reference (``course_blocks``) on a small random input, in the
order the notebooks build them. The first block that differs stops it with a
:class:`MyModulesError` that names it and its notebook: a mistake shows up where it was made,
not as a poor BLEU score ten minutes later.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from pathlib import Path

import course_blocks as ref
import torch

NOTEBOOKS = ["01_self_attention", "02_scaled_dot_product", "03_multi_head", "04_masking",
             "05_positional_encoding", "06_transformer"]
# Answer cells may use what their notebooks imported at the top.
PRELUDE = "import math\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n"


class MyModulesError(RuntimeError):
    """Your notebooks could not be loaded, or one of your blocks differs from the course's."""


def notebook_path(folder: Path, name: str) -> Path:
    """``folder/NN_name/NN_name.ipynb`` (the course's layout) or ``folder/NN_name.ipynb``."""
    for path in (folder / name / f"{name}.ipynb", folder / f"{name}.ipynb"):
        if path.is_file():
            return path
    raise MyModulesError(
        f"no {name}.ipynb in {folder / name} or {folder}: put your filled-in notebooks 01-06 there "
        "(as the course's folders are laid out), or pass load(folder=...)")


def answer_cells(path: Path) -> list[str]:
    """The source of each answer cell (the cells you wrote in), in order."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells
            if c["cell_type"] == "code" and c.get("metadata", {}).get("nbgrader", {}).get("solution")]


def _close(what: str, got: object, expected: torch.Tensor) -> None:
    if not isinstance(got, torch.Tensor):
        raise AssertionError(f"{what} returned a {type(got).__name__}, expected a tensor")
    if got.shape != expected.shape:
        raise AssertionError(f"{what} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
    if got.dtype == torch.bool or expected.dtype == torch.bool:
        if not torch.equal(got, expected):
            raise AssertionError(f"{what} differs at {int((got != expected).sum())} positions")
    elif not torch.allclose(got.double(), expected.double(), rtol=1e-4, atol=1e-5):
        error = (got.double() - expected.double()).abs().max().item()
        raise AssertionError(f"{what} differs (max abs error {error:.3g})")


def _same_module(mine: type, theirs: type, args: tuple, inputs: Callable[[], tuple], what: str) -> None:
    """Build both with ``args``, give yours the reference's weights, compare outputs in eval mode."""
    torch.manual_seed(0)
    reference = theirs(*args).eval()
    module = mine(*args).eval()
    try:
        module.load_state_dict(reference.state_dict())
    except RuntimeError as exc:
        raise AssertionError(f"its parameters differ from the course's: {' '.join(str(exc).split())[:300]}") from None
    with torch.no_grad():
        got, expected = module(*inputs()), reference(*inputs())
    for i, (g, e) in enumerate(zip(got, expected, strict=True) if isinstance(expected, tuple) else [(got, expected)]):
        _close(f"{what}, output {i}" if isinstance(expected, tuple) else what, g, e)


def _checks(ns: dict) -> list[tuple[str, str, Callable[[], None]]]:
    """(name, notebook, check) for every block, in the order the notebooks build them."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 16, generator=g)
    q, k, v = (torch.randn(2, 4, 5, 8, generator=g) for _ in range(3))
    mask = torch.rand(2, 1, 5, 5, generator=g) > 0.3
    mask[..., 0] = True  # every query may attend somewhere
    tokens = torch.tensor([[5, 6, 7, 3, 0, 0], [5, 6, 7, 8, 9, 3]])
    memory = torch.randn(2, 6, 16, generator=g)
    src_mask, tgt_mask = ref.make_padding_mask(tokens, 0), ref.make_decoder_mask(tokens, 0)
    y = torch.randn(2, 6, 16, generator=g)
    weight, bias = torch.randn(16, generator=g), torch.randn(16, generator=g)

    def fn(name: str, *args: object) -> Callable[[], None]:
        return lambda: _close(f"{name}(...)", ns[name](*args), getattr(ref, name)(*args))

    def mod(name: str, args: tuple, inputs: Callable[[], tuple]) -> Callable[[], None]:
        return lambda: _same_module(ns[name], getattr(ref, name), args, inputs, f"{name}(...)")

    def sdpa() -> None:
        _same_pair("scaled_dot_product_attention(...)", ns["scaled_dot_product_attention"](q, k, v, mask),
                   ref.scaled_dot_product_attention(q, k, v, mask))

    def _same_pair(what: str, got: object, expected: tuple) -> None:
        if not isinstance(got, tuple | list) or len(got) != 2:
            raise AssertionError(f"{what} should return (output, weights)")
        _close(f"{what} output", got[0], expected[0])
        _close(f"{what} weights", got[1], expected[1])

    return [
        ("softmax", NOTEBOOKS[0], fn("softmax", x, 1)),
        ("scaled_dot_product_attention", NOTEBOOKS[1], sdpa),
        ("split_heads", NOTEBOOKS[2], fn("split_heads", x, 4)),
        ("combine_heads", NOTEBOOKS[2], fn("combine_heads", q)),
        ("MultiHeadAttention", NOTEBOOKS[2], mod("MultiHeadAttention", (16, 4), lambda: (x, x, x, mask))),
        ("make_padding_mask", NOTEBOOKS[3], fn("make_padding_mask", tokens, 0)),
        ("make_causal_mask", NOTEBOOKS[3], fn("make_causal_mask", 6)),
        ("make_decoder_mask", NOTEBOOKS[3], fn("make_decoder_mask", tokens, 0)),
        ("PositionalEncoding", NOTEBOOKS[4], mod("PositionalEncoding", (16, 0.0, 50), lambda: (y,))),
        ("TokenEmbedding", NOTEBOOKS[4], mod("TokenEmbedding", (10, 16), lambda: (tokens,))),
        ("layer_norm", NOTEBOOKS[5], fn("layer_norm", y, weight, bias)),
        ("PositionwiseFeedForward", NOTEBOOKS[5], mod("PositionwiseFeedForward", (16, 32, 0.0), lambda: (y,))),
        ("EncoderLayer", NOTEBOOKS[5], mod("EncoderLayer", (16, 4, 32, 0.0), lambda: (y, src_mask))),
        ("DecoderLayer", NOTEBOOKS[5],
         mod("DecoderLayer", (16, 4, 32, 0.0), lambda: (y, memory, src_mask, tgt_mask))),
        ("Encoder", NOTEBOOKS[5], mod("Encoder", (2, 16, 4, 32, 0.0), lambda: (y, src_mask))),
        ("Decoder", NOTEBOOKS[5], mod("Decoder", (2, 16, 4, 32, 0.0), lambda: (y, memory, src_mask, tgt_mask))),
        ("Transformer", NOTEBOOKS[5],
         mod("Transformer", (10, 10, 16, 4, 2, 32, 0.0, 50, 0), lambda: (tokens, tokens))),
    ]


def load(folder: str | Path = "..") -> types.SimpleNamespace:
    """Your blocks from the notebooks 01-06 in ``folder``, each checked against the course's.

    Returns:
        A namespace with your ``Transformer`` (which also takes the course's ``tie_embeddings``
        switch), ``make_padding_mask``, ``make_decoder_mask`` and every other block.

    Raises:
        MyModulesError: a notebook is missing, an answer cell fails to run, or a block is
            unwritten or gives other values than the course's (the first, in notebook order).
    """
    folder = Path(folder)
    ns: dict = {"__name__": "my_modules_answers"}
    exec(PRELUDE, ns)  # your own cells, run as the notebooks ran them
    for name in NOTEBOOKS:
        path = notebook_path(folder, name)
        for i, source in enumerate(answer_cells(path), 1):
            try:
                exec(compile(source, f"<{name}, answer cell {i}>", "exec"), ns)
            except Exception as exc:
                raise MyModulesError(f"answer cell {i} of {path} failed to run: {type(exc).__name__}: {exc}") from exc
    for block, notebook, check in _checks(ns):
        if block not in ns:
            raise MyModulesError(f"{notebook} defines no `{block}`: keep the exercise's name.")
        try:
            check()
        except NotImplementedError:
            raise MyModulesError(f"your `{block}` ({notebook}) is not written yet.") from None
        except Exception as exc:
            raise MyModulesError(
                f"your `{block}` ({notebook}) does not match the course's: {type(exc).__name__}: {exc}. "
                f"Fix it in {notebook} (its `check` names the mistake), or train the course's model "
                "(USE_MY_MODULES = False).") from None

    class Transformer(ns["Transformer"]):  # your model, plus the course's weight-tying switch
        def __init__(self, *args, tie_embeddings: bool = False, **kwargs):
            super().__init__(*args, **kwargs)
            if tie_embeddings:  # paper section 3.4: the generator reuses the target embedding matrix
                self.generator.weight = self.tgt_embed.embedding.weight

    blocks = {block: ns[block] for block, _, _ in _checks(ns)}
    return types.SimpleNamespace(**{**blocks, "Transformer": Transformer})


if __name__ == "__main__":  # python my_modules.py [folder]: check your blocks without training
    import sys

    load(sys.argv[1] if len(sys.argv) > 1 else "..")
    print("all your blocks from notebooks 01-06 match the course's")
