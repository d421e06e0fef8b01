"""An answer's equivalent form: the same code whichever of PyTorch's spellings a student chose.

Fingerprints (:mod:`.similarity`) see through renamed variables, comments and layout, but each rewritten
token breaks every k-gram around it: ``q @ k.transpose(-2, -1)`` and ``torch.matmul(q, torch.transpose(k,
-2, -1))`` share none. The equivalent form, built with :mod:`ast`, writes both the same way:

- docstrings dropped; local names, arguments and strings replaced by one placeholder each
  (``v``, ``'s'``); annotations dropped;
- a torch operation in method form, function form or ``nn.functional`` form (``x.softmax(d)``,
  ``torch.softmax(x, d)``, ``F.softmax(x, dim=d)``) becomes one call ``op_softmax(x, d)``; the keyword
  arguments' values follow the positional ones, by keyword name;
- an operator and its function form are one call: ``a @ b``, ``torch.matmul(a, b)`` and ``a.bmm(b)`` are
  ``op_matmul(a, b)`` (and ``k.mT`` is ``op_transpose(k, -2, -1)``); ``x ** 2`` and ``x.square()`` are
  ``op_pow(x, 2)``; ``a / b`` and ``a.div(b)`` are ``op_truediv(a, b)`` (likewise ``*``, ``+``, ``-``);
- a helper defined in the same cell whose body is one ``return`` is inlined where it is called.

Two honest answers to a short exercise often have the same equivalent form (there are few ways to build
a causal mask): the form is evidence only against what the class's other answers to the same exercise
share (:func:`.similarity.students`).
"""

from __future__ import annotations

import ast
import copy
import io
import keyword
import tokenize

# torch operations that have a method form, a function form (torch.*) or an nn.functional form.
OPS = frozenset("""
    softmax log_softmax matmul bmm mm transpose permute tril triu masked_fill masked_fill_ sum mean exp log sqrt
    rsqrt pow square view reshape contiguous unsqueeze squeeze expand expand_as repeat repeat_interleave cat
    concat stack split chunk max min amax amin argmax topk sort cumsum gather where sin cos abs neg relu gelu silu
    sigmoid tanh flatten clamp clip div mul add sub float to type_as einsum outer multinomial argsort narrow flip
    roll var std norm dropout layer_norm linear embedding cross_entropy nll_loss one_hot pad
    scaled_dot_product_attention logical_not bitwise_not ones_like zeros_like full_like new_ones new_zeros
    arange zeros ones full empty rand randn outer polar view_as_complex view_as_real
""".split())
SAME = {"bmm": "matmul", "mm": "matmul", "masked_fill_": "masked_fill", "concat": "cat", "clip": "clamp",
        "div": "truediv", "mul": "mult", "add": "plus", "sub": "minus", "amax": "max", "amin": "min",
        "bitwise_not": "logical_not"}
BINARY = {ast.MatMult: "matmul", ast.Pow: "pow", ast.Div: "truediv", ast.Mult: "mult", ast.Add: "plus",
          ast.Sub: "minus"}
NAMESPACES = frozenset({"torch", "F", "functional", "nn", "math", "np", "numpy"})
KEEP = frozenset({"self", "True", "False", "None", "super", "range", "len", "float", "int", "isinstance"})


def _dotted(node: ast.AST) -> str | None:
    """``'torch.nn.functional'`` for that attribute chain, None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _op(name: str, args: list[ast.expr]) -> ast.Call:
    if name == "square":
        name, args = "pow", [*args, ast.Constant(2)]
    return ast.Call(func=ast.Name(id=f"op_{SAME.get(name, name)}", ctx=ast.Load()), args=args, keywords=[])


class _Unify(ast.NodeTransformer):
    """Operators, method forms and function forms of one operation to one ``op_*`` call."""

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr == "mT" and isinstance(node.ctx, ast.Load):  # x.mT is x.transpose(-2, -1)
            return _op("transpose", [node.value, ast.Constant(-2), ast.Constant(-1)])
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        name = BINARY.get(type(node.op))
        return _op(name, [node.left, node.right]) if name else node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr not in OPS:
            return node
        args = [*node.args, *(kw.value for kw in sorted(node.keywords, key=lambda kw: kw.arg or ""))]
        owner = _dotted(func.value)
        if owner is not None and owner.split(".")[0] in NAMESPACES:  # torch.op(x, ...), F.op(x, ...)
            return _op(func.attr, args)
        return _op(func.attr, [func.value, *args])  # x.op(...)


class _Placeholders(ast.NodeTransformer):
    """Local names and arguments to ``v``, strings to ``'s'``, annotations dropped."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id.startswith("op_") or node.id in NAMESPACES or node.id in KEEP:
            return node
        return ast.copy_location(ast.Name(id="v", ctx=node.ctx), node)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg, node.annotation = "v", None
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.copy_location(ast.Constant("s"), node) if isinstance(node.value, str) else node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.returns = None
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node) if node.value else node


def _drop_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[:1] = [ast.Pass()] if len(body) == 1 else []


def _inline(tree: ast.Module) -> None:
    """Helpers of the cell whose body is one ``return expr`` (plain arguments), inlined where called by
    name with all their arguments; a helper left uncalled stays."""
    helpers = {node.name: node for node in tree.body
               if isinstance(node, ast.FunctionDef) and len(node.body) == 1 and isinstance(node.body[0], ast.Return)
               and node.body[0].value is not None and not node.args.vararg and not node.args.kwarg
               and not node.args.kwonlyargs and not node.args.defaults}
    if not helpers:
        return

    class Bind(ast.NodeTransformer):
        def __init__(self, bound: dict[str, ast.expr]):
            self.bound = bound

        def visit_Name(self, node: ast.Name) -> ast.AST:
            return copy.deepcopy(self.bound[node.id]) if node.id in self.bound else node

    class Inline(ast.NodeTransformer):
        used: set[str] = set()

        def visit_Call(self, call: ast.Call) -> ast.AST:
            self.generic_visit(call)
            helper = helpers.get(call.func.id) if isinstance(call.func, ast.Name) else None
            if helper is None:
                return call
            params = [a.arg for a in [*helper.args.posonlyargs, *helper.args.args]]
            bound = dict(zip(params, call.args, strict=False)) | {kw.arg: kw.value for kw in call.keywords if kw.arg}
            if set(bound) != set(params) or len(call.args) > len(params):
                return call
            self.used.add(helper.name)
            return Bind(bound).visit(copy.deepcopy(helper.body[0].value))

    inline = Inline()
    body = [inline.visit(node) for node in tree.body]  # helpers' own calls of helpers too (from the originals)
    tree.body = [node for node in body if not (isinstance(node, ast.FunctionDef) and node.name in inline.used)]


def equivalent_form(code: str) -> str:
    """``code`` in its equivalent form (see the module's docstring); ``code`` as it is where it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code
    _drop_docstrings(tree)
    _inline(tree)
    tree = _Placeholders().visit(_Unify().visit(tree))
    return ast.unparse(ast.fix_missing_locations(tree))


def as_written(code: str) -> str:
    """``code`` without its docstrings, laid out by ``ast.unparse`` (comments and layout gone, names kept)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code
    _drop_docstrings(tree)
    return ast.unparse(tree)


def tokens(code: str, equivalent: bool = True) -> list[str]:
    """The tokens of ``code``'s equivalent form, or (``equivalent=False``) of the code as written; layout
    and comments left out."""
    text = equivalent_form(code) if equivalent else as_written(code)
    found = _positioned(text)
    return [t for t, _, _ in found] if found or not text.strip() else text.split()


def own(found: list[str], given: list[str]) -> list[bool]:
    """For each token of ``found``, whether the stub's tokens ``given`` leave it unaccounted for (difflib's
    matching blocks, in order): what every student was handed is not theirs."""
    import difflib

    mine = [True] * len(found)
    if given:
        for _, start, size in difflib.SequenceMatcher(None, given, found, autojunk=False).get_matching_blocks():
            mine[start:start + size] = [False] * size
    return mine


def given(stub: str) -> str:
    """The stub without its ``raise NotImplementedError(...)`` lines: what every student keeps of it."""
    return "\n".join(line for line in stub.splitlines() if not line.strip().startswith("raise NotImplementedError"))


def _positioned(text: str) -> list[tuple[str, int, int]]:
    """``(token, start, end)`` of each token of ``text``, offsets into ``text`` (layout and comments left out)."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    skip = {tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER, tokenize.COMMENT}
    try:
        return [(t.string, starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1])
                for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in skip]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []


def _matchable(found: list[tuple[str, int, int]], equivalent: bool) -> list[str]:
    """The tokens as they are matched: as they are in the equivalent form (already normalised); as written,
    names (not attributes, keywords or builtins) as ``v`` and strings as ``'s'``, as the fingerprints do."""
    if equivalent:
        return [t for t, _, _ in found]
    out = []
    for k, (t, _, _) in enumerate(found):
        name = t.isidentifier() and not keyword.iskeyword(t) and t not in KEEP and t not in NAMESPACES
        after_dot = k > 0 and found[k - 1][0] == "."
        out.append("v" if name and not after_dot else "'s'" if t[:1] in "'\"" or t[:2] in ("f'", 'f"') else t)
    return out


def side_by_side(a: str, b: str, stub: str, equivalent: bool = True) -> tuple[str, str]:
    """The two answers in their equivalent form (or as written), as HTML: the tokens of each that match
    the other's (as written: names and strings aside), beyond what the stub gave both, in
    ``<span class="hl">``. Whole tokens only; never a token of the stub's."""
    import difflib
    import html

    texts = [equivalent_form(c) if equivalent else as_written(c) for c in (a, b)]
    stub = given(stub)
    kept = _matchable(_positioned(equivalent_form(stub) if equivalent else as_written(stub)), equivalent) \
        if stub else []
    marks = []  # per answer: (matchable token, start, end, index among all its tokens) of its own tokens
    for text in texts:
        found = _positioned(text)
        keys = _matchable(found, equivalent)
        mine = own(keys, kept)
        marks.append([(keys[k], s, e, k) for k, (_, s, e) in enumerate(found) if mine[k]])
    matched: list[set[int]] = [set(), set()]
    matcher = difflib.SequenceMatcher(None, [m[0] for m in marks[0]], [m[0] for m in marks[1]], autojunk=False)
    for i, j, size in matcher.get_matching_blocks():
        matched[0].update(range(i, i + size))
        matched[1].update(range(j, j + size))
    shown = []
    for text, ours, hits in zip(texts, marks, matched, strict=True):
        out, at, runs = [], 0, []
        for k in sorted(hits):  # runs of tokens next to each other in the text, one span each
            if runs and ours[runs[-1][1]][3] == ours[k][3] - 1:
                runs[-1][1] = k
            else:
                runs.append([k, k])
        for first, last in runs:
            start, end = ours[first][1], ours[last][2]
            out += [html.escape(text[at:start]), '<span class="hl">', html.escape(text[start:end]), "</span>"]
            at = end
        shown.append("".join(out) + html.escape(text[at:]))
    return shown[0], shown[1]
