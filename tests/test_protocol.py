"""The judge's half of the protocol, in-process (no kernel: a second or two): the tables of call backs
(judging/handlers.py) name every kind of message the recorder (kernel/recorder.py, lent.py) sends and nothing
else, a message of no known kind is refused as it always was, and each family of handlers answers as
the kernel expects. tests/test_judge.py runs the same messages through a real kernel."""

from __future__ import annotations

import ast
from typing import Any

import pytest
import torch

from transformer_course.grading.judging import handlers
from transformer_course.grading.judging.link import SOURCES, Link
from transformer_course.grading.kernel.wire import PROMPT, decode, encode


class _Client:
    """A kernel client that is never used: the call backs are answered without one."""

    def start_channels(self) -> None:
        pass


def _link() -> Link:
    return Link(_Client())


def _sent_by_the_recorder() -> tuple[set[str], set[str]]:
    """The call backs the recorder's source asks the grader: the kinds (a dict's first key in
    ``ask({...})``) and what it asks of a borrowed object (the key after "borrowed", or the
    first keyword of ``_course_ask``)."""
    kinds, borrowed = set(), set()
    for node in (n for path in SOURCES for n in ast.walk(ast.parse(path.read_text()))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr == "ask" and node.args and isinstance(node.args[0], ast.Dict):
            keys = [k.value for k in node.args[0].keys if isinstance(k, ast.Constant)]
            kinds.add(keys[0])
            if keys[0] == "borrowed" and len(keys) > 1:
                borrowed.add(keys[1])
        elif node.func.attr == "_course_ask" and node.keywords:
            borrowed.add(node.keywords[0].arg)
    return kinds, borrowed


def test_the_tables_name_every_call_back_the_recorder_sends_and_no_other():
    kinds, borrowed = _sent_by_the_recorder()
    assert kinds == set(handlers.CALL_BACKS) == {"borrowed", "callback", "construct", "module_forward", "vjp"}
    assert borrowed == set(handlers.BORROWED)
    assert all(callable(h) for h in [*handlers.CALL_BACKS.values(), *handlers.BORROWED.values()])


def _answer(link: Link, ask: Any) -> dict:
    """The judge's reply to one call back, as the kernel reads it."""
    return decode(link._answer_callback(PROMPT + encode(ask)))


def test_a_call_back_of_no_known_kind_is_refused_as_before():
    link = _link()
    assert _answer(link, {"nonsense": 1}) == {"error": "KeyError: 'vjp'"}
    assert _answer(link, {"vjp": 99, "grads": []}) == {"error": "KeyError: 99"}
    assert decode(link._answer_callback("not a prompt")) == {"error": "ValueError: not a call back"}
    with pytest.raises(KeyError):
        handlers.handle(link, {})


def test_a_borrowed_object_answers_its_allow_list_only():
    link = _link()
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU())
    number = link.borrow(model)
    assert _answer(link, {"borrowed": number, "len": True}) == {"value": 2}
    assert _answer(link, {"borrowed": number, "type": True}) == {"value": "Sequential"}
    assert _answer(link, {"borrowed": number}) == {"value": "Sequential"}  # no kind: its type, as before
    assert _answer(link, {"borrowed": number, "bool": True}) == {"value": True}
    weight = _answer(link, {"borrowed": number, "getitem": 0})["value"]
    assert weight == {"__borrowed__": link.borrow(model[0])}
    got = _answer(link, {"borrowed": link.borrow(model[0]), "getattr": "weight"})
    assert torch.equal(got["value"]["__gtensor__"], model[0].weight.detach()) and got["keep"] is False
    items = _answer(link, {"borrowed": number, "list": True})["value"]["__seq__"]
    assert [link.borrowed[i["__borrowed__"]] for i in items] == list(model)
    refused = _answer(link, {"borrowed": number, "setattr": "training", "value": False})
    assert refused["error"] == ("Refused: your code set `.training` on the grader's Sequential: the grader's "
                                "objects are lent read-only")
    assert _answer(link, {"borrowed": number, "getattr": "_modules"})["error"].startswith(
        "AttributeError: your code asked the grader's")
    assert _answer(link, {"borrowed": number, "next": True})["error"].startswith("TypeError")  # not an iterator


def test_a_lent_function_runs_here_and_its_gradient_goes_back():
    link = _link()
    link.lent["double"] = lambda x: 2 * x
    x = torch.tensor([1.0, 2.0])
    forward = _answer(link, {"callback": "double", "args": [x], "kwargs": {}})
    assert forward["differentiable"] == [True] and torch.equal(forward["outputs"][0], 2 * x)
    back = _answer(link, {"vjp": forward["call"], "grads": [torch.ones(2)]})
    assert torch.equal(back["grads"][0], torch.full((2,), 2.0))
    assert _answer(link, {"callback": "other", "args": [], "kwargs": {}}) == {
        "error": "Refused: your code called the grader's other, which is not lent now"}


def test_a_lent_module_class_is_built_with_the_kernels_rng_and_runs_its_forward_here():
    link = _link()
    link.lent["Linear"] = torch.nn.Linear
    rng = torch.random.get_rng_state()
    built = _answer(link, {"construct": "Linear", "args": [2, 1], "kwargs": {}, "rng": rng})
    with torch.random.fork_rng(devices=[]):
        torch.random.set_rng_state(rng)
        expected = torch.nn.Linear(2, 1)
    params = dict(built["params"])
    assert torch.equal(params["weight"], expected.weight.detach()) and built["module"] == 0
    x = torch.ones(1, 2)
    run = _answer(link, {"module_forward": 0, "training": True, "args": [x], "kwargs": {}, "rng": rng,
                         "params": built["params"], "buffers": {}})
    assert torch.allclose(run["outputs"][0], expected(x).detach())
    assert _answer(link, {"construct": "Linear", "args": [2, 1], "kwargs": {}, "rng": torch.zeros(3)}) == {
        "error": "Refused: your code sent the grader an RNG state that is not one"}


def _sent_by_the_judge() -> set[str]:
    """The operations the judge's modules ask the recorder for (``{"op": ...}`` in judging/; judge_box.py's
    are those of the worker and its judge)."""
    found = set()
    for path in SOURCES[0].parents[1].joinpath("judging").glob("*.py"):
        if path.name == "judge_box.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                found |= {v.value for k, v in zip(node.keys, node.values, strict=True)
                          if isinstance(k, ast.Constant) and k.value == "op" and isinstance(v, ast.Constant)}
    return found


def _recorder(namespace: dict) -> Any:
    """A recorder of the kernel's texts run as the kernel runs them (one namespace, no import of
    this package), with its state but no kernel to answer through."""
    kernel: dict[str, Any] = {"__name__": "course_judge"}
    for path in SOURCES:
        exec(compile(path.read_text(), "<course judge>", "exec"), kernel)  # noqa: S102 (the recorder's own text)
    recorder = object.__new__(kernel["Recorder"])
    recorder.__dict__.update(watched=(), ns=namespace, handles={}, ids={}, count=0, lent={}, leaves=[], calls={},
                             missing=object(), borrowed={}, moved={}, kept={}, depth=0)
    return recorder


def test_the_recorder_has_a_handler_for_every_operation_the_judge_asks_for_and_refuses_others():
    recorder = _recorder({"add_one": lambda x: x + 1, "n": 3})
    # "names" is answered as it always was, though the judge no longer asks for it.
    assert _sent_by_the_judge() | {"names"} == set(recorder.run.__globals__["REQUESTS"])
    assert recorder.run({"op": "name", "name": "n"}) == 3
    with pytest.raises(NameError, match="name 'm' is not defined"):
        recorder.run({"op": "name", "name": "m"})
    handle = recorder.keep(recorder.ns["add_one"])
    called = recorder.run({"op": "call", "h": handle, "args": {"__seq__": [{"__leaf__": torch.ones(2)}]},
                           "kwargs": {}})
    assert torch.equal(called["result"], torch.full((2,), 2.0)) and called["differentiable"]
    grads = recorder.run({"op": "vjp", "call": called["call"], "grads": [torch.full((2,), 3.0)]})
    assert torch.equal(grads[0], torch.full((2,), 3.0))
    assert decode(recorder.answer(encode({"op": "len", "h": recorder.keep([1, 2])}))) == {"ok": 2}
    refused = decode(recorder.answer(encode({"op": "nope"})))
    assert (refused["error"], refused["message"]) == ("ValueError", "unknown request 'nope'")
    assert decode(recorder.answer(encode({"op": "nope", "h": 99})))["error"] == "KeyError"  # the handle first
