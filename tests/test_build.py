"""The build: deterministic, no drift from the sources, nothing hidden in course/."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import nbformat
import pytest

from transformer_course.course.build import build, run_solution
from transformer_course.layout import BLOCKS_MODULE, Repo

HIDDEN = re.compile(r"### (BEGIN|END) (SOLUTION|HIDDEN TESTS)|course_reference|TRANSFORMER_COURSE_ROOT")


@pytest.fixture(scope="module")
def rebuilt(repo: Repo, tmp_path_factory):
    """Build course/ and solutions/ into a temporary folder (solutions not executed)."""
    out = tmp_path_factory.mktemp("rebuilt")
    build(repo, out / "course", out / "solutions", run_solutions=False)
    return out


def test_course_is_byte_identical_to_a_fresh_build(repo, rebuilt):
    committed = sorted(p.relative_to(repo.course) for p in repo.course.rglob("*") if p.is_file())
    fresh = sorted(p.relative_to(rebuilt / "course") for p in (rebuilt / "course").rglob("*") if p.is_file())
    assert committed == fresh, "course/ has other files than a fresh build: run `transformer-course build`"
    for rel in committed:
        assert (repo.course / rel).read_bytes() == (rebuilt / "course" / rel).read_bytes(), (
            f"course/{rel} drifted from autograder/source: run `transformer-course build` and commit"
        )


def test_building_twice_gives_identical_bytes(repo, rebuilt, tmp_path):
    build(repo, tmp_path / "course", tmp_path / "solutions", run_solutions=False)
    for path in (rebuilt / "course").rglob("*.ipynb"):
        assert path.read_bytes() == (tmp_path / "course" / path.relative_to(rebuilt / "course")).read_bytes()


def test_solutions_match_sources_and_are_executed(repo, rebuilt):
    for assignment in repo.assignments():
        name = f"{assignment.notebook}.ipynb"
        committed = nbformat.read(repo.solutions / name, as_version=4)
        fresh = nbformat.read(rebuilt / "solutions" / name, as_version=4)
        assert [c.source for c in committed.cells] == [c.source for c in fresh.cells], (
            f"solutions/{name} drifted from its source: run `transformer-course build` and commit"
        )
        code = [c for c in committed.cells if c.cell_type == "code"]
        assert all(c.execution_count for c in code), f"solutions/{name} is not fully executed"
        assert not any(o.get("output_type") == "error" for c in code for o in c.outputs)
        images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
        assert images, f"solutions/{name} should show its plots"


def test_course_has_stubs_and_no_solutions_hidden_tests_or_reference(repo):
    for assignment in repo.assignments():
        folder = repo.course / assignment.name
        provided = ({BLOCKS_MODULE} if assignment.uses_blocks else set()) | set(assignment.provided)
        assert {p.name for p in folder.iterdir()} == {f"{assignment.notebook}.ipynb"} | provided
        text = (folder / f"{assignment.notebook}.ipynb").read_text()
        setup = nbformat.reads(text, as_version=4).cells[1].source
        fetched = f"PROVIDED = {sorted(provided)!r}".replace("'", '"')
        assert fetched in setup, "the Colab cell must fetch what is shipped"
        assert not HIDDEN.search(text)
        nb = nbformat.reads(text, as_version=4)
        answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
                   if c.metadata.get("nbgrader", {}).get("solution")}
        questions = [q.grade_id for q in assignment.questions]
        assert list(answers) == assignment.exercises + questions  # the questions in words come last
        assert all("raise NotImplementedError(" in answers[e] for e in assignment.exercises)
        assert all(answers[q] == "YOUR ANSWER HERE" for q in questions), "no model answer in the release"


def test_provided_files_ship_unchanged_with_course_and_solutions(repo):
    for assignment in repo.assignments():
        for name in assignment.provided:
            source = assignment.source_file.with_name(name).read_bytes()
            assert (repo.course / assignment.name / name).read_bytes() == source
            assert (repo.solutions / name).read_bytes() == source, f"solutions/{name} drifted: rebuild"


def test_solutions_have_no_hidden_tests(repo):
    for path in repo.solutions.glob("*.ipynb"):
        assert not HIDDEN.search(path.read_text()), path


def test_test_cells_name_their_exercise(repo):
    for assignment in repo.assignments():
        assert assignment.exercises
        for exercise in assignment.exercises:
            assert assignment.max_score(exercise) > 0, f"{exercise} has no test cell"


def test_solution_notebooks_run_top_to_bottom(repo, rebuilt, multi30k_dir, monkeypatch):
    # One thread per kernel: the suite's other test process grades on the second core, and two
    # threads each would spin against it. A kernel reads this at start; this test grades nothing.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for assignment in repo.assignments():
        if assignment.trains and multi30k_dir is None:
            continue  # no local Multi30k copy: tests never download it (tests/test_data.py)
        nb = run_solution(assignment, train_config="tiny")  # notebook 07: the one-minute configuration
        errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
                  if o.get("output_type") == "error"]
        assert not errors


def test_title_comes_first_then_the_collapsed_colab_setup_cell_harmless_locally(repo, tmp_path):
    for assignment in repo.assignments():
        nb = nbformat.read(repo.course / assignment.name / f"{assignment.notebook}.ipynb", as_version=4)
        title, first = nb.cells[0], nb.cells[1]
        assert title.cell_type == "markdown" and title.source.startswith(f"# {assignment.name[:2]} ")
        assert first.cell_type == "code" and "google.colab" in first.source
        assert first.metadata.get("jupyter", {}).get("source_hidden") is True  # collapsed in JupyterLab
        assert f"course/\"\n        \"{assignment.name}\"" in first.source or assignment.name in first.source
        # Run it locally: it must do nothing (no install, no download, no new files).
        result = subprocess.run([sys.executable, "-c", first.source], cwd=tmp_path,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout == "" and not list(tmp_path.iterdir())


def test_release_notebooks_are_valid_nbformat(repo):
    for path in repo.course.rglob("*.ipynb"):
        nbformat.validate(nbformat.read(path, as_version=4))
        assert json.loads(path.read_text())["metadata"]["kernelspec"]["name"] == "python3"


def test_readme_links_every_notebook_with_a_colab_badge(repo):
    import tomllib

    readme = (repo.root / "README.md").read_text()
    project = tomllib.loads((repo.root / "pyproject.toml").read_text())["project"]
    github = project["urls"]["Repository"].removeprefix("https://github.com/")
    from transformer_course.layout import GITHUB_REPO

    assert github == GITHUB_REPO
    for assignment in repo.assignments():
        path = f"course/{assignment.name}/{assignment.notebook}.ipynb"
        assert (repo.root / path).is_file()
        assert f"https://colab.research.google.com/github/{github}/blob/main/{path}" in readme
        source = (repo.course / assignment.name / f"{assignment.notebook}.ipynb").read_text()
        assert f"raw.githubusercontent.com/{github}/main/course/" in source


def test_provided_blocks_hold_only_earlier_notebooks(repo):
    """course/NN/course_blocks.py has the reference code of notebooks < NN, never NN's own answers."""
    import ast

    for assignment in repo.assignments():
        if not assignment.uses_blocks:
            continue
        tree = ast.parse((repo.course / assignment.name / BLOCKS_MODULE).read_text())
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
        assert not defined & set(assignment.exercises), f"{assignment.name} ships its own answers"
        for earlier in repo.assignments():
            if earlier.number < assignment.number:
                assert set(earlier.exercises) <= defined, f"{assignment.name} lacks blocks of {earlier.name}"


def test_committed_solutions_are_up_to_date_and_kept(repo, tmp_path):
    """Each committed solution ran with today's code and shipped files, so a build keeps it as it
    is (`make grade` leaves solutions/ untouched); a changed code cell means running it again."""
    from transformer_course.course.build import _kept_run

    for assignment in repo.assignments():
        committed = repo.solutions / f"{assignment.notebook}.ipynb"
        kept = _kept_run(assignment, committed)
        assert kept is not None, (f"solutions/{committed.name} is stale: run `transformer-course build`"
                                  + (" --retrain" if assignment.trains else ""))
        assert nbformat.writes(kept) + "\n" == committed.read_text(), f"a build would rewrite {committed.name}"
    assignment = repo.assignment("01_self_attention")
    nb = nbformat.read(repo.solutions / "01_self_attention.ipynb", as_version=4)
    next(c for c in nb.cells if c.cell_type == "code").source += "\nprint('changed')"
    nbformat.write(nb, tmp_path / "changed.ipynb")
    assert _kept_run(assignment, tmp_path / "changed.ipynb") is None


def test_executed_solutions_have_merged_streams(repo):
    """One stream output per stream and cell: the same text never splits differently between runs."""
    for assignment in repo.assignments():
        nb = nbformat.read(repo.solutions / f"{assignment.notebook}.ipynb", as_version=4)
        for cell in (c for c in nb.cells if c.cell_type == "code"):
            kinds = [(o.output_type, o.get("name")) for o in cell.outputs]
            split = [a for a, b in zip(kinds, kinds[1:], strict=False) if a == b and a[0] == "stream"]
            assert not split, (assignment.name, cell.source[:60])


# Colour maps readable with the common colour-vision deficiencies (perceptually uniform or grey;
# RdBu for signed values). Line colours come from seaborn's "colorblind" palette (set_theme).
COLOURBLIND_SAFE = {"viridis", "cividis", "magma", "inferno", "Greys", "RdBu_r", "RdBu"}


def test_figures_are_labelled_captioned_and_colour_blind_safe(repo):
    for assignment in repo.assignments():
        nb = nbformat.read(repo.solutions / f"{assignment.notebook}.ipynb", as_version=4)
        assert any('palette="colorblind"' in c.source for c in nb.cells if c.cell_type == "code"), assignment.name
        for cell in nb.cells:
            if cell.cell_type != "code" or not any("image/png" in o.get("data", {}) for o in cell.outputs):
                continue
            where = f"{assignment.name}: figure cell starting {cell.source[:60]!r}"
            assert re.search(r"xlabel|set_xlabel", cell.source), f"{where} has no axis labels"
            assert "Notice" in cell.source, f"{where} has no one-line caption saying what to notice"
            for cmap in re.findall(r'cmap="([^"]+)"', cell.source):
                assert cmap in COLOURBLIND_SAFE, f"{where} uses colour map {cmap}"


def _solution_07_output(repo) -> str:
    nb = nbformat.read(repo.root / "solutions" / "07_training.ipynb", as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_07_evaluates_the_epoch_with_the_lowest_validation_loss(repo):
    """Early stopping as section 9 says: the checkpoint kept, and evaluated, is the epoch with the
    lowest validation loss; and the exposure-bias figure shows what section 12 says it shows."""
    out = _solution_07_output(repo)
    found = re.findall(r"^(epoch +\d+(?: \(partial: \d+ of \d+ batches\))?): train loss [\d.]+, val loss ([\d.]+)",
                       out, re.MULTILINE)
    epochs = [(label, float(loss)) for label, loss in found]
    assert len(epochs) >= 2, out[:2000]
    assert all("partial" not in label for label, _ in epochs[:-1])  # only the round the budget cut is partial
    best, best_loss = min(epochs, key=lambda e: e[1])
    assert f"kept {best} (lowest validation loss, {best_loss:.3f})" in out and f"(kept {best})" in out
    best = int(best.split()[1])
    epochs = [(int(label.split()[1]), loss) for label, loss in epochs]
    if best < epochs[-1][0]:  # it stopped after the best epoch: the notebook says why
        assert "over-fit" in out or "stayed near it" in out
    exposure = re.search(r"at position (\d+), the most likely next token given the reference prefix is the "
                         r"reference's in (\d+)% of sentences; greedy decoding's token at that position is the "
                         r"reference's in (\d+)%; and (\d+)% of the greedy outputs still equal the reference", out)
    assert exposure and int(exposure[2]) > int(exposure[3]) >= int(exposure[4]), exposure


def test_readme_translation_results_are_those_of_the_executed_solution(repo):
    """The 07 results (front page, and the benchmarks guide's table and paragraph) quote the committed
    run: a retrain that changes them fails here until the pages say what the notebook printed. The
    decoder is chosen on the validation set and the test set decoded once, with it."""
    out = _solution_07_output(repo)
    readme = (repo.root / "docs" / "benchmarks.md").read_text()
    front = " ".join((repo.root / "README.md").read_text().split())
    config = re.search(r"configuration (\w+) on [^:]+: [\d.]+ min of training, [\d,]+ steps, [\d.]+ epochs "
                       r"\(kept (?:epoch \d+(?: \(partial: \d+ of \d+ batches\))?|step \d+ \(epoch [\d.]+\))\), "
                       r"([\d,]+) target tokens/s, peak memory ([\d.]+ GiB)", out)
    assert config, "the solution no longer prints its configuration line"
    name, throughput, peak = config.groups()
    chosen = re.search(r"chosen on the validation set: (greedy|beam 4)", out)[1]
    assert len(re.findall(r"^test_2016_flickr, ", out, re.MULTILINE)) == 1, "the test set is decoded once"
    tested = re.search(rf"test_2016_flickr, {chosen}: BLEU +([\d.]+) cased, +([\d.]+) lowercase", out)
    cased, lowercase = tested.groups()
    rows = {line.split("|")[1].strip(): line for line in readme.splitlines() if line.startswith("| `")}
    row = next(row for key, row in rows.items() if key.startswith(f"`{name}`") and "chosen on validation" in key)
    assert f"decoder chosen on validation: {chosen}" in row, row
    assert f"sacreBLEU {cased} ({chosen}, the decoder chosen on the validation set), cased" in front
    assert [cased, lowercase] == re.findall(r"\| \**([\d.]+)\** ", row + " ")[-2:], row
    assert f"{throughput} tokens/s" in row and f"{peak} peak" in row, row
    val = re.search(r"val, cased BLEU: greedy ([\d.]+) in \d+ s, beam 4 ([\d.]+) in \d+ s", out)
    changed = re.search(r"beam search changed (\d+) of (\d+) translations and moved BLEU by ([+-][\d.]+), "
                        r"at ([\d.]+)x", out)
    n, total, delta, ratio = changed.groups()
    prose = " ".join(readme.split())  # the paragraph's line breaks fall anywhere
    assert (f"validation BLEU {val[1]} greedy, {val[2]} beam 4: beam 4 changed {int(n):,} of {int(total):,} "
            f"validation translations, {delta} BLEU, {ratio}x") in prose
    cache = re.search(r"(\d+) test sentences, greedy on [^:]+: [\d.]+ s without a cache, [\d.]+ s with one "
                      r"\(([\d.]+)x the speed\)"
                      r"; (\d+) of \1 translations identical", out)
    sentences, speedup, same = cache.groups()
    assert f"{speedup}x faster on {sentences} sentences, " + ("identical" if same == sentences else "") in prose


def test_07_validation_figures_quoted_in_text_are_those_of_the_executed_solution(repo):
    """The validation figures that argue 07's choices (section 9's text, the benchmarks guide's BLEU
    against time row, its note on choosing by validation), the model answers' figures and beam search's
    cost on the CPU (its hint) are the committed run's: a retrain that changes them fails here until
    the text says what the notebook printed."""
    out = _solution_07_output(repo)
    nb = nbformat.read(repo.root / "solutions" / "07_training.ipynb", as_version=4)
    text = " ".join(" ".join(c.source for c in nb.cells if c.cell_type == "markdown").split())
    docs = " ".join((repo.root / "docs" / "benchmarks.md").read_text().split())
    rounds = re.findall(r"^epoch +(\d+)( \(partial: (\d+) of (\d+) batches\))?: train loss ([\d.]+), val loss "
                        r"([\d.]+), val BLEU +([\d.]+)", out, re.MULTILINE)
    losses = [float(r[5]) for r in rounds]
    kept = rounds[losses.index(min(losses))]
    last = rounds[-1]
    ordinal = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth"]
    assert losses == sorted(losses, reverse=True), losses  # what section 9 says: it fell at every evaluation
    count = ["one", "two", "three", "four", "five", "six", "seven", "eight"][len(rounds) - 1]
    assert (f"fell at every one of its {count} evaluations, down to {kept[5]} (validation BLEU {kept[6]}) at the "
            "last") in text, kept
    assert last[1] and f"({last[2]} of its {last[3]} batches)" in text  # the cut round, named as such
    assert f"validation loss {kept[5]}, BLEU {kept[6]};" in docs
    assert (f"lowest at the {ordinal[len(rounds) - 1]} and last evaluation ({kept[5]}), after a "
            f"{ordinal[len(rounds) - 1]} epoch the 10-minute budget cut short ({last[2]} of {last[3]} batches)") in text
    assert f"its last figure, {last[4]}, is the mean of those {last[2]} late batches" in text
    table = re.findall(r"^ +([\d.]+) +\d+ +([\d.]+)$", out.split("BLEU against time:")[1], re.MULTILINE)
    row = (f"val BLEU after {' / '.join(m for m, _ in table)} min (greedy) | "
           f"{' / '.join(b for _, b in table)} |")
    assert row in docs, row
    val = re.search(r"val, cased BLEU: greedy ([\d.]+) in \d+ s, beam 4 ([\d.]+) in \d+ s", out)
    changed = re.search(r"beam search changed (\d+) of (\d+) translations and moved BLEU by [+-]([\d.]+), "
                        r"at ([\d.]+)x the decoding time", out)
    n, total, delta, ratio = changed.groups()
    assert (f"on the validation set, beam 4 changed {int(n):,} of {int(total):,} translations and raised BLEU by "
            f"{delta} ({val[1]} to {val[2]}), in {ratio} times greedy's decoding time") in text
    assert f"beam 4 then took {ratio} times greedy decoding's time on two CPU cores" in text, ratio


def _solution_text_and_output(repo, notebook: str) -> tuple[str, str]:
    """A committed executed solution's markdown (spaces collapsed) and its printed output."""
    nb = nbformat.read(repo.root / "solutions" / f"{notebook}.ipynb", as_version=4)
    text = " ".join(" ".join(c.source for c in nb.cells if c.cell_type == "markdown").split())
    out = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    return text, out


def test_02_and_06_figures_quoted_in_text_are_those_of_the_executed_solutions(repo):
    """02's model answer quotes the saturation its section 1 prints; 06's text reconciles the base
    model's printed parameter counts (untied, three-way tied) with the paper's 65 M."""
    text, out = _solution_text_and_output(repo, "02_scaled_dot_product")
    unscaled, scaled = re.search(r"d_k = 1024: .*unscaled ([\d.]+), scaled ([\d.]+)", out).groups()
    assert f"about {unscaled} without the scale and about {scaled} with it" in text, (unscaled, scaled)
    text, out = _solution_text_and_output(repo, "06_transformer")
    untied = float(re.search(r"total, untied: +([\d.]+) M", out)[1])
    tied = float(re.search(r"total, three-way tie: +([\d.]+) M", out)[1])
    three = 1.5 * (untied - tied)  # each tie removes one V x D matrix: two ties, three matrices
    assert f"hold {three:.1f} of the {untied:.1f} M parameters" in text, (three, untied)
    assert f"the count is {tied:.1f} M, close to the 65 M" in text, tied
    assert f"the remaining {65 - tied:.0f} M cannot be placed" in text, tied


def test_08_results_in_the_docs_are_those_of_the_executed_solution(repo):
    """Notebook 08's figures (docs/benchmarks.md) quote the committed run of its Part B: the post-LN
    against pre-LN losses, the two models' table, and the attention timings."""
    nb = nbformat.read(repo.root / "solutions" / "08_modern_decoder.ipynb", as_version=4)
    out = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    docs = " ".join((repo.root / "docs" / "benchmarks.md").read_text().split())
    config = re.search(r"configuration: (\w+) on ([^\n]+)", out)
    assert config and config[1] in ("cpu", "gpu"), "commit a full run (cpu or gpu), not the tiny one"
    losses = dict(re.findall(r"(pre-LN|post-LN) *: loss over the last \d+ steps ([\d.]+)", out))
    front = " ".join((repo.root / "README.md").read_text().split())
    assert f"{losses['pre-LN']} (pre-LN) against {losses['post-LN']} (post-LN)" in docs
    assert f"{losses['pre-LN']} (pre-LN) against {losses['post-LN']} (post-LN)" in front
    perplexity = re.search(r"^validation perplexity +([\d.]+) +([\d.]+)$", out, re.MULTILINE).groups()
    assert f"validation perplexity {perplexity[1]} against {perplexity[0]}" in front
    for key in ("parameters", "steps", "tokens/s", "activations (MiB)", "validation perplexity"):
        old, new = re.search(rf"^{re.escape(key)} +([\d,.-]+) +([\d,.-]+)$", out, re.MULTILINE).groups()
        assert f"| {key} | {old} | {new} |" in docs, (key, old, new)
    for length, label, ms, mib in re.findall(r"L = +(\d+) +(.+?) +([\d.]+) ms +largest tensor +([\d.]+) MiB", out):
        assert f"| {length} | {label.strip()} | {ms} ms | {mib} MiB |" in docs, (length, label, ms, mib)


def test_07_chooses_its_configuration_by_compute_capability(repo):
    """bf16 tensor cores (compute capability 8.0 and up) get the `gpu` configuration; an older GPU (a
    T4 is 7.5, a V100 7.0) and a machine without one get the small `cpu` model. The function is the
    executed solution's own, taken from its configuration cell."""
    nb = nbformat.read(repo.root / "solutions" / "07_training.ipynb", as_version=4)
    cell = next(c.source for c in nb.cells if c.cell_type == "code" and "def choose_configuration" in c.source)
    namespace: dict = {}
    exec(cell[cell.index("def choose_configuration"):cell.index("\ncapability = ")], namespace)
    choose = namespace["choose_configuration"]
    chosen = {capability: choose(capability) for capability in [None, (6, 0), (7, 0), (7, 5), (8, 0), (8, 6),
                                                                (9, 0), (10, 0)]}
    assert chosen == {None: "cpu", (6, 0): "cpu", (7, 0): "cpu", (7, 5): "cpu", (8, 0): "gpu", (8, 6): "gpu",
                      (9, 0): "gpu", (10, 0): "gpu"}, chosen
    assert "device = torch.device(\"cuda\" if capability is not None else \"cpu\")" in cell  # on the GPU either way


def test_07_names_a_training_loop_in_another_precision_than_the_machines(repo):
    """Part B notes the dtype of the logits a student's train_epoch produced (a forward hook) and names a
    loop that autocasts to bf16 on a GPU without bf16 tensor cores (a T4), or stays in float32 on one with
    them. The function is the executed solution's own; the dtypes come from a real forward pass."""
    import torch

    nb = nbformat.read(repo.root / "solutions" / "07_training.ipynb", as_version=4)
    cell = next(c.source for c in nb.cells if c.cell_type == "code" and "def precision_notice" in c.source)
    namespace: dict = {"torch": torch}
    exec(cell[cell.index("def precision_notice"):], namespace)
    notice = namespace["precision_notice"]
    model, seen = torch.nn.Linear(4, 4), {"autocast": set(), "float32": set()}
    for kind in seen:
        hook = model.register_forward_hook(lambda module, inputs, logits, kind=kind: seen[kind].add(logits.dtype))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=kind == "autocast"):
            model(torch.ones(2, 4))
        hook.remove()
    assert seen == {"autocast": {torch.bfloat16}, "float32": {torch.float32}}, seen
    assert "without bf16 tensor cores" in notice("cuda", False, seen["autocast"])  # a T4 told to autocast
    assert "float32 on a GPU with bf16 tensor cores" in notice("cuda", True, seen["float32"])
    assert notice("cuda", True, seen["autocast"]) is None and notice("cuda", False, seen["float32"]) is None
    assert notice("cpu", False, seen["autocast"]) is None  # a CPU's autocast is the caller's (section 9)
    assert "precision_notice(device.type, use_bf16, precisions)" in next(
        c.source for c in nb.cells if c.cell_type == "code" and "train_epoch(model, until(" in c.source)


def test_the_release_tells_students_how_to_check_and_its_example_is_the_graders_output(repo):
    """course/README.md (from autograder/source/README.md) says how to run `check` on a machine and in
    Colab, and its example is what `check` prints for a softmax that shifts and sums over the wrong axes:
    the feedback line is the hidden check's own message, the rest check_report's format for notebook 01."""
    from quality.incheck import namespace, run_checks
    from transformer_course.grading.notebook.grade import ExerciseResult, SubmissionResult, check_report

    text = (repo.course / "README.md").read_text()
    assert "transformer-course check path/to/01_self_attention.ipynb" in text
    assert "!transformer-course check /content/01_self_attention.ipynb" in text  # Colab
    example = re.search(r"```\n(01_self_attention: .*?)\n```", text, re.DOTALL)[1]
    wrong = ("def softmax(x, dim=-1):\n    e = (x - x.amax()).exp()\n    return e / e.sum(dim=0, keepdim=True)\n")
    with pytest.raises(AssertionError) as failed:
        run_checks("softmax", namespace(wrong))
    assignment = repo.assignment("01_self_attention")
    lost = {"softmax": f"{failed.value} [also failed: its visible test]"}
    exercises = [ExerciseResult(e, 0 if e in lost else assignment.max_score(e), assignment.max_score(e),
                                lost.get(e, "")) for e in assignment.exercises]
    result = SubmissionResult("self", assignment.name, "graded", exercises=exercises)
    assert example == check_report(result, repo, as_json=False)[0].rstrip("\n")
