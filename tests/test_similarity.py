"""The similarity report (transformer-course similarity): what it flags on a test class of honest
students and copiers (copiers.py), what it does not count, and what it writes. The sample class's
copier, through `make grade`'s path, is checked by sample_class.toml (`similar`)."""

from __future__ import annotations

import csv

import pytest

from quality import copiers
from transformer_course.instructors import similarity
from transformer_course.instructors.similarity import SOLUTION, THRESHOLD, canonical, compare

# Honest pairs at or above the default threshold, found by make bench and read one by one: each
# is two answers that are the same code line for line (an own-catalogue variant written the way
# the solution or the public source it mirrors is written). A new one fails this test, to be read.
CONVERGENT = {
    ("noam_lr", "outside:annotated_rate_with_check", "own:min"),
    ("train_epoch", "own:clipped", SOLUTION),
    ("sinusoidal_positional_encoding", "outside:annotated_exp_log", "own:exp_log"),
    # Notebook 08's short answers: a one-line RMSNorm, a three-line pre-LN block, the loop over the layers
    # with their caches and one tie line (DecoderLM); public code (Meta's, llama2.c, litgpt, Hugging Face,
    # x-transformers) writes them as the solution does.
    ("RMSNorm", "outside:meta_float_upcast", "own:rsqrt"),
    ("RMSNorm", "outside:hf_llama_variance", "outside:litgpt_mean_x_times_x"),
    ("SwiGLU", "outside:bkitano_issue_swish_beta", "own:sigmoid_by_hand"),
    ("DecoderBlock", "outside:meta_transformer_block", "own:named_branches"),
    ("DecoderBlock", "outside:meta_transformer_block", "own:two_steps"),
    ("DecoderBlock", "outside:hf_llama_decoder_layer", "outside:litgpt_block"),
    ("GroupedQueryAttention", "own:sdpa", SOLUTION),
    ("DecoderLM", "own:assign", SOLUTION),
    ("DecoderLM", "own:tie_other_way_functional", SOLUTION),
    ("DecoderLM", "outside:llama2c_tie_reverse", SOLUTION),
    ("DecoderLM", "outside:llama2c_tie_reverse", "own:assign"),
    ("DecoderLM", "outside:llama2c_tie_reverse", "own:tie_other_way_functional"),
    ("DecoderLM", "outside:llama2c_tie_reverse", "own:zip_layers"),
    ("DecoderLM", "outside:xtransformers_logits_from_embedding", "own:assign"),
    ("DecoderLM", "outside:xtransformers_logits_from_embedding", "own:tie_other_way_functional"),
}


@pytest.fixture(scope="module")
def course(repo):
    return similarity.course_cells(repo)


@pytest.fixture(scope="module")
def report(course):
    stubs, solutions, assignment_of = course
    return compare(copiers.test_class(solutions), stubs, solutions, assignment_of)


def test_every_copier_is_flagged_and_only_the_known_honest_pairs(report):
    figures = copiers.figures(report, THRESHOLD)
    assert figures["copiers of the solution"] >= 60 and figures["copiers of a classmate"] >= 60
    assert figures["copiers of the solution flagged (%)"] == 100
    assert figures["copiers of a classmate flagged (%)"] == 100
    flagged = {(p.exercise, p.a, p.b) for p in report.flagged if copiers.independent(p)}
    assert flagged == CONVERGENT
    # 18 of 308 with notebook 08 (3 of 117 before it): its answers are short, and converge.
    assert figures["independent honest pairs flagged"] == len(CONVERGENT) < figures["independent honest pairs"] / 15


def test_short_exercises_are_skipped_and_said(report):
    # A one-line answer: honest students converge there.
    assert {"make_padding_mask", "attention_scores", "combine_heads"} <= set(report.skipped)
    assert not {p.exercise for p in report.pairs} & set(report.skipped)
    assert {"scaled_dot_product_attention", "beam_search", "MultiHeadAttention"} <= {p.exercise for p in report.pairs}


def test_names_comments_layout_and_the_stub_do_not_count(course):
    stubs, solutions, assignment_of = course
    solution = solutions["scaled_dot_product_attention"]
    assert canonical(copiers.commented(solution)) == canonical(solution)
    disguised = copiers.disguises(solution)["all three"]
    other = ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n"
             "    w = torch.einsum('...qd,...kd->...qk', query, key).div(query.shape[-1] ** 0.5)\n"
             "    if mask is not None:\n        w = w.masked_fill(mask.logical_not(), -torch.inf)\n"
             "    w = w.softmax(-1).nan_to_num(0.0)\n    w = F.dropout(w, dropout_p) if dropout_p else w\n"
             "    return torch.einsum('...qk,...kd->...qd', w, value), w\n")
    stub = stubs["scaled_dot_product_attention"]
    found = compare({"scaled_dot_product_attention": {"copier": disguised, "own": other, "untouched": stub}},
                    stubs, solutions, assignment_of)
    pairs = {(p.a, p.b): p.similarity for p in found.pairs}
    assert pairs[("copier", SOLUTION)] == pytest.approx(1.0, abs=0.02)
    assert pairs[("copier", "own")] < 0.3 and pairs[("own", SOLUTION)] < 0.3
    assert not any("untouched" in pair for pair in pairs)  # the stub as handed out: not attempted


def test_the_report_pages(report, tmp_path):
    index = similarity.write(report, tmp_path)
    text = index.read_text()
    assert f"{len(report.flagged)} pair(s) of answers at or above 75%" in text and "make_padding_mask" in text
    pages = sorted(set(tmp_path.glob("*.html")) - {index} - set(tmp_path.glob("student--*.html")))
    assert len(pages) == len(report.flagged)
    first = (tmp_path / similarity.page_name(report.flagged[0])).read_text()
    assert first.count('<span class="hl">') >= 2 and "the cell as handed in" in first
    assert "Answers left as the stub" in text and "By pair of students" in text
    with open(tmp_path / "pairs.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(report.pairs) and sum(r["flagged"] == "1" for r in rows) == len(report.flagged)
    # A second run with another threshold leaves no page of the first behind.
    report.threshold = 0.99
    similarity.write(report, tmp_path)
    assert len(set(tmp_path.glob("*.html")) - set(tmp_path.glob("student--*.html"))) == len(report.flagged) + 1
    report.threshold = THRESHOLD


def test_an_out_folder_without_a_graded_class_or_a_threshold_in_percent_is_refused(tmp_path, capsys):
    from transformer_course.cli import main

    assert main(["similarity", str(tmp_path)]) == 2
    assert "holds no graded class" in capsys.readouterr().err
    (tmp_path / "nbgrader" / "submitted").mkdir(parents=True)
    for bad in (["--threshold", "75"], ["--threshold", "-1"], ["--min-chars", "-5"]):
        assert main(["similarity", str(tmp_path), *bad]) == 2
        assert "0 < threshold <= 1 (e.g. 0.75 for 75%)" in capsys.readouterr().err


@pytest.fixture(scope="module")
def student_report(course):
    """The class of whole students (copiers.student_class): four independent authors and the outside
    catalogue honest, ten copiers of the published solution or a classmate, one disguise each."""
    stubs, solutions, assignment_of = course
    answers, copied_from = copiers.student_class(solutions)
    return compare(answers, stubs, solutions, assignment_of), copied_from


def test_each_copier_is_grouped_with_their_source_and_no_honest_student(student_report):
    report, copied_from = student_report
    figures = copiers.class_figures(report, copied_from)
    assert figures["copiers"] == len(copiers.COPIERS) >= 10
    assert figures["copiers named with their source"] == figures["copiers"]
    assert figures["copied pairs flagged (%)"] >= 90 and figures["copied pairs standing out (%)"] >= 75
    assert figures["honest students"] >= 6 and figures["honest (student, source) pairs"] >= 40
    assert figures["honest pairs flagged"] == 0
    grouped = dict(similarity.groups(report))
    around = {e.student for e in grouped[SOLUTION]}
    assert around == {c for c, source in copied_from.items() if source == SOLUTION}
    for copier in ("c_of_alice", "c_of_bruno"):  # a classmate's copy shares a group with that classmate
        source = copied_from[copier]
        assert any({copier, source} <= {n for e in members for n in (e.student, e.source)}
                   for name, members in grouped.items() if name != SOLUTION), copier


def test_short_exercises_copied_together_add_up(student_report, course):
    """A copier of only the exercises below the minimum length (never compared pair by pair) is still
    grouped with the solution: the short exercises count in the student's total, with their weight."""
    stubs, solutions, assignment_of = course
    report, _ = student_report
    answers = {e: {s: c for s, c in by.items() if not s.startswith("c_")} for e, by in report.answers.items()}
    answers = {e: {s: c for s, c in by.items() if s != SOLUTION} for e, by in answers.items()}
    short = [e for e in answers if e in compare(answers, stubs, solutions, assignment_of).skipped]
    assert len(short) >= 6
    for e in short:
        answers[e]["shorty"] = copiers.renamed(solutions[e])
    found = {e.student: e for e in similarity.students(compare(answers, stubs, solutions, assignment_of))}
    assert found["shorty"].source == SOLUTION and found["shorty"].score >= similarity.STUDENT_THRESHOLD


@pytest.mark.parametrize(("a", "b"), [
    ("def f(q, k):\n    return q @ k.transpose(-2, -1)",
     "def f(x, y):\n    return torch.matmul(x, torch.transpose(y, -2, -1))"),
    ("def f(x):\n    return x.softmax(-1)", "def f(x):\n    return torch.softmax(x, dim=-1)"),
    ("def f(x):\n    return x.softmax(-1)", "def f(x):\n    return F.softmax(x, dim=-1)"),
    ("def f(n):\n    return torch.ones(n, n).tril()", "def f(n):\n    return torch.tril(torch.ones(n, n))"),
    ("def f(x):\n    return (x ** 2).mean(-1)", "def f(x):\n    return x.square().mean(dim=-1)"),
    ("def f(q, k):\n    return q.bmm(k.mT)", "def f(q, k):\n    return torch.matmul(q, k.transpose(-2, -1))"),
    ("def f(a, b):\n    return g(a) / b\ndef g(z):\n    return z.exp()", "def f(a, b):\n    return torch.exp(a) / b"),
])
def test_equivalent_forms_see_through_rewritten_spellings(a, b):
    from transformer_course.instructors.equivalent import equivalent_form

    assert equivalent_form(a) == equivalent_form(b)


def test_equivalent_forms_keep_different_operations_apart():
    from transformer_course.instructors.equivalent import equivalent_form

    assert equivalent_form("def f(x):\n    return x.softmax(-1)") != equivalent_form("def f(x):\n    return x.sum(-1)")
    assert equivalent_form("def f(x):\n    return x.exp(-1)") != equivalent_form("def f(x):\n    return x.exp(0)")
    assert equivalent_form("def f(x):\n    return x.tril()") != equivalent_form("def f(x):\n    return x.triu()")
    assert equivalent_form("def f(a, b):\n    return a @ b") != equivalent_form("def f(a, b):\n    return a * b")


def test_side_by_side_highlights_whole_tokens_beyond_the_stub():
    from transformer_course.instructors.equivalent import side_by_side

    stub = 'def f(q, k):\n    """Doc."""\n    raise NotImplementedError'
    a = 'def f(q, k):\n    """Doc."""\n    s = q @ k.mT\n    return s.softmax(-1)'
    b = 'def f(q, k):\n    """Doc."""\n    return torch.softmax(torch.matmul(q, k.transpose(-2, -1)), dim=-1)'
    left, right = side_by_side(a, b, stub)
    assert left.splitlines()[0] == right.splitlines()[0] == "def f(v, v):"  # the stub's line: not highlighted
    assert '<span class="hl">op_matmul(v, op_transpose(v, -2, -1))</span>' in left
    assert '<span class="hl">op_matmul(v, op_transpose(v, -2, -1)), -1)</span>' in right
    # As written (the pages of pairs): names aside, whole tokens, the stub's lines never highlighted.
    renamed = 'def f(q, k):\n    """Doc."""\n    scores = q @ k.mT\n    return scores.softmax(-1)'
    left, right = side_by_side(a, renamed, stub, equivalent=False)
    assert left.splitlines()[0] == right.splitlines()[0] == "def f(q, k):"
    assert right.endswith('<span class="hl">scores = q @ k.mT\n    return scores.softmax(-1)</span>')


def test_the_report_groups_students_and_writes_their_pages(student_report, tmp_path):
    report, copied_from = student_report
    index = similarity.write(report, tmp_path).read_text()
    assert "Students grouped by source" in index and "Around the published solution" in index
    with open(tmp_path / "students.csv") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert {s for s, r in rows.items() if r["grouped"] == "1"} >= set(copied_from)
    for copier, source in copied_from.items():
        if source == SOLUTION:
            assert rows[copier]["source"] == SOLUTION
            page = (tmp_path / similarity.evidence_page(similarity.evidence(report, copier, SOLUTION))).read_text()
            assert page.count("<h3>") == int(rows[copier]["exercises_compared"]) and '<span class="hl">' in page


def test_settings_chosen_once_are_kept_for_later_runs_and_the_report(report, tmp_path):
    """`similarity --threshold 0.6` is remembered in OUT: the next run and `report` use it unless told otherwise."""
    report.threshold = 0.6
    try:
        similarity.write(report, tmp_path / "similarity")
    finally:
        report.threshold = THRESHOLD
    assert similarity.settings(tmp_path) == (0.6, similarity.MIN_CHARS)
    assert similarity.settings(tmp_path, threshold=0.9) == (0.9, similarity.MIN_CHARS)
    assert similarity.settings(tmp_path / "elsewhere") == (THRESHOLD, similarity.MIN_CHARS)
    index = (tmp_path / "similarity" / "index.html").read_text()
    assert f"{len(report.skipped)} exercise(s) not compared" in index and "By student: the closest source" in index


def _stub_left(stub: str, k: int) -> str:
    """The release's answer cell as a student who did not answer it hands it back: as released, its
    comments changed, or ``pass`` for its ``raise NotImplementedError(...)`` lines (by ``k``)."""
    if k % 3 == 1:
        return stub.replace("# YOUR CODE HERE", "# TODO: come back to this\n\n")
    if k % 3 == 2:
        return "\n".join(line[:len(line) - len(line.lstrip())] + "pass" if "raise NotImplementedError" in line
                         else line for line in stub.splitlines())
    return stub


@pytest.fixture(scope="module")
def stub_class(student_report, course):
    """The honest students of :func:`student_report` and: ``copier``, alice's answers to four long exercises
    and the stub everywhere else; ``bruno`` now honest with his own answers to seven exercises (the copier's
    four among them) and the stub elsewhere; ``blank`` and ``blanker``, the stub (or nothing of their own)
    everywhere."""
    stubs, solutions, assignment_of = course
    report, _ = student_report
    answers = {e: {s: c for s, c in by.items() if not s.startswith("c_") and s != SOLUTION}
               for e, by in report.answers.items()}
    copied = ["scaled_dot_product_attention", "MultiHeadAttention", "sinusoidal_positional_encoding", "EncoderLayer"]
    own = [*copied, "DecoderLayer", "Decoder", "Transformer"]
    for k, (e, by) in enumerate(sorted(answers.items())):
        by["copier"] = by["alice"] if e in copied else _stub_left(stubs[e], k)
        by["bruno"] = by["bruno"] if e in own else _stub_left(stubs[e], k + 1)
        by["blank"], by["blanker"] = stubs[e], _stub_left(stubs[e], k + 2)
    return compare(answers, stubs, solutions, assignment_of), copied


def test_a_copier_of_a_few_exercises_who_left_the_rest_as_the_stub_is_grouped_with_the_source(stub_class):
    """Exercises where either side still holds the release's stub are left out of the pair's evidence (and
    its denominator): the copier is compared with alice on the four exercises both answered, and grouped."""
    report, copied = stub_class
    assert len(report.exercises) == 21
    found = {e.student: e for e in similarity.students(report)}
    assert found["copier"].source == "alice" and found["copier"].compared == len(copied) == 4
    assert found["copier"].score >= similarity.STUDENT_THRESHOLD  # 1.00 (0.33 with the stubs compared)
    assert any({"copier", "alice"} <= {n for e in members for n in (e.student, e.source)}
               for _, members in similarity.groups(report))
    # Not with an honest student who also left many stubs: compared on the four both answered, below.
    honest = similarity.evidence(report, "copier", "bruno")
    assert honest.compared == 4 and honest.score < similarity.STUDENT_THRESHOLD
    assert similarity.evidence(report, "bruno", "alice").compared == 7
    grouped = {n for _, members in similarity.groups(report) for e in members for n in (e.student, e.source)}
    assert "bruno" not in grouped
    assert all("copier" not in pair for p in report.pairs for pair in [(p.a, p.b)]
               if p.exercise not in copied)  # pair by pair too, the stub is not compared


def test_students_who_left_everything_as_the_stub_are_not_flagged(stub_class, tmp_path):
    """Two students with nothing of their own anywhere have no exercise in common with anyone: no evidence
    (not 0-similar noise), no group, listed as not attempted; the pages say on how many exercises each
    pair was compared."""
    report, _ = stub_class
    for blank in ("blank", "blanker"):
        assert blank not in {e.student for e in similarity.students(report)}
        assert all(similarity.evidence(report, blank, other) is None
                   for other in ("blanker", "blank", "copier", "bruno", "alice", SOLUTION))
        assert all(blank in who for who in report.unattempted.values())
    grouped = {n for _, members in similarity.groups(report) for e in members for n in (e.student, e.source)}
    assert not {"blank", "blanker"} & grouped
    similarity.write(report, tmp_path)
    page = (tmp_path / similarity.evidence_page(similarity.evidence(report, "copier", "alice"))).read_text()
    assert "evidence over the 4 of 21 exercises both answered" in page and page.count("<h3>") == 4
    assert "4 exercises compared" in (tmp_path / "index.html").read_text()
