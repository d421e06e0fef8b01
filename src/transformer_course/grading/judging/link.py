"""The judge's link to one kernel: requests to the recorder there, and its call backs answered.

A request (:meth:`Link.request`) goes to the recorder's serve loop in the kernel as the reply to its
last stdin prompt, and its answer comes back as the next prompt (:meth:`Link._await`); a call back
of the student's code to what the grader lent it comes the same way, and is answered by its
handler (:mod:`.handlers`) on the way. Values are converted by :class:`~.values.Values`.
"""

from __future__ import annotations

import contextlib
import io
import queue
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from transformer_course.grading.judging import decoding, handlers, lending, sizes
from transformer_course.grading.judging.handlers import END
from transformer_course.grading.judging.remote import LinkBroken, Remote
from transformer_course.grading.judging.values import Values
from transformer_course.grading.kernel import cputime, lent, operations, recorder, wire
from transformer_course.grading.kernel.wire import ANSWER, PROMPT, encode

# The recorder, run in the kernel as text (never imported there): these modules, in this order, in one namespace.
SOURCES = [Path(m.__file__) for m in (wire, lent, operations, recorder)]


class Link(Values):
    """Requests to the recorder in one kernel, through a blocking client of its own.

    Args:
        client: a started ``BlockingKernelClient`` of the student's kernel.
        timeout: seconds one request may run (the student's code inside it included).
        interrupt: called when a request runs past ``timeout`` (interrupts the kernel).
    """

    def __init__(self, client: Any, timeout: float = 60, interrupt: Callable[[], Any] | None = None,
                 alive: Callable[[], bool] | None = None, watched: tuple[str, ...] = ()):
        self.client, self.timeout, self.interrupt, self.alive = client, timeout, interrupt, alive
        self.deadline: float | None = None  # time.monotonic() by which the test cell must end (None: per request)
        # Whether the cell's budget of CPU seconds is spent (the notebook's processes': cputime), asked
        # every cputime.POLL s while the kernel runs; the deadline above is then the clock's outer bound.
        self.spent: Callable[[], bool] | None = None
        self.budget: float | None = None  # that budget, in CPU seconds (for the messages)
        self.over = False  # the budget was spent in this test cell
        self._polled = time.monotonic()
        self.watched = watched
        self._poller = None
        self._serving: str | None = None  # msg_id of the running serve loop
        self._depth = 0  # > 0 while answering a call back: requests then go as its reply
        self.borrowed: list[Any] = []  # the grader's objects passed to the kernel, by number
        self.approved: dict[int, Any] = {}  # callables read through the allow-list (lending.check_attribute)
        self._borrowed_ids: dict[int, int] = {}
        # Attributes of borrowed objects the kernel keeps until this process next runs code of its own
        # (a request, or a call back that changed them): (number, name) -> the value it was.
        self.kept: dict[tuple[int, str], Any] = {}
        self.carried: dict[str, Any] = {}  # names earlier test cells defined
        self.rng: torch.Tensor | None = None  # the kernel's RNG state, as far as this process knows
        self.client.start_channels()
        self._checked = time.monotonic()
        self.name = "_course_judge_" + secrets.token_hex(6)
        self.lent: dict[str, Callable[..., Any]] = {}
        self.calls: dict[int, tuple[list[torch.Tensor], Any]] = {}
        self.modules: list[torch.nn.Module] = []  # instances of lent module classes
        self.proxies: dict[int, Remote] = {}
        self.output: io.StringIO | None = None  # where what the student's code prints goes (the test's output)
        self.attached: list[list] = []  # [tensor, handle, version] of tensors read from the kernel

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.stop_channels()

    def install(self) -> None:
        texts = "".join(f"exec(compile({p.read_text()!r}, '<course judge>', 'exec'), _course_judge)\n" for p in SOURCES)
        code = (f"_course_judge = {{'__name__': 'course_judge'}}\n{texts}"
                f"{self.name} = _course_judge['Recorder'](globals(), {self.watched!r})\ndel _course_judge")
        self._execute(code)

    def request(self, ask: dict) -> Any:
        """The recorder's answer to ``ask``: ``{"ok": value}`` or ``{"error": ...}``."""
        self._write_back()
        return self._request(ask)

    def _request(self, ask: dict) -> Any:
        self.kept.clear()  # the kernel forgets them on every request (the test's code may have changed them)
        if self._depth:  # the kernel waits for a call back's reply: the request goes as that reply
            self.client.input(encode({"__request__": encode(ask)}))
            answer = self._await(self._serving, prompt=True)
        else:
            answer = self._serve(ask)
        if not isinstance(answer, dict) or not ({"ok", "error"} & set(answer)):
            raise LinkBroken("the kernel's answer is not one the grader asked for")
        if isinstance(answer.get("printed"), str) and self.output is not None and self.output.tell() < 100_000:
            self.output.write(answer["printed"])
        return answer

    def _serve(self, ask: dict) -> Any:
        if self._serving is None:  # the recorder's serve loop: a cell that runs until finish()
            self._serving = self._send(f"{self.name}.serve()")
            self._await(self._serving, prompt=True)
        self.client.input(encode(ask))
        return self._await(self._serving, prompt=True)

    def finish(self) -> None:
        """End the serve loop (the kernel is free for the notebook's next cell)."""
        serving, self._serving = self._serving, None
        if serving is not None:
            self.client.input("")
            self._await(serving, prompt=False)

    def _execute(self, code: str) -> None:
        self._await(self._send(code), prompt=False)

    def _send(self, code: str) -> str:
        with contextlib.suppress(queue.Empty):
            while True:  # execute replies: not needed (the status and stdin channels say it all)
                self.client.get_shell_msg(timeout=0)
        return self.client.execute(code, silent=True, store_history=False, allow_stdin=True, stop_on_error=False)

    def _await(self, msg_id: str, prompt: bool) -> Any:
        """Wait for the kernel running request ``msg_id``: until it asks for the next request (an
        :data:`ANSWER` prompt, whose answer is returned) if ``prompt``, else until it is idle. Call
        backs (:data:`PROMPT`) are answered on the way. Raises :class:`LinkBroken` when the kernel
        dies, errs outside the student's code, or runs past the timeout (it is interrupted then)."""
        kc = self.client
        deadline = time.monotonic() + self.timeout
        if self.deadline is not None:  # the cell's, which the grader's own work counts against too
            deadline = min(deadline, self.deadline)
        interrupted, started = False, time.monotonic()
        limit = f"{self.timeout:g} s" if self.budget is None else f"{self.timeout:g} s on the clock"
        while True:
            if self.spent is not None and not self.over and time.monotonic() - self._polled > cputime.POLL:
                self._polled = time.monotonic()  # across requests: a test may make many short ones
                self.over = self.spent()
            if self.over and not interrupted:  # interrupted as at the deadline, and every later request of the cell
                # (once it has had POLL s to reach the student's code: not inside the kernel's own messaging)
                deadline, limit = min(deadline, started + cputime.POLL), f"{self.budget:g} s of CPU time"
            if time.monotonic() > deadline:
                if interrupted:
                    self._serving = None
                    raise LinkBroken(f"did not finish within {limit}, and went on after an interrupt")
                interrupted = True
                deadline = time.monotonic() + 10
                if self.interrupt is not None:
                    self.interrupt()
            with contextlib.suppress(queue.Empty):
                msg = kc.stdin_channel.get_msg(timeout=0)
                if msg["header"]["msg_type"] == "input_request":
                    text = str(msg["content"].get("prompt", ""))
                    if not text.startswith(ANSWER):
                        kc.input(self._answer_callback(text))
                    elif interrupted:  # the student's code was stopped; end the loop
                        kc.input("")
                    elif prompt:
                        return self._read_answer(text[len(ANSWER):])
                    else:
                        kc.input("")
                continue
            try:
                self._wait()
                msg = kc.iopub_channel.get_msg(timeout=0)
            except queue.Empty:
                if time.monotonic() - self._checked > 0.5:
                    self._checked = time.monotonic()
                    if not (self.alive() if self.alive is not None else kc.is_alive()):
                        self._serving = None
                        raise LinkBroken("the kernel died") from None
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind == "status" and content.get("execution_state") == "idle":
                if msg_id == self._serving:
                    self._serving = None
                if interrupted:
                    raise LinkBroken(f"did not finish within {limit} and was interrupted (an endless loop?)")
                if prompt:
                    raise LinkBroken("the kernel sent no answer (was the grader's recorder changed?)")
                return None
            if kind == "error" and not prompt:
                self._serving = None
                raise LinkBroken(f"{content.get('ename')}: {content.get('evalue')}")

    def _wait(self) -> bool:
        """Sleep until the kernel sends something on stdin or iopub (at most 50 ms)."""
        if self._poller is None:
            import zmq

            self._poller = zmq.Poller()
            for channel in (self.client.stdin_channel, self.client.iopub_channel):
                self._poller.register(channel.socket, zmq.POLLIN)
        return bool(self._poller.poll(50))

    @staticmethod
    def _read_answer(text: str) -> Any:
        try:
            return decoding.decode(text)  # its sizes bounded before it is built
        except lending.Refused:  # the student's value, too large: refused in the test, the kernel goes on
            raise
        except Exception as exc:  # noqa: BLE001 (whatever the kernel sent, it is no answer)
            raise LinkBroken(f"the kernel's answer could not be read as plain data ({type(exc).__name__})") from None

    # Calls back from the kernel: a lent reference function, forward and backward.
    def _answer_callback(self, prompt: str) -> str:
        try:
            if not prompt.startswith(PROMPT):
                raise ValueError("not a call back")
            ask = decoding.decode(prompt[len(PROMPT):])
            sizes.check_tensors(ask)  # before any copy or computation of the grader's
            self._depth += 1
            try:
                reply = handlers.handle(self, ask)
            finally:
                self._depth -= 1
        except Exception as exc:  # noqa: BLE001 (the kernel's side raises it in the student's code)
            name = "AttributeError" if isinstance(exc, lending.NotLent) else type(exc).__name__
            reply = {"error": f"{name}: {exc}"}
        # The kept attributes this call back's code changed (a model that counts its calls): read again.
        changed = [key for key, value in self.kept.items()
                   if getattr(self.borrowed[key[0]], key[1], END) is not value]
        for key in changed:
            del self.kept[key]
        if changed:
            reply["forget"] = [list(key) for key in changed]
        return encode(reply)
