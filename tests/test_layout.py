"""The package's layout shows the pipeline: subpackages by role, the grader's by stage, no import cycle
between modules, no stage importing a later one, and the quality suite (quality/, catalogue/) outside
it, never imported by it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformer_course"
TOP = {"transformer_course", "transformer_course.cli", "transformer_course.layout", "transformer_course.words"}
ROLES = {"course", "grading", "instructors", "lms"}
GRADING = "transformer_course.grading"
# The grader's stages, in the order a hand-in goes through them: each imports only those before it,
# and what every stage uses (BASE). The top of grading/ holds BASE's modules and the check server.
STAGES = ("submission", "kernel", "judging", "notebook", "run")
BASE = ("output", "version", "stop")
GRADING_TOP = {"version", "stop", "check_server"}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """The package's modules ``path`` imports, at its top or inside a function (``from x import y``
    counts ``x.y`` where that is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import (the layout moves modules: name them in full)"
            if not (node.module or "").startswith("transformer_course"):
                continue
            for alias in node.names:
                found.add(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module)
    return found & known


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports(path, known) - {name} for name, path in found.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_module_imports_itself_back():
    found = cycle(graph())
    assert found is None, "import cycle: " + " -> ".join(found)


def test_the_cycle_finder_finds_one():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_every_module_has_its_role_and_the_package_never_imports_the_quality_suite():
    edges = graph()
    for name in edges:
        assert name in TOP or name.split(".")[1] in ROLES, f"{name}: put it in one of {sorted(ROLES)}"
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            found = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not [m for m in found if m.split(".")[0] == "quality"], f"{name} imports the quality suite"
    assert any(m.startswith("transformer_course.grading") for m in edges["transformer_course.cli"])
    assert (PACKAGE.parents[1] / "quality" / "catalogue.py").is_file()


def _stage(module: str) -> str:
    """The stage (or BASE's part, or a top module's name) of a module of grading/."""
    return module.removeprefix(GRADING + ".").split(".")[0]


def test_the_grading_package_is_laid_out_by_stage():
    found = [m for m in modules() if m.startswith(GRADING + ".")]
    top = {m.removeprefix(GRADING + ".") for m in found if m.count(".") == 2} - {*STAGES, "output"}
    assert top == GRADING_TOP and len(top) + 1 <= 12  # (and __init__.py)
    for module in found:
        assert _stage(module) in {*STAGES, *BASE, *GRADING_TOP}, f"{module}: put it in one of {STAGES + BASE}"
        assert module.count(".") <= 3, f"{module}: one level of stages"
    for part in [*STAGES, "output"]:
        init = PACKAGE / "grading" / part / "__init__.py"
        named = set(ast.get_docstring(ast.parse(init.read_text())).split("`")[1::2])  # :mod:`.name`
        own = {f".{p.stem}" for p in init.parent.glob("*.py") if p.stem != "__init__"}
        assert own <= named, f"{part}/__init__.py: name {sorted(own - named)} in the stage's list"


def test_no_stage_of_the_grader_imports_a_later_one():
    allowed = {s: {*STAGES[:i + 1], *BASE} for i, s in enumerate(STAGES)}
    allowed |= {"output": {"output"}, "version": set(), "stop": set(), "check_server": {*STAGES, *BASE}}
    for module, imported in graph().items():
        if not module.startswith(GRADING + "."):
            continue
        for other in imported:
            if other.startswith(GRADING + ".") and _stage(other) != _stage(module):
                assert _stage(other) in allowed[_stage(module)], f"{module} imports {other}: a later stage"


def test_the_linter_knows_the_names_an_answer_cell_sees_and_no_others(repo):
    """catalogue/ruff.toml's builtins are the notebooks' imports (quality.catalogue.IMPORTS) and the
    course's exercises: a misspelt name in a variant stays an error."""
    import tomllib

    from quality.catalogue import IMPORTS

    imported = {a.asname or a.name for node in ast.parse(IMPORTS).body for a in node.names}
    exercises = {e for a in repo.assignments() for e in a.exercises}
    declared = tomllib.loads((repo.root / "catalogue" / "ruff.toml").read_text())["builtins"]
    assert len(declared) == len(set(declared))
    assert set(declared) == imported | exercises


def test_every_question_in_words_has_a_rubric_in_the_instructors_guide(repo):
    """docs/instructors.md's rubric table lists each question of the sources, with its notebook and
    points, and nothing else: the two cannot drift apart."""
    import re

    text = (repo.root / "docs" / "instructors.md").read_text()
    rows = {m[0]: (m[1], float(m[2])) for m in re.findall(r"^\| `(question_\w+)` \| (\d\d) \| ([\d.]+) \|", text, re.M)}
    expected = {q.grade_id: (a.name[:2], q.points) for a in repo.assignments() for q in a.questions}
    assert rows == expected
    assert all(len(a.questions) >= 2 for a in repo.assignments())


def test_every_question_in_words_has_calibration_answers_in_the_instructors_guide(repo):
    """Each question of the sources has a "#### Calibration: `question_x` (NN)" block under the
    rubrics, in notebook order, with exactly three answers marked "- **S of P.**": P the question's
    points, one full (S = P), one partial (0 < S < P) and one none (S = 0), so a grader sees where
    the rubric's lines fall."""
    import re

    text = (repo.root / "docs" / "instructors.md").read_text()
    rubrics = text[text.index("### Rubrics"):]
    rubrics = rubrics[: re.search(r"^## ", rubrics, re.M).start()]
    heading = re.compile(r"^#### Calibration: `(question_\w+)` \((\d\d)\)$", re.M)
    found = list(heading.finditer(rubrics))
    blocks = {}
    for m, nxt in zip(found, [*found[1:], None], strict=True):
        assert m[1] not in blocks, f"{m[1]}: two calibration blocks"
        body = rubrics[m.end(): nxt.start() if nxt else len(rubrics)]
        marks = re.findall(r"^- \*\*([\d.]+) of ([\d.]+)\.\*\* ", body, re.M)
        blocks[m[1]] = (m[2], [(float(s), float(p)) for s, p in marks])
    expected = [(q.grade_id, a.name[:2], q.points) for a in repo.assignments() for q in a.questions]
    assert [m[1] for m in found] == [q for q, _, _ in expected], "one block per question, in notebook order"
    for question, notebook, points in expected:
        where, marks = blocks[question]
        assert where == notebook, f"{question}: block says notebook {where}, not {notebook}"
        assert len(marks) == 3, f"{question}: {len(marks)} marked answers, not 3"
        assert all(p == points for _, p in marks), f"{question}: marked out of other than {points}"
        scores = sorted(s for s, _ in marks)
        assert scores[0] == 0 and 0 < scores[1] < points and scores[2] == points, f"{question}: {scores}"
