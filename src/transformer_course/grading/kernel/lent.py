"""What the grader lends the student's code, as the kernel holds it: stand-ins that ask the grader.

A function the grader lends for the length of a test (an earlier exercise's reference, so that a
mistake there is not charged twice) is a stub here (:meth:`Lending.stub`) that asks the grader for
its result over the kernel's stdin channel, forward and backward; a lent module class builds
modules whose parameters live here and whose forward pass is the grader's
(:meth:`Lending.stub_class`); one of the grader's objects handed to the student's code (a model,
an optimizer) is a :class:`Borrowed` whose attributes, calls and items are asked for each time.
Each question is a call back (:meth:`Lending.ask`), answered by the judge's handlers
(:mod:`.handlers`). Run in the kernel as text after :mod:`.wire`'s, never imported there.
"""

from __future__ import annotations

import builtins
from typing import Any

import torch

if __name__ != "course_judge":  # imported by the grader; in the kernel, the texts before this one ran in this namespace
    from transformer_course.grading.kernel.wire import ANSWER, PROMPT, decode, encode


class Lending:
    """:class:`~.recorder.Recorder`'s call backs to the grader (it holds ``raw_input``, ``borrowed``,
    ``kept``, ``out``, ``into`` and ``answer``)."""

    def stub(self, name: str) -> Any:
        """A function that asks the grader for ``name(*args, **kwargs)``, with gradients."""
        recorder = self

        class Lent(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, spec: Any, _anchor: Any, *tensors: torch.Tensor) -> Any:
                args, kwargs = _fill(spec, tensors)
                reply = recorder.ask({"callback": name, "args": recorder.out(args),
                                      "kwargs": recorder.out(kwargs)})
                ctx.call = reply["call"]
                ctx.count = len(tensors)
                outputs = tuple(recorder.into(v) for v in reply["outputs"])
                still = [o for o, d in zip(outputs, reply.get("differentiable") or [True] * len(outputs), strict=False)
                         if isinstance(o, torch.Tensor) and not d]
                if still:
                    ctx.mark_non_differentiable(*still)
                return outputs if reply["tuple"] else outputs[0]

            @staticmethod
            def backward(ctx: Any, *grads: torch.Tensor) -> Any:
                reply = recorder.ask({"vjp": ctx.call, "grads": [None if g is None else g.detach() for g in grads]})
                return (None, None, *[recorder.into(g) for g in reply["grads"]])

        def lent(*args: Any, **kwargs: Any) -> Any:
            spec, tensors = _split((args, kwargs))
            # A grader's object (a model) may hold parameters of its own: its outputs need gradients
            # even when no input has one, so the call gets an input that always does.
            anchor = torch.zeros((), requires_grad=True) if name.startswith("#") and torch.is_grad_enabled() else None
            return Lent.apply(spec, anchor, *tensors)

        lent.__name__ = lent.__qualname__ = name
        return lent

    def stub_class(self, name: str) -> Any:
        """A stand-in for the module class ``name``: an instance has the reference module's parameters
        and buffers, here (so they train, move and load as the student's own), and its forward pass
        is the grader's, on them, with gradients for both."""
        recorder = self

        class Forward(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, info: tuple, *tensors: torch.Tensor) -> Any:
                module, spec, count, names, buffers, training = info
                args, kwargs = _fill(spec, tensors[:count])
                reply = recorder.ask({"module_forward": module, "args": recorder.out(args),
                                      "kwargs": recorder.out(kwargs), "training": training,
                                      "params": [[n, t.detach()] for n, t in zip(names, tensors[count:], strict=True)],
                                      "buffers": buffers, "rng": torch.random.get_rng_state()})
                torch.random.set_rng_state(reply["rng"])
                ctx.call = reply["call"]
                outputs = tuple(recorder.into(v) for v in reply["outputs"])
                return outputs if reply["tuple"] else outputs[0]

            @staticmethod
            def backward(ctx: Any, *grads: torch.Tensor) -> Any:
                reply = recorder.ask({"vjp": ctx.call, "grads": [None if g is None else g.detach() for g in grads]})
                return (None, *[recorder.into(g) for g in reply["grads"]])

        class LentModule(torch.nn.Module):
            def forward(self, *args: Any, **kwargs: Any) -> Any:
                spec, tensors = _split((args, kwargs))
                named = list(self.named_parameters())
                buffers = {n: b.detach() for n, b in self.named_buffers()}
                info = (self._course_module, spec, len(tensors), [n for n, _ in named], buffers, self.training)
                return Forward.apply(info, *tensors, *[p for _, p in named])

        def construct(*args: Any, **kwargs: Any) -> Any:
            reply = recorder.ask({"construct": name, "args": recorder.out(args), "kwargs": recorder.out(kwargs),
                                  "rng": torch.random.get_rng_state()})
            torch.random.set_rng_state(reply["rng"])
            module = LentModule()
            module._course_module = reply["module"]
            for dotted, value in reply["params"]:
                _place(module, dotted, torch.nn.Parameter(value.clone()))
            for dotted, value in reply["buffers"]:
                _place(module, dotted, value.clone(), buffer=True)
            return module

        construct.__name__ = construct.__qualname__ = name
        return construct

    def borrowed_proxy(self, number: int) -> Any:
        if number not in self.borrowed:
            proxy = object.__new__(Borrowed)
            object.__setattr__(proxy, "_course_b", number)
            object.__setattr__(proxy, "_course_r", self)
            object.__setattr__(proxy, "_course_methods", {})
            self.borrowed[number] = proxy
        return self.borrowed[number]

    def ask(self, question: dict) -> dict:
        """The grader's reply to ``question``. While it works on it, the grader may send requests
        of its own (reading or writing back the student's objects): they are answered first."""
        reply = decode(self.raw_input(PROMPT + encode(question)))
        while isinstance(reply, dict) and "__request__" in reply:
            reply = decode(self.raw_input(ANSWER + self.answer(reply["__request__"])))
        for number, name in reply.get("forget") or []:  # attributes the grader's code changed meanwhile
            self.kept.pop((number, name), None)
        if "error" in reply:  # raised in the student's code with its built-in class where it has one
            name, _, message = str(reply["error"]).partition(": ")
            cls = getattr(builtins, name, None)
            if isinstance(cls, type) and issubclass(cls, Exception) and cls not in (SystemExit, KeyboardInterrupt):
                raise cls(message)
            raise RuntimeError(reply["error"])
        return reply


class Borrowed:
    """One of the grader's objects passed to the student's code (a model, an optimizer, a loss
    function of a test): its attributes, calls and iteration are the grader's, asked for each
    time; a call's tensors keep their gradients across (see ``Recorder.stub``)."""

    def _course_ask(self, **question: Any) -> Any:
        recorder = object.__getattribute__(self, "_course_r")
        number = object.__getattribute__(self, "_course_b")
        return recorder.into(recorder.ask({"borrowed": number, **question})["value"])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        methods = object.__getattribute__(self, "_course_methods")
        if name in methods:
            return methods[name]
        recorder = object.__getattribute__(self, "_course_r")
        number = object.__getattribute__(self, "_course_b")
        if (number, name) in recorder.kept:
            return recorder.kept[(number, name)]
        reply = recorder.ask({"borrowed": number, "getattr": name})
        value = recorder.into(reply["value"])
        if reply.get("stable") is True:  # a method of the object's class: the same on every read
            methods[name] = value
        elif reply.get("keep") is True:  # kept until the grader says it changed, or sends a request
            recorder.kept[(number, name)] = value
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        recorder = object.__getattribute__(self, "_course_r")
        recorder.kept.pop((object.__getattribute__(self, "_course_b"), name), None)
        Borrowed._course_ask(self, setattr=name, value=recorder.out(value))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        recorder = object.__getattribute__(self, "_course_r")
        return recorder.stub(f"#{object.__getattribute__(self, '_course_b')}")(*args, **kwargs)

    def __iter__(self) -> Any:
        return iter(Borrowed._course_ask(self, list=True))

    def __next__(self) -> Any:
        found = Borrowed._course_ask(self, next=True)
        if not found:
            raise StopIteration
        return found[0]

    def __len__(self) -> int:
        return Borrowed._course_ask(self, len=True)

    def __bool__(self) -> bool:  # `if scheduler:` asks the object, as Python would (not its len())
        return Borrowed._course_ask(self, bool=True)

    def __getitem__(self, key: Any) -> Any:
        recorder = object.__getattribute__(self, "_course_r")
        return Borrowed._course_ask(self, getitem=recorder.out(key))

    def __repr__(self) -> str:
        return f"<the grader's {Borrowed._course_ask(self, type=True)}>"



def _place(module: torch.nn.Module, dotted: str, value: torch.Tensor, buffer: bool = False) -> None:
    """Put ``value`` at ``dotted`` (``"w_1.weight"``) in ``module``, making the submodules on the way."""
    *path, last = dotted.split(".")
    for part in path:
        if not isinstance(getattr(module, part, None), torch.nn.Module):
            module.add_module(part, torch.nn.Module())
        module = getattr(module, part)
    if buffer:
        module.register_buffer(last, value)
    else:
        module.register_parameter(last, value)



def _split(value: Any) -> tuple[Any, list[torch.Tensor]]:
    """``value`` with its tensors replaced by their positions in the returned list."""
    tensors: list[torch.Tensor] = []

    def walk(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            tensors.append(v)
            return ("__tensor_at__", len(tensors) - 1)
        if isinstance(v, tuple | list):
            return type(v)(walk(x) for x in v)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    return walk(value), tensors


def _fill(spec: Any, tensors: tuple[torch.Tensor, ...]) -> Any:
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "__tensor_at__":
        return tensors[spec[1]]
    if isinstance(spec, tuple | list):
        return type(spec)(_fill(x, tensors) for x in spec)
    if isinstance(spec, dict):
        return {k: _fill(x, tensors) for k, x in spec.items()}
    return spec
