"""The judge (test cells run in the grader, the student's code in the kernel): calls behave as if
they ran here (values, exceptions, gradients, RNG, in-place changes), and the kernel cannot reach
a verdict. A plain kernel, no nbgrader: the grading path is in test_tamper and test_fairness."""

from __future__ import annotations

import resource
import shutil
import textwrap

import pytest
from jupyter_client.manager import start_new_kernel

from transformer_course.grading.judging.judge import run_test
from transformer_course.grading.judging.link import Link
from transformer_course.grading.notebook.nbgrader_setup import trusted_tests
from transformer_course.grading.notebook.workarea import judged, kernel_copy_ignore

SOFTMAX = ("def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
           "    return e / e.sum(dim, keepdim=True)\n")


@pytest.fixture(scope="module")
def kernel():
    km, kc = start_new_kernel(kernel_name="python3")
    link = Link(km.blocking_client(), timeout=60, interrupt=km.interrupt_kernel)
    link.install()
    yield km, kc, link
    link.close()
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def define(kc, code: str) -> None:
    reply = kc.execute_interactive(textwrap.dedent(code), timeout=60, output_hook=lambda msg: None)
    assert reply["content"]["status"] == "ok", reply["content"]


def judge(link: Link, code: str, repo=None) -> tuple[str, str, str]:
    return run_test(link, textwrap.dedent(code), "test_x", repo.reference if repo else None)


def test_the_hidden_softmax_check_passes_a_correct_answer_and_names_a_wrong_one(kernel, repo):
    _, kc, link = kernel
    source = trusted_tests(repo.source / "01_self_attention" / "01_self_attention.ipynb")["test_softmax_hidden"]
    define(kc, "import torch\n" + SOFTMAX)
    assert run_test(link, source, "test_softmax_hidden", repo.reference)[:2] == ("", "")
    define(kc, "def softmax(x, dim=-1):\n    return x.exp()\n")
    ename, evalue, _ = run_test(link, source, "test_softmax_hidden", repo.reference)
    assert ename == "AssertionError" and "without dividing by the sum" in evalue


def test_a_kernel_that_patches_comparisons_changes_no_verdict(kernel, repo):
    _, kc, link = kernel
    source = trusted_tests(repo.source / "01_self_attention" / "01_self_attention.ipynb")["test_softmax_hidden"]
    define(kc, """
        import sys, torch
        torch.allclose = torch.equal = lambda *a, **k: True
        sys.settrace(lambda *a: None)
        def softmax(x, dim=-1):
            return x.exp()
    """)
    assert run_test(link, source, "test_softmax_hidden", repo.reference)[0] == "AssertionError"


def test_exceptions_keep_their_class_and_message(kernel):
    _, kc, link = kernel
    define(kc, """
        class Shout(Exception):
            pass
        def odd(n):
            if n % 2 == 0:
                raise ValueError(f"{n} is even")
            raise Shout("loud")
        def todo():
            raise NotImplementedError("not written yet")
    """)
    assert judge(link, """
        try:
            odd(2)
        except ValueError as exc:
            assert str(exc) == "2 is even"
    """)[0] == ""
    assert judge(link, "odd(3)")[:2] == ("Shout", "loud")
    assert judge(link, "todo()")[0] == "NotImplementedError"
    assert judge(link, "missing_name")[0] == "NameError"


def test_gradients_flow_back_through_a_call(kernel):
    _, kc, link = kernel
    define(kc, """
        import torch
        layer = torch.nn.Linear(3, 2)
        def f(x, w):
            return (x @ w).tanh()
    """)
    assert judge(link, """
        x = torch.randn(4, 3, requires_grad=True)
        w = torch.randn(3, 2, requires_grad=True)
        f(x, w).square().sum().backward()
        x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        (x2 @ w2).tanh().square().sum().backward()
        assert torch.allclose(x.grad, x2.grad) and torch.allclose(w.grad, w2.grad)
        # A module's parameters get their gradients in the kernel, read back as attributes.
        out = layer(torch.ones(1, 3))
        out.sum().backward()
        assert torch.equal(layer.weight.grad, torch.ones(2, 3))
        # torch.autograd.grad through a call: only the inputs asked for.
        y = torch.randn(2, 3, requires_grad=True)
        (g,) = torch.autograd.grad(f(y, w.detach())[0].sum(), y)
        assert g[1].abs().sum() == 0 and g[0].abs().sum() > 0
    """)[:2] == ("", "")


def test_rng_and_default_device_are_those_of_the_grader(kernel):
    _, kc, link = kernel
    define(kc, "import torch\ndef noise(n):\n    return torch.rand(n)\ndef fresh():\n    return torch.ones(2)\n")
    assert judge(link, """
        torch.manual_seed(5)
        first = noise(3)
        after = torch.rand(1)  # the grader's RNG moved on as the kernel's did
        torch.manual_seed(5)
        assert torch.equal(first, torch.rand(3)) and torch.equal(after, torch.rand(1))
        with torch.device("meta"):
            assert fresh().device.type == "meta"
    """)[:2] == ("", "")


def test_in_place_changes_reach_the_kernel(kernel):
    _, kc, link = kernel
    define(kc, "import torch\nlayer = torch.nn.Linear(2, 2, bias=False)\n")
    assert judge(link, """
        torch.nn.init.eye_(layer.weight)
        assert isinstance(layer, nn.Linear)
        x = torch.tensor([[1.0, 2.0]])
        assert torch.equal(layer(x), x)
        with torch.no_grad():
            for p in layer.parameters():
                p.mul_(2)
        assert torch.equal(layer(x), 2 * x)
    """)[:2] == ("", "")


def test_a_lent_function_runs_here_with_its_gradient(kernel):
    _, kc, link = kernel
    define(kc, "import torch\ndef twice(x):\n    return helper(x) * 2\ndef helper(x):\n    return x - 100\n")
    assert judge(link, """
        from transformer_course.grading.judging.judge import Namespace
        ns = globals()
        with ns.lend({"helper": lambda x: x.square()}):
            x = torch.tensor([1.0, 3.0], requires_grad=True)
            out = twice(x)
            out.sum().backward()
        assert torch.equal(out, torch.tensor([2.0, 18.0])) and torch.equal(x.grad, torch.tensor([4.0, 12.0]))
        assert torch.equal(twice(torch.tensor([100.0])), torch.tensor([0.0]))  # its own helper again
    """)[:2] == ("", "")


def test_the_kernels_copy_of_the_reference_leaves_out_judged_notebooks(repo, tmp_path):
    ignore = kernel_copy_ignore(repo.reference)
    package = repo.reference / "course_reference"
    left_out = ignore(str(package), [p.name for p in package.iterdir()])
    left_out |= ignore(str(package / "checks"), [p.name for p in (package / "checks").iterdir()])
    numbers = sorted(p.stem[2:] for p in (package / "checks").glob("nb[0-9][0-9].py"))
    judged_numbers = [n for n in numbers if judged(repo.reference, f"{n}_")]
    assert judged_numbers == numbers  # every notebook's tests run in the grader
    assert {f"nb{n}.py" for n in judged_numbers} <= left_out  # the checks of every judged notebook
    assert "guard.py" not in left_out
    kept = [p for p in package.glob("nb[0-9][0-9]_*.py") if p.name not in left_out]
    assert kept == [] and "checks" in left_out  # no reference module, no checks, not even their helpers
    copy = tmp_path / "copy"
    shutil.copytree(repo.reference, copy, ignore=ignore)
    assert sorted(p.name for p in copy.rglob("*.py")) == ["__init__.py", "guard.py"]


def test_a_lent_module_class_keeps_its_parameters_in_the_kernel_and_its_forward_here(kernel):
    _, kc, link = kernel
    define(kc, """
        import torch
        from torch import nn
        class Block(nn.Module):  # the student's: builds on a module class of an earlier exercise
            def __init__(self, d):
                super().__init__()
                self.inner = Inner(d)
                self.out = nn.Linear(d, 1)
            def forward(self, x):
                return self.out(self.inner(x))
        class Inner(nn.Module):  # the student's own (wrong) version
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
            def forward(self, x):
                return self.lin(x) * 0
    """)
    assert judge(link, """
        class Inner(nn.Module):  # the reference lent for the test
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.drop = nn.Dropout(0.5)
            def forward(self, x):
                return self.drop(self.lin(x).relu())
        ns = globals()
        with ns.lend({"Inner": Inner}):
            torch.manual_seed(0)
            mine = Block(3)
            torch.manual_seed(0)
            here = nn.Module()
            here.inner, here.out = Inner(3), nn.Linear(3, 1)
        names = [n for n, _ in mine.named_parameters()]
        assert names == ["inner.lin.weight", "inner.lin.bias", "out.weight", "out.bias"], names
        assert all(torch.equal(a, b) for a, b in zip(mine.parameters(), here.parameters()))
        x = torch.randn(4, 3, requires_grad=True)
        with ns.lend({"Inner": Inner}):
            mine.eval()
            out = mine(x)
        assert torch.allclose(out, here.out(here.inner.eval()(x)))
        out.sum().backward()
        x2 = x.detach().clone().requires_grad_()
        here.out(here.inner(x2)).sum().backward()
        assert torch.allclose(x.grad, x2.grad)
        assert torch.allclose(mine.inner.lin.weight.grad, here.inner.lin.weight.grad)
        mine.train()
        torch.manual_seed(3)
        a = mine(x)
        torch.manual_seed(3)
        assert torch.equal(a, mine(x)) and not torch.equal(a, mine(x))  # dropout, with the grader's RNG
    """)[:2] == ("", "")


def test_the_same_object_of_the_kernel_is_the_same_proxy(kernel):
    _, kc, link = kernel
    define(kc, "import torch\nlayer = torch.nn.Linear(2, 2)\n"
               "stack = torch.nn.ModuleList([layer, layer, torch.nn.Linear(2, 2)])\n")
    assert judge(link, """
        assert len(stack) == 3 and stack[0] is stack[1] and stack[0] is not stack[2]
        assert len({id(m) for m in stack}) == 2
    """)[:2] == ("", "")


def test_the_graders_objects_handed_to_the_students_code_act_as_themselves(kernel):
    """A test's own model, optimizer, scheduler and loss handed to a training step written in the
    kernel: attributes, calls with gradients both ways (the grader's model gets its .grad),
    iteration, ``bool`` and ``len`` are the grader's objects' own."""
    _, kc, link = kernel
    define(kc, """
        import torch
        def step(model, batch, optimizer, scheduler, loss_fn):
            model.train()
            x, y = batch
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            norm = sum(float(p.grad.norm()) for p in model.parameters())
            optimizer.step()
            if scheduler:
                scheduler.step()
            return loss.item(), norm, model.scale, len(model.layers), next(model.parameters()).shape
    """)
    assert judge(link, """
        import torch
        class Model(torch.nn.Module):
            scale = 3
            def __init__(self):
                super().__init__()
                self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 1)])
            def forward(self, x):
                return self.layers[0](x) * self.scale
        torch.manual_seed(0)
        model, twin = Model().eval(), Model()
        twin.load_state_dict(model.state_dict())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
        x, y = torch.randn(4, 2), torch.randn(4, 1)
        calls = []
        def loss_fn(out, target):
            calls.append(out.shape)
            return ((out - target) ** 2).mean()
        loss, norm, scale, layers, shape = step(model, (x, y), opt, sched, loss_fn)
        expected = loss_fn(twin(x), y)
        expected.backward()
        assert model.training and calls == [(4, 1), (4, 1)] and (scale, layers, tuple(shape)) == (3, 1, (1, 2))
        assert abs(loss - expected.item()) < 1e-6
        assert abs(norm - sum(float(p.grad.norm()) for p in twin.parameters())) < 1e-5
        for mine, want in zip(model.parameters(), twin.parameters()):
            assert torch.allclose(mine, want - 0.1 * want.grad), "the grader's SGD stepped on the kernel's gradients"
        assert sched.last_epoch == 1
    """)[:2] == ("", "")


def test_an_optimizer_here_steps_the_kernels_own_parameters(kernel):
    """An optimizer built here over a kernel module's parameters, stepped by the student's code:
    it reads the kernel's gradients first and writes the new values back."""
    _, kc, link = kernel
    define(kc, """
        import torch
        torch.manual_seed(1)
        net = torch.nn.Linear(3, 1)
        def train(model, optimizer, x):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    """)
    assert judge(link, """
        import torch
        before = [p.detach().clone() for p in net.parameters()]
        opt = torch.optim.SGD(net.parameters(), lr=1.0)
        x = torch.ones(2, 3)
        train(net, opt, x)
        after = [p.detach().clone() for p in net.parameters()]
        assert torch.allclose(after[0], before[0] - 2.0) and torch.allclose(after[1], before[1] - 2.0), (before, after)
    """)[:2] == ("", "")


def test_an_optimizer_over_the_kernels_parameters_runs_there_and_its_state_comes_back(kernel):
    """PyTorch's own optimizer over the kernel's parameters is rebuilt there for the call (its step()
    costs no request): the result is that of the same optimizer run here, its state (Adam's moments,
    the step count) comes back after every call, and the copies here get the new values. With a
    scheduler in the same call, which steps the optimizer here, it stays here."""
    _, kc, link = kernel
    define(kc, """
        import torch
        torch.manual_seed(2)
        net = torch.nn.Linear(3, 2)
        def epoch(model, optimizer, batches, scheduler=None):
            for x in batches:
                optimizer.zero_grad()
                (model(x) ** 2).mean().backward()
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
            return type(optimizer).__name__
    """)
    assert judge(link, """
        import torch
        params = list(net.parameters())
        twin = torch.nn.Linear(3, 2)
        with torch.no_grad():
            for mine, want in zip(twin.parameters(), params):
                mine.copy_(want)
        batches = [torch.randn(4, 3) for _ in range(3)]
        opt = torch.optim.Adam(params, lr=0.1)
        twin_opt = torch.optim.Adam(twin.parameters(), lr=0.1)
        for _ in range(2):
            assert epoch(net, opt, batches) == "Adam"
            for x in batches:
                twin_opt.zero_grad()
                (twin(x) ** 2).mean().backward()
                twin_opt.step()
        assert float(opt.state[params[0]]["step"]) == 6, opt.state_dict()["state"]
        assert torch.allclose(opt.state[params[0]]["exp_avg"], twin_opt.state[next(twin.parameters())]["exp_avg"])
        for here, there, want in zip(params, net.parameters(), twin.parameters()):
            assert torch.allclose(here, want, atol=1e-6) and torch.allclose(there, want, atol=1e-6)
        # A scheduler that halves the rate after each step: the optimizer must stay here to see it.
        opt = torch.optim.SGD(net.parameters(), lr=1.0)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 ** s)
        epoch(net, opt, batches[:2], sched)
        assert opt.param_groups[0]["lr"] == 0.25 and sched.last_epoch == 2
    """)[:2] == ("", "")


def test_attributes_of_the_graders_objects_are_read_again_once_they_change(kernel):
    """The kernel keeps what it read of a test's object (a decoding loop reads model.pad_id at every
    step) only until the grader's code changes it: a model that counts its calls is read anew. Writing one
    is refused: the grader's objects are lent read-only."""
    _, kc, link = kernel
    define(kc, """
        def look(model, x):
            seen = [model.calls, model.pad_id]
            model(x)
            seen.append(model.calls)
            try:
                model.pad_id = 7
            except RuntimeError as exc:
                seen.append(str(exc))
            seen += [model.pad_id, model.calls]
            return seen
    """)
    assert judge(link, """
        import torch
        class Counting(torch.nn.Module):
            pad_id = 0
            def __init__(self):
                super().__init__()
                self.calls = 0
            def forward(self, x):
                self.calls += 1
                return x
        model = Counting()
        seen = look(model, torch.ones(1))
        assert seen[:3] + seen[4:] == [0, 0, 1, 0, 1] and "read-only" in seen[3], seen
        assert model.pad_id == 0 and model.calls == 1
    """)[:2] == ("", "")


def test_what_the_students_code_prints_is_in_the_tests_output(kernel):
    _, kc, link = kernel
    define(kc, "def noisy(x):\n    print('debug:', x)\n    return x + 1\n")
    ename, _, printed = judge(link, "assert noisy(1) == 2\nprint('passed')\n")
    assert ename == "" and printed.index("debug: 1") < printed.index("passed")


REFLECT = """
    def reach(model):
        ask = type(model)._course_ask  # the raw request, past the stand-in's filter of dunders
        answers = []
        for steps in (["__class__", "__init__", "__builtins__"], ["forward", "__func__", "__builtins__"]):
            try:
                value = model
                for name in steps:
                    value = ask(value, getattr=name)
                run = value["exec"] if isinstance(value, dict) else ask(value, getattr="exec")
                run("print('GRADER' + '-RAN-' + 'IT')")
                answers.append("ran")
            except Exception as exc:
                answers.append(str(exc))
        try:
            ask(model, setattr="pad_id", value=7)
            answers.append("written")
        except Exception as exc:
            answers.append(str(exc))
        answers.append([hasattr(model, "pad_id"), hasattr(model, "no_such_thing"), getattr(model, "bos_id", 1)])
        return answers
"""


def test_the_graders_objects_answer_only_the_allow_list(kernel):
    """The kernel walking a lent model to the builtins (from its class, or from a lent method) or
    writing its attribute, with the raw requests the stand-in class would filter: each refused,
    saying what was asked, and nothing of the student's runs here."""
    _, kc, link = kernel
    define(kc, REFLECT)
    ename, evalue, printed = judge(link, """
        import torch
        class Model(torch.nn.Module):
            pad_id = 0
            def forward(self, x):
                return x
        model = Model()
        answers = reach(model)
        assert "lends no private or special attribute" in answers[0] and "'__func__'" in answers[1], answers
        assert "read-only" in answers[2] and model.pad_id == 0, answers
        assert answers[3] == [True, False, 1], answers  # a missing attribute is an AttributeError there
    """)
    assert (ename, evalue) == ("", "") and "GRADER-RAN-IT" not in printed, (ename, evalue, printed)


def test_sizes_from_the_kernel_are_bounded_before_any_copy(kernel):
    """A stride-0 tensor (a few bytes sent, gigabytes once copied) and a lent reference called at a
    size no test uses are refused; the RNG state a lent class is built with is the kernel's for that
    call only."""
    from transformer_course.grading.judging import sizes

    _, kc, link = kernel
    define(kc, """
        import torch
        def huge():
            clone = torch.Tensor.clone
            torch.Tensor.clone = lambda self, *a, **k: self if self.numel() > 10**8 else clone(self, *a, **k)
            try:
                return torch.zeros(1).expand(500_000_000)
            finally:
                pass
        def big_call():
            try:
                table(9000, 9000)  # the lent reference, by its name (as an exercise calls softmax)
            except Exception as exc:
                return str(exc)
    """)
    ename, evalue, _ = judge(link, "huge()")
    assert ename == "Refused" and "larger than any test's" in evalue, (ename, evalue)
    define(kc, "import torch\ntorch.Tensor.clone = torch.Tensor.clone\n")
    ename, evalue, _ = judge(link, """
        import torch
        def table(n, d):
            return torch.zeros(n, d)
        ns = globals()
        with ns.lend({"table": table}):
            said = big_call()
        assert said is not None and "at most" in said, said
    """)
    assert (ename, evalue) == ("", ""), (ename, evalue)
    assert sizes.MAX_CALL_SIZE < 9000 * 9000


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_lent_call_counts_every_argument_that_stands_for_a_size(kernel, repo):
    """05's lent sinusoidal_positional_encoding called with sizes that are no ints (0-dim and
    one-element tensors, a float, numpy integers) is refused as the same call with ints is, before
    the grader computes anything (its memory does not grow); a test's own sizes still run."""
    _, kc, link = kernel
    define(kc, """
        import numpy as np
        import torch
        def odd_sizes():
            said = []
            for args in [(torch.tensor(5000), torch.tensor(5000)), (torch.tensor([5000]), 5000),
                         (torch.tensor(5000.0), torch.tensor(5000, dtype=torch.int32)), (2.0e7, 2),
                         (np.int64(5000), np.int64(5000)), (torch.tensor(16), 8)]:
                try:
                    said.append(tuple(sinusoidal_positional_encoding(*args).shape))
                except Exception as exc:
                    said.append(str(exc))
            return said
    """)
    before = _peak_mb()
    ename, evalue, _ = judge(link, """
        from course_reference.nb05_positional_encoding import sinusoidal_positional_encoding as table
        ns = globals()
        with ns.lend({"sinusoidal_positional_encoding": table}):
            said = odd_sizes()
        assert all("at most 16,777,216" in s for s in said[:4]), said
        assert "[5000, 5000]" in said[0] and "[20000000, 2]" in said[3], said
        assert isinstance(said[4], str), said  # numpy integers (objects of the kernel here): not computed either
        assert said[5] == (16, 8), said
    """, repo)
    assert (ename, evalue) == ("", ""), (ename, evalue)
    assert _peak_mb() - before < 100, f"the judge grew by {_peak_mb() - before:.0f} MB"


def test_a_lent_call_counts_the_defaults_and_the_tensors_it_multiplies(repo, monkeypatch):
    """What a call computes, not only what it is passed: PositionalEncoding's default max_len of 5000
    times a d_model of 2^17, repeat_kv's n_rep times its tensor; a float parameter (a base) is no size."""
    import torch

    from transformer_course.grading.judging import lending, sizes

    monkeypatch.syspath_prepend(str(repo.reference))
    from course_reference import nb05_positional_encoding as nb05
    from course_reference import nb08_modern_decoder as nb08

    with pytest.raises(lending.Refused, match="at most"):
        sizes.check_call_size("PositionalEncoding", [2**17], {}, nb05.PositionalEncoding)
    sizes.check_call_size("PositionalEncoding", [16], {}, nb05.PositionalEncoding)
    with pytest.raises(lending.Refused, match="at most"):
        sizes.check_call_size("repeat_kv", [torch.zeros(2**20), 64], {}, nb08.repeat_kv)
    sizes.check_call_size("repeat_kv", [torch.zeros(2, 2, 6, 8), 2], {}, nb08.repeat_kv)
    sizes.check_call_size("GroupedQueryAttention", [64, 8, 4], {"rope_base": 10000}, nb08.GroupedQueryAttention)


FLOODS = """
    def flood(kind):
        if kind == "floats":
            return [0.5] * 3_000_000
        if kind == "dict":
            return {i: 0.5 for i in range(1_000_000)}
        if kind == "string":
            return "x" * 5_000_000
        if kind == "deep":
            deep = []
            for _ in range(40):
                deep = [deep]
            return deep
        return [1, 2]
    def send_flood():
        try:
            table([0.5] * 3_000_000)
        except Exception as exc:
            return str(exc)
"""


def test_plain_data_from_the_kernel_is_bounded_before_it_is_built(kernel):
    """An answer of 3 million floats in a list, of a dict of a million entries, of a string of 5
    million characters, or nested 40 deep, and a lent reference called with 3 million floats: each
    refused with a message that says so, before the grader builds it (its memory does not grow by
    what the list would take), and the kernel answers the next request as before."""
    _, kc, link = kernel
    define(kc, FLOODS)
    before = _peak_mb()
    ename, evalue, _ = judge(link, """
        said = []
        for kind in ("floats", "dict", "string", "deep"):
            try:
                flood(kind)
                said.append("accepted")
            except Exception as exc:
                said.append(f"{type(exc).__name__}: {exc}")
        assert said[0].startswith("Refused") and "bytes of plain data" in said[0], said
        assert "64 MiB once built" in said[1], said
        assert "str of 5,000,000 characters (at most 4,194,304)" in said[2], said
        assert "nested too deeply" in said[3], said
        assert all("larger than any test's" in s for s in said[:3]), said
        def table(values):
            return len(values)
        ns = globals()
        with ns.lend({"table": table}):
            got = send_flood()
        assert got is not None and "bytes of plain data" in got, got
        assert flood("small") == [1, 2]
    """)
    assert (ename, evalue) == ("", ""), (ename, evalue)
    # The message itself (36 MB of text) is received; the list it holds (3 million floats in
    # Python, 100 MB and more, built by a pure-Python unpickler) is not.
    assert _peak_mb() - before < 250, f"the judge grew by {_peak_mb() - before:.0f} MB"


def test_plain_messages_go_as_literals_and_come_back_unchanged_and_nothing_else_does():
    """A message of plain values (a call's numbers) is written as a Python literal, a few times faster
    than torch.save's archive, and read back equal and of the same types; anything else (a tensor, a
    NaN, an int subclass, 40 levels deep, 3,000 elements) goes as before. What the grader reads as a
    literal is read without running anything, and only plain values pass."""
    import torch

    from transformer_course.grading.judging import decoding
    from transformer_course.grading.kernel import wire

    for value in [{"op": "call", "h": 3, "args": [4000, 512, (1, -0.0, 2**70)], "kwargs": {"x": None}},
                  {"ok": 6.987712429686844e-04}, [True, "é\n'\"", {1: [], "a": ()}]]:
        text = wire.encode(value)
        assert text.startswith(wire.LITERAL), text
        for read in (wire.decode, decoding.decode):
            back = read(text)
            assert back == value and repr(back) == repr(value)

    class Count(int):
        def __repr__(self) -> str:
            return "__import__('os').system('true')"

    deep: list = []
    for _ in range(40):
        deep = [deep]
    assert not wire.plain({"ok": Count(3)})  # its repr would run code where it is read
    for value in [{"ok": torch.ones(2)}, {"ok": float("nan")}, deep, list(range(3000)), {"ok": torch.float32}]:
        assert not wire.encode(value).startswith(wire.LITERAL), value
        assert wire.decode(wire.encode(value)) is not None
    hostile = ["__import__('os').system('true')", "[1] * 10", "[" * 500 + "]" * 500, "{1, 2}", "{(1,): 2}",
               "b'x'", "1j", "[" * 40 + "]" * 40, repr(list(range(20000)))]
    for text in hostile:
        with pytest.raises(ValueError):
            decoding.decode(wire.LITERAL + text)


def test_plain_values_and_dense_tensors_go_as_raw_bytes_and_come_back_exactly():
    """A message of plain values and dense tensors (a lent call's arguments, its gradients) goes as the
    tensors' bytes and a literal, read back with the same dtypes, shapes, values and layout; a tensor
    torch.save would write with more (a view, a shared storage, a Parameter, one that requires grad, an
    attribute) sends the whole message as before. What the grader reads is built from the dtype and
    shape it names and exactly its share of the bytes, or refused."""
    import torch

    from transformer_course.grading.judging import decoding
    from transformer_course.grading.kernel import wire

    message = {"callback": "#0", "args": [torch.randn(3, 4), torch.arange(6).reshape(2, 3), torch.tensor(2.5)],
               "kwargs": {"mask": torch.tensor([[True, False]]), "half": torch.randn(2).to(torch.bfloat16),
                          "empty": torch.empty(0, 5), "n": 3}, "grads": [None, torch.ones(1, dtype=torch.float64)]}
    text = wire.encode(message)
    assert text.startswith(wire.TENSORS), text[:20]

    def same(a, b) -> bool:
        if isinstance(a, torch.Tensor):
            return (type(b) is torch.Tensor and (a.dtype, a.shape) == (b.dtype, b.shape) and torch.equal(a, b)
                    and b.is_contiguous() and not b.requires_grad)
        if isinstance(a, list | tuple):
            return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
        if isinstance(a, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        return type(a) is type(b) and a == b

    for read in (wire.decode, decoding.decode):
        assert same(message, read(text))
    base = torch.randn(4, 4)
    shared = [base, base.view(16)]
    tagged = torch.ones(2)
    tagged.note = "kept by torch.save"
    for value in [{"a": base.t()}, {"a": base[1]}, {"a": shared}, [base, base], {"a": torch.nn.Parameter(base)},
                  {"a": base.clone().requires_grad_()}, {"a": tagged}, {"a": base, "b": float("nan")},
                  {"a": base, "d": torch.float32}, {"a": torch.randn(2) + 1j}]:
        text = wire.encode(value)
        assert text[0] not in (wire.TENSORS, wire.LITERAL), value
        back = wire.decode(text)
        assert isinstance(back, list | dict)
    twice = wire.decode(wire.encode([base, base]))
    assert twice[0] is twice[1]  # one tensor, as it was sent
    four = "AAAA"  # three bytes, base64
    hostile = [f"{four}|(b'0', [['torch.float32', [1]]])",  # 4 bytes named, 3 sent
               f"{four}|(b'1', [['torch.uint8', [3]]])", f"{four}|((b'0', b'0'), [['torch.uint8', [3]]])",
               f"{four}|(b'0', [['os.system', [3]]])", f"{four}|(__import__('os'), [])",
               f"{four}|(b'0', [['torch.uint8', [3]], ['torch.uint8', [0]]])", f"{four}|(1, [])",
               f"{four}|(b'0', [['torch.uint8', [0, 2147483648]]])", f"{four}|(b'0', [['torch.uint8', [True, 3]]])",
               f"{four}|({{1.5: b'0'}}, [['torch.uint8', [3]]])", f"{four}|(b'00', [['torch.uint8', [3]]])",
               "|(b'0', [['torch.float32', [1073741824, 1073741824]]])", four]
    for text in hostile:
        with pytest.raises(ValueError):
            decoding.decode(wire.TENSORS + text)
    assert decoding.decode(f"{wire.TENSORS}{four}|(b'0', [['torch.uint8', [3]]])").tolist() == [0, 0, 0]


def test_a_comprehension_of_calls_goes_to_the_kernel_at_once_and_acts_as_one_call_each(kernel):
    """``[f(s) for s in steps]`` in a test cell, with plain arguments, is one request: the same values,
    the same RNG states after it, the same calls made in the same order, and the student's error
    raised where it was (the calls after it not made); anything else is left as it was written."""
    _, kc, link = kernel
    define(kc, """
        import torch
        made = []
        def f(s, scale=1):
            made.append(s)
            if s == 13:
                raise ValueError("thirteen")
            return s * scale + float(torch.rand(()))
        def calls_made():
            found = list(made)
            made.clear()
            return found
    """)
    ops: list[str] = []
    request = link._request

    def counted(ask: dict):
        ops.append(ask.get("op", "call back"))
        return request(ask)

    link._request = counted
    try:
        ename, evalue, _ = judge(link, """
            torch.manual_seed(0)
            got = [f(s, scale=2) for s in range(5)]
            after = torch.rand(())
            torch.manual_seed(0)
            want = []
            for s in range(5):
                want.append(f(s, scale=2))
            assert got == want, (got, want)
            assert torch.equal(after, torch.rand(())), "the RNG moved on as with one call each"
            calls_made()
            try:
                [f(s) for s in (1, 13, 2)]
                raise AssertionError("no error")
            except ValueError as exc:
                assert str(exc) == "thirteen"
            assert calls_made() == [1, 13]
            assert [f(s) for s in iter([1, 2])] and [f(t) for t in [torch.ones(1)]] and [f(s) for s in [1, 2] if s]
        """)
        assert (ename, evalue) == ("", ""), (ename, evalue)
        assert ops.count("map") == 2, ops  # the generator, the tensor and the filtered one as written
        assert ops.count("call") == 5 + 2 + 2 + 1 + 2, ops  # the loop, calls_made, the three as written
    finally:
        link._request = request
