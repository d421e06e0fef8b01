"""A test class for the similarity report (``make bench``, tests/test_similarity.py): honest students
and copiers, per exercise.

Honest students are the catalogue's correct variants (``catalogue/``: answers written in different
styles). Copiers take the published solution, or an honest classmate's answer, and disguise it the
ways students do: every local name renamed (and the code re-laid out: ``ast.unparse``), comments and
blank lines added, two independent statements swapped, and all three at once.
"""

from __future__ import annotations

import ast

from quality.catalogue import ANSWERS, CORRECT
from quality.catalogue import OUTSIDE_CORRECT as OUTSIDE
from transformer_course.instructors.similarity import SOLUTION, Pair, Report


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.mapping.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.mapping.get(node.arg, node.arg)
        return node


def renamed(code: str) -> str:
    """Every argument and local name renamed (``x`` -> ``inp_0``), laid out anew by ``ast.unparse``."""
    tree = ast.parse(code)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    args = {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments)
            for a in [*n.posonlyargs, *n.args, *n.kwonlyargs, n.vararg, n.kwarg] if a is not None}
    top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    names = sorted((stored | args) - top - {"self"})
    return ast.unparse(_Rename({name: f"inp_{i}" for i, name in enumerate(names)}).visit(tree))


def commented(code: str) -> str:
    """A comment above every second line and a blank line after every third, at the line's indent."""
    out = []
    for i, line in enumerate(code.splitlines()):
        indent = line[:len(line) - len(line.lstrip())]
        if i % 2 and line.strip() and not line.strip().startswith(("@", '"""', "'''")):
            out.append(f"{indent}# my step {i}: see the lecture notes")
        out.append(line)
        if i % 3 == 2 and line.strip().endswith((")", "]")) and not line.rstrip().endswith("\\"):
            out.append("")
    return "\n".join(out)


def reordered(code: str) -> str | None:
    """Two adjacent independent statements of a function body swapped (None: no such pair)."""
    tree = ast.parse(code)

    def names(node: ast.AST, ctx: type) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}

    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef):
            continue
        body = func.body
        for i in range(len(body) - 1):
            a, b = body[i], body[i + 1]
            if not all(isinstance(s, ast.Assign | ast.AugAssign | ast.AnnAssign) for s in (a, b)):
                continue
            if names(a, ast.Store) & (names(b, ast.Load) | names(b, ast.Store)) or \
                    names(b, ast.Store) & names(a, ast.Load):
                continue
            body[i], body[i + 1] = b, a
            return ast.unparse(tree)
    return None


def disguises(code: str) -> dict[str, str]:
    """The copier's versions of ``code``, by how it was disguised."""
    found = {"renamed": renamed(code), "commented": commented(code)}
    if (swapped := reordered(code)) is not None:
        found["reordered"] = swapped
    found["all three"] = commented(reordered(renamed(code)) or renamed(code))
    return found


def test_class(solutions: dict[str, str]) -> dict[str, dict[str, str]]:
    """exercise -> {student: answer}: ``own:<variant>`` and ``outside:<variant>`` for each correct
    variant of the two catalogues (honest students), ``copier:<disguise>`` of the published solution,
    and ``copier:all three:<student>`` of each honest classmate."""
    found: dict[str, dict[str, str]] = {}
    for exercise, solution in solutions.items():
        students = found.setdefault(exercise, {})
        for name, how in disguises(solution).items():
            students[f"copier:{name}"] = how
        honest = {f"own:{v}": code for v, code in CORRECT.get(exercise, {}).items()}
        honest |= {f"outside:{v}": code for v, (code, _) in OUTSIDE.get(exercise, {}).items()}
        for student, code in honest.items():
            students[student] = code
            students[f"copier:all three:{student}"] = disguises(code)["all three"]
    return found


def _honest(student: str) -> bool:
    return student.startswith(("own:", "outside:"))


def independent(pair: Pair) -> bool:
    """An honest answer against the published solution, or a pair with an answer from outside (two
    variants of the own catalogue share a head written once, by design)."""
    return _honest(pair.a) and (pair.b == SOLUTION or _honest(pair.b)) and not (
        pair.a.startswith("own:") and pair.b.startswith("own:"))


def figures(report: Report, threshold: float) -> dict[str, float | int]:
    """At ``threshold``, over the pairs the report compared (exercises and answers above the minimum
    length): copiers flagged (of the solution, of a classmate) and honest pairs flagged. Honest pairs
    are independent ones: each honest answer against the published solution, and pairs with an answer
    from outside; two variants of the own catalogue share a head written once, by design, and are
    counted apart."""
    copied = [p for p in report.pairs if p.b == SOLUTION and p.a.startswith("copier:") and p.a.count(":") == 1]
    classmate = [p for p in report.pairs if f"copier:all three:{p.b}" == p.a or f"copier:all three:{p.a}" == p.b]
    honest = [p for p in report.pairs if independent(p)]
    own = [p for p in report.pairs if p.a.startswith("own:") and p.b.startswith("own:")]

    def share(pairs: list) -> float:
        return 100 * sum(p.similarity >= threshold for p in pairs) / max(len(pairs), 1)

    return {
        "exercises compared": len({p.exercise for p in report.pairs}),
        "exercises below the minimum length (skipped)": len(report.skipped),
        "copiers of the solution": len(copied),
        "copiers of the solution flagged (%)": share(copied),
        "copiers of a classmate": len(classmate),
        "copiers of a classmate flagged (%)": share(classmate),
        "independent honest pairs": len(honest),
        "independent honest pairs flagged": sum(p.similarity >= threshold for p in honest),
        "own-catalogue variant pairs (a shared head)": len(own),
        "own-catalogue variant pairs flagged": sum(p.similarity >= threshold for p in own),
    }


# The class of issue 38: whole students across notebooks 01-06, honest ones written independently
# (catalogue/students/, the outside catalogue) and copiers of the published solution or of a classmate, each with one
# disguise on every exercise they copy.

class _Rewrite(ast.NodeTransformer):
    """The rewrites a copier makes token by token: each spelling of an operation to another one."""

    SWAP = frozenset({"softmax", "tril", "triu", "exp", "sqrt", "transpose", "masked_fill", "matmul", "sum", "mean",
                      "unsqueeze", "view", "reshape", "sin", "cos", "pow"})

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.MatMult):
            return _call(ast.Attribute(ast.Name("torch", ast.Load()), "matmul", ast.Load()), [node.left, node.right])
        if isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant) and node.right.value == 2:
            return _call(ast.Attribute(node.left, "square", ast.Load()), [])
        if isinstance(node.op, ast.Div):
            return _call(ast.Attribute(ast.Name("torch", ast.Load()), "div", ast.Load()), [node.left, node.right])
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr not in self.SWAP:
            return node
        owner = func.value
        if isinstance(owner, ast.Name) and owner.id in ("torch", "F") or (
                isinstance(owner, ast.Attribute) and owner.attr == "functional"):
            if not node.args:
                return node
            if func.attr == "matmul" and len(node.args) == 2 and not node.keywords:
                return ast.BinOp(node.args[0], ast.MatMult(), node.args[1])
            return ast.Call(ast.Attribute(node.args[0], func.attr, ast.Load()), node.args[1:], node.keywords)
        return ast.Call(ast.Attribute(ast.Name("torch", ast.Load()), func.attr, ast.Load()), [owner, *node.args],
                        node.keywords)


def _call(func: ast.expr, args: list[ast.expr]) -> ast.Call:
    return ast.Call(func, args, [])


def rewritten(code: str) -> str:
    """Every operation in another spelling (``a @ b`` <-> ``torch.matmul(a, b)``, ``x.softmax(d)`` <->
    ``torch.softmax(x, d)``, ``x ** 2`` -> ``x.square()``, ``a / b`` -> ``torch.div(a, b)``)."""
    return ast.unparse(ast.fix_missing_locations(_Rewrite().visit(ast.parse(code))))


def extracted(code: str) -> str:
    """The first function's returned expression moved into a helper of its own, called in its place."""
    tree = ast.parse(code)
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef):
            continue
        last = func.body[-1]
        if isinstance(last, ast.Return) and isinstance(last.value, ast.Call | ast.BinOp):
            used = sorted({n.id for n in ast.walk(last.value) if isinstance(n, ast.Name)
                           and n.id not in ("torch", "F", "math", "nn", "self")})
            helper = ast.FunctionDef(name="_step", args=ast.arguments([], [ast.arg(n) for n in used], None, [], [],
                                                                      None, []),
                                     body=[ast.Return(last.value)], decorator_list=[], returns=None, type_params=[])
            last.value = _call(ast.Name("_step", ast.Load()), [ast.Name(n, ast.Load()) for n in used])
            tree.body.insert(0, helper)
            return ast.unparse(ast.fix_missing_locations(tree))
    return ast.unparse(tree)


COPIERS = {  # copier -> (whose answers, how they are disguised, which exercises: all or every second)
    "c_verbatim": (SOLUTION, lambda c: c, "all"),
    "c_renamed": (SOLUTION, renamed, "all"),
    "c_commented": (SOLUTION, commented, "all"),
    "c_reordered": (SOLUTION, lambda c: reordered(c) or renamed(c), "all"),
    "c_rewritten": (SOLUTION, rewritten, "all"),
    "c_extracted": (SOLUTION, lambda c: extracted(renamed(c)), "all"),
    "c_everything": (SOLUTION, lambda c: commented(extracted(rewritten(reordered(c) or renamed(c)))), "all"),
    "c_partial": (SOLUTION, lambda c: rewritten(renamed(c)), "half"),
    "c_of_alice": ("alice", lambda c: rewritten(renamed(c)), "all"),
    "c_of_bruno": ("bruno", lambda c: commented(reordered(c) or renamed(c)), "all"),
}


def student_class(solutions: dict[str, str]) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """``(answers, copied_from)``: exercise -> {student: answer} over notebooks 01-06, and each copier's
    source. Honest students: the independent answers (``catalogue/students/``) and the outside catalogue's
    correct variants of those exercises (``outside-<k>``: each exercise's k-th variant). Copiers: :data:`COPIERS`."""
    answers: dict[str, dict[str, str]] = {}
    for exercise, by in ANSWERS.items():
        answers[exercise] = dict(by)
        for k, (code, _) in enumerate(OUTSIDE.get(exercise, {}).values()):
            answers[exercise][f"outside-{k}"] = code
    copied_from = {}
    for copier, (source, disguise, which) in COPIERS.items():
        copied_from[copier] = source
        for i, exercise in enumerate(ANSWERS):
            original = solutions.get(exercise) if source == SOLUTION else ANSWERS[exercise].get(source)
            if original is not None and (which == "all" or i % 2 == 0):
                answers[exercise][copier] = disguise(original)
    return answers, copied_from


def class_figures(report: Report, copied_from: dict[str, str], threshold: float | None = None) -> dict[str, float]:
    """On :func:`student_class`'s report: copiers whose closest source is the right one and reaches
    ``threshold`` (the report's student threshold by default); copied (student, exercise) pairs flagged
    (the copier grouped with the right source: the report's page of the two shows every exercise they
    both answered) and standing out on their own (also well above what the class typically shares there,
    or the pair flagged by its fingerprints); honest (student, source) pairs at or above the threshold."""
    from transformer_course.instructors.similarity import TELLING, evidence, students

    threshold = report.student_threshold if threshold is None else threshold
    best = {e.student: e for e in students(report)}
    named = [c for c, source in copied_from.items() if c in best and best[c].source == source
             and best[c].score >= threshold]
    flagged_pairs = {(p.exercise, p.a, p.b) for p in report.flagged}
    copied = flagged = standing_out = 0
    for copier, source in copied_from.items():
        for exercise, table in report.exercises.items():
            if table.excess(copier, source) is None:
                continue
            copied += 1
            own = (exercise, copier, source) in flagged_pairs or (exercise, source, copier) in flagged_pairs
            flagged += copier in named
            standing_out += copier in named and (table.excess(copier, source) >= TELLING or own)
    honest = sorted(report.students() - copied_from.keys() - {SOLUTION})  # a source is honest with the others
    pairs = [evidence(report, h, other) for h in honest for other in [SOLUTION, *honest] if other != h]
    pairs = [e for e in pairs if e is not None]
    return {"copiers": len(copied_from), "copiers named with their source": len(named),
            "copied (student, exercise) pairs": copied,
            "copied pairs flagged (%)": 100 * flagged / max(copied, 1),
            "copied pairs standing out (%)": 100 * standing_out / max(copied, 1),
            "honest students": len(honest), "honest (student, source) pairs": len(pairs),
            "honest pairs flagged": sum(e.score >= threshold for e in pairs),
            "highest honest evidence": max((e.score for e in pairs), default=0.0),
            "lowest copier evidence": min((best[c].score for c in copied_from if c in best), default=0.0)}
