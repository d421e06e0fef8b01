"""The line channel between the grading worker and a notebook's boxed judge (:mod:`.judge_box`).

One JSON message a line over a Unix socket. The judge runs the reference and the checks for the
student's kernel, so a flaw in the allow-list (:mod:`.lending`) would let the student's code speak
for it: the worker reads no message over :data:`MAX_MESSAGE` bytes, and accepts a verdict only as
three strings, an exception's name that is one, and a message cut to :data:`MAX_EVALUE` characters
(:func:`checked`). What a verdict then decides is one test cell's points, nothing else.
"""

from __future__ import annotations

import json
import select
import socket
import time

MAX_MESSAGE = 4_000_000  # bytes of one message from a judge (a verdict with 100,000 printed characters fits)
MAX_EVALUE = 20_000  # characters of a verdict's message kept
Verdict = tuple[str, str, str]  # (exception name or '', its message, what the test printed): judge.run_test's


class Lines:
    """JSON messages, one a line, over a stream socket; reads wait until an absolute deadline."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer = sock, b""

    def send(self, message: dict) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def recv(self, deadline: float | None = None) -> dict:
        """The next message. Raises TimeoutError past ``deadline``, EOFError when the other side is
        gone, ValueError for anything but one JSON object of at most :data:`MAX_MESSAGE` bytes."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_MESSAGE:
                raise ValueError("a message over the size limit")
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and (wait <= 0 or not select.select([self.sock], [], [], wait)[0]):
                raise TimeoutError
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError("not a message")
        return message


def checked(message: dict) -> Verdict:
    """A judge's verdict as the worker accepts it (ValueError otherwise): an exception's name (or ''),
    its message and the printed text, all strings."""
    verdict = message.get("verdict")
    if not (isinstance(verdict, list) and len(verdict) == 3 and all(isinstance(v, str) for v in verdict)):
        raise ValueError("not a verdict")
    ename, evalue, printed = verdict
    if ename and not (ename.isidentifier() and len(ename) <= 100):
        raise ValueError("not an exception's name")
    return ename, evalue[:MAX_EVALUE], printed
