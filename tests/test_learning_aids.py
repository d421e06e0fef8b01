"""Every exercise comes with tiered hints, the paper section and a self-check; solutions link back."""

from __future__ import annotations

import re

import nbformat
import pytest

from transformer_course.layout import Repo

ASSIGNMENTS = [a.name for a in Repo().assignments()]


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_exercise_has_tiered_hints_a_paper_link_and_a_self_check(repo, name):
    assignment = repo.assignment(name)
    nb = nbformat.read(repo.course / name / f"{assignment.notebook}.ipynb", as_version=4)
    for exercise in assignment.exercises:
        at = next(i for i, c in enumerate(nb.cells)
                  if c.metadata.get("nbgrader", {}).get("grade_id") == exercise)
        hints = nb.cells[at - 1]
        assert hints.cell_type == "markdown" and f"`{exercise}`" in hints.source, (
            f"{exercise}: the cell before its answer cell should hold its hints")
        summaries = re.findall(r"<details><summary>(.*?)</summary>", hints.source)
        assert summaries[:3] == ["Hint 1: a nudge", "Hint 2: the idea", "Hint 3: the pieces"], summaries
        # The paper it comes from (Vaswani et al. for 01-07; RMSNorm, RoPE, GQA, ... for 08), with a section.
        assert re.search(r"https://arxiv\.org/abs/\d{4}\.\d{4,5}", hints.source) and "§" in hints.source
        assert "**Check yourself:**" in hints.source and "<summary>Answer</summary>" in hints.source
        # Each <details> block is closed, so JupyterLab and Colab render the rest of the cell; an optional
        # fourth hint (beam search: batching it) may follow the three tiers.
        assert hints.source.count("<details>") == hints.source.count("</details>") in (4, 5)
        assert summaries[-1] == "Answer" and all(s.startswith("Hint 4:") for s in summaries[3:-1]), summaries


def _solution_lines(source: str) -> list[str]:
    """The lines between an answer cell's solution markers, comments dropped, spaces collapsed."""
    body = source.split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0]
    lines = (" ".join(line.split("#", 1)[0].split()) for line in body.splitlines())
    return [line for line in lines if len(line) >= 20]


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_last_hint_is_a_nudge_not_a_line_of_the_solution(repo, name):
    """Hint 3 names the pieces (methods, shapes, a formula): no code in it is, or nearly is, a line of
    the worked solution, which stays in the solution notebook."""
    import difflib

    import jupytext

    assignment = repo.assignment(name)
    source = jupytext.read(assignment.source_file)
    for exercise in assignment.exercises:
        at = next(i for i, c in enumerate(source.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == exercise)
        hint = source.cells[at - 1].source.split("Hint 3: the pieces</summary>", 1)[1].split("</details>", 1)[0]
        spans = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", hint)]
        for line in _solution_lines(source.cells[at].source):
            for span in spans:
                similar = difflib.SequenceMatcher(None, span, line).ratio()
                assert line not in span and similar < 0.8, (
                    f"{exercise}: hint 3 gives away the solution's line {line!r} (as {span!r})")


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_solutions_link_back_to_the_student_notebook(repo, name):
    assignment = repo.assignment(name)
    nb = nbformat.read(repo.solutions / f"{assignment.notebook}.ipynb", as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    assert f"course/{name}/{assignment.notebook}.ipynb" in first.source


@pytest.mark.parametrize("name", ["01_self_attention", "06_transformer"])
def test_an_unwritten_exercise_shows_the_test_and_the_stub_without_torch_frames(repo, name):
    """A stub's NotImplementedError, raised inside an nn.Module's forward, shows the test cell and
    the answer cell only (the setup cell drops PyTorch's Module.__call__ frames), and the cell still
    fails, so "Run All" stops there. Other errors (a shape mistake in a forward) are shortened alike."""
    from nbclient import NotebookClient

    assignment = repo.assignment(name)
    nb = nbformat.read(repo.course / name / f"{assignment.notebook}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(  # a forward that fails on a shape mistake
        "class Broken(torch.nn.Module):\n    def forward(self, x):\n        return x @ torch.ones(3, 2)\n"
        "torch.nn.Sequential(Broken())(torch.ones(2, 4))"))
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(repo.course / name)}}).execute()
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    errors = [ansi.sub("", "\n".join(o.traceback)) for c in nb.cells for o in c.get("outputs", [])
              if o.get("output_type") == "error" and o.get("ename") == "NotImplementedError"]
    assert errors, "the release should raise NotImplementedError in its unwritten exercises"
    through_modules = [text for text in errors if "forward(self" in text]
    assert through_modules, "expected at least one stub inside an nn.Module's forward"
    for text in errors:
        assert "torch/nn/modules/module.py" not in text, text
        assert "YOUR CODE HERE" in text and "not written yet" in text.splitlines()[-1]
        assert len(text.splitlines()) <= 30, text
    shape = nb.cells[-1].outputs[-1]
    text = ansi.sub("", "\n".join(shape.traceback))
    assert shape.ename == "RuntimeError" and "return x @ torch.ones(3, 2)" in text, text
    assert "torch/nn/modules/module.py" not in text, text


def test_the_set_up_cells_shorten_tracebacks_with_the_same_code(repo):
    """Each notebook keeps its own set-up cell (it must run alone in Colab); the part that shortens
    tracebacks of errors in student code must not drift between the seven copies."""
    handlers = {}
    for assignment in repo.assignments():
        nb = nbformat.read(repo.course / assignment.name / f"{assignment.notebook}.ipynb", as_version=4)
        setup = nb.cells[1].source
        assert "set_custom_exc((Exception,)" in setup, f"{assignment.name}: no traceback handler"
        handlers[assignment.name] = setup[setup.index("\ntry:  # An error inside a module"):]
    assert len(set(handlers.values())) == 1, sorted(handlers)


def _operations(node) -> int:  # noqa: ANN001 (an ast node)
    import ast

    return sum(isinstance(n, ast.Call | ast.BinOp | ast.Subscript | ast.Compare) for n in ast.walk(node))


def _pieces(span: str) -> str | None:
    """A hint's code span in its equivalent form, where it is an expression of two operations or more
    (a function's name, a shape or one call is what a hint may give)."""
    import ast

    from transformer_course.instructors.equivalent import equivalent_form

    try:
        tree = ast.parse(span.strip(), mode="eval")
    except SyntaxError:
        return None
    return equivalent_form(span.strip()) if _operations(tree.body) >= 2 else None


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_no_hint_assembles_a_piece_of_the_solution(repo, name):
    """No code in any hint is an expression of the solution (two operations or more), whatever its names or
    its spelling of an operation (compared in equivalent form: `x.pow(2).mean(-1)` is
    `torch.mean(torch.pow(y, 2), dim=-1)`)."""
    import textwrap

    import jupytext

    from transformer_course.instructors.equivalent import equivalent_form

    assignment = repo.assignment(name)
    source = jupytext.read(assignment.source_file)
    found = []
    for exercise in assignment.exercises:
        at = next(i for i, c in enumerate(source.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == exercise)
        tiers = source.cells[at - 1].source.split("<summary>Hint")[1:]
        hints = "".join(part.split("</details>", 1)[0] for part in tiers)
        body = source.cells[at].source.split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0]
        solution = equivalent_form(textwrap.dedent(body).strip())
        for span in re.findall(r"`([^`]+)`", hints):
            if (piece := _pieces(span)) and piece in solution:
                found.append(f"{exercise}: {span!r}")
    assert not found, "hints that write a piece of the solution: " + "; ".join(found)


def _naming(line: str) -> bool:
    """Whether a line only names a call (``optimizer.zero_grad()``): feedback may say what to call."""
    import ast

    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return False
    return (len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Call)
            and not tree.body[0].value.args and not tree.body[0].value.keywords)


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_no_feedback_prints_a_line_of_the_solution(repo, name):
    """The checks' messages say what is wrong and where to look, never the solution's line."""
    import ast

    import jupytext

    assignment = repo.assignment(name)
    source = jupytext.read(assignment.source_file)
    lines = {line for cell in source.cells if "### BEGIN SOLUTION" in cell.source
             for line in _solution_lines(cell.source) if len(line) >= 15 and not _naming(line)}
    checks = repo.reference / "course_reference" / "checks" / f"nb{assignment.notebook[:2]}.py"
    messages = [" ".join(n.value.split()) for n in ast.walk(ast.parse(checks.read_text()))
                if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    found = sorted({line for line in lines for text in messages if line in text})
    assert not found, f"feedback of {name} prints the solution's lines: {found}"


def _own_calls(cell_source: str) -> list[str]:
    """The calls a solution makes of its own pieces (a module or method on ``self``, a course
    function), in the order they run, each once: the recipe a hint must not read out."""
    import ast
    import builtins

    inside, open_ = set(), False
    for number, line in enumerate(cell_source.splitlines(), 1):
        open_ = (open_ or "### BEGIN SOLUTION" in line) and "### END SOLUTION" not in line
        if open_:
            inside.add(number)
    order: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):  # arguments run before the call that takes them
            visit(child)
        if isinstance(node, ast.Call) and node.lineno in inside:
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
                order.append(func.attr)
            elif isinstance(func, ast.Name) and not hasattr(builtins, func.id):
                order.append(func.id)

    visit(ast.parse(cell_source))
    return list(dict.fromkeys(order))


_SEQUENCE = re.compile(r"\b(then|in order|followed by|next|after that)\b", re.I)


def _spells_the_solution(hint: str, calls: list[str]) -> list[str]:
    """What in one hint reads out the solution: a call, in code or in prose, nesting three or more of
    the solution's own calls (``norm(x + dropout(attn(x)))``), or three or more of them named in the
    order they run with words between them that sequence them ("`w_1`, then ..., `w_2`"). A list of
    the pieces without an order is a hint."""
    import ast

    found = []
    for start in re.finditer(r"[A-Za-z_][\w.]*\(", hint):
        depth = 0
        for end in range(start.end() - 1, len(hint)):
            depth += {"(": 1, ")": -1}.get(hint[end], 0)
            if depth == 0:
                break
        try:
            tree = ast.parse(hint[start.start():end + 1], mode="eval")
        except SyntaxError:
            continue
        nested = {getattr(n.func, "attr", getattr(n.func, "id", None))
                  for n in ast.walk(tree) if isinstance(n, ast.Call)}
        if len(nested & set(calls)) >= 3:
            found.append(hint[start.start():end + 1])
    mentions = [m for m in re.finditer(r"[A-Za-z_]\w*", hint) if m.group() in calls]
    said = [m.group() for m in mentions]
    longest = [[0] * (len(calls) + 1) for _ in range(len(said) + 1)]  # longest common subsequence
    for i, word in enumerate(said):
        for j, call in enumerate(calls):
            longest[i + 1][j + 1] = longest[i][j] + 1 if word == call else max(longest[i][j + 1], longest[i + 1][j])
    if longest[-1][-1] >= 3 and _SEQUENCE.search(hint[mentions[0].end():mentions[-1].start()]):
        found.append(f"{longest[-1][-1]} of {calls} named in their order")
    return found


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_no_hint_reads_out_the_solution_in_words(repo, name):
    """No hint tier spells the solution's recipe: its own calls nested in one expression, or named in
    the order they run (in code or in words), which `test_no_hint_assembles_a_piece_of_the_solution`
    does not see when the hint drops `self.` or writes prose."""
    import jupytext

    assignment = repo.assignment(name)
    source = jupytext.read(assignment.source_file)
    found = []
    for exercise in assignment.exercises:
        at = next(i for i, c in enumerate(source.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == exercise)
        calls = _own_calls(source.cells[at].source)
        for tier in source.cells[at - 1].source.split("<summary>Hint")[1:]:
            found += [f"{exercise}, hint {tier[:2].strip()}: {what}"
                      for what in _spells_the_solution(tier.split("</details>", 1)[0], calls)]
    assert not found, "hints that read out the solution: " + "; ".join(found)


@pytest.mark.parametrize(("exercise", "hint"), [
    # 06's hints before issue 49: each handed over its exercise.
    ("PositionwiseFeedForward", "Four pieces in order, each a call on the previous result: `self.w_1`, then "
     "`torch.relu` (or `F.relu`), `self.dropout`, and `self.w_2`."),
    ("EncoderLayer", "Post-LN as in the paper: `x = norm1(x + dropout(self_attn(x, x, x, src_mask)[0]))`, then the "
     "same with the feed-forward and `norm2`."),
    ("Transformer", "`encode` = encoder(positional_encoding(src_embed(src)), src_mask); `decode` = "
     "decoder(positional_encoding(tgt_embed(tgt)), memory, src_mask, tgt_mask); `forward` builds both masks "
     "from `pad_id` and returns `generator(decode(...))`: raw logits, no softmax."),
])
def test_the_hint_check_catches_a_recipe(repo, exercise, hint):
    import jupytext

    source = jupytext.read(repo.assignment("06_transformer").source_file)
    cell = next(c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade_id") == exercise)
    assert _spells_the_solution(hint, _own_calls(cell.source))
    # Naming the pieces without their order stays a hint.
    pieces = "The module owns `self.w_2`, `self.dropout` and `self.w_1`; look up `torch.relu`."
    assert not _spells_the_solution(pieces, ["w_1", "dropout", "w_2"])
