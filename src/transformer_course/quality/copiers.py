"""A test class for the similarity report (``make bench``, tests/test_similarity.py): honest students
and copiers, per exercise.

Honest students are the catalogue's correct variants (catalogue.py: answers written in different
styles). Copiers take the published solution, or an honest classmate's answer, and disguise it the
ways students do: every local name renamed (and the code re-laid out: ``ast.unparse``), comments and
blank lines added, two independent statements swapped, and all three at once.
"""

from __future__ import annotations

import ast

from transformer_course.instructors.similarity import SOLUTION, Pair, Report
from transformer_course.quality.catalogue import CORRECT


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
    from transformer_course.quality.outside import CORRECT as OUTSIDE

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
