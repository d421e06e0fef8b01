"""What every feedback page of a class renders the same way, rendered once per grading process.

nbgrader makes a new HTML exporter for each notebook, and with it a new Jinja environment that parses
and compiles the same templates again; and the cells a release gives (text, demos, tests) are the same
in every student's page, yet highlighted and rendered again for each. On the sample class these took
most of a page's CPU time (docs/benchmarks.md).

- :data:`TEMPLATES`: Jinja's bytecode cache, in memory. Jinja keys a template by its name and file and
  checks its source's checksum, so a changed template is compiled again.
- :class:`Memo`: a function's results for the keys it saw last, within a budget of characters (a
  student's cell can be large, and a class has many): a value is the same whenever its key is.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from jinja2 import BytecodeCache
from jinja2.bccache import Bucket

BUDGET = 8_000_000  # characters of keys and values a memo keeps (tens of MB at most)


class _InMemory(BytecodeCache):
    """Jinja's compiled templates, kept for the life of the process."""

    def __init__(self) -> None:
        self.store: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        if bucket.key in self.store:
            bucket.bytecode_from_string(self.store[bucket.key])  # Jinja drops it if the checksum differs

    def dump_bytecode(self, bucket: Bucket) -> None:
        self.store[bucket.key] = bucket.bytecode_to_string()

    def clear(self) -> None:
        self.store.clear()


TEMPLATES = _InMemory()


class Memo:
    """``make()``'s value for a key, made once while it stays among the last ones used: least recently
    used first out, past ``budget`` characters (a key's text and its value's); a single value over a
    hundredth of the budget is made each time, never kept."""

    def __init__(self, budget: int = BUDGET):
        self.budget, self.size = budget, 0
        self.items: OrderedDict[Hashable, tuple[str, int]] = OrderedDict()
        self.lock = threading.Lock()  # a server may render pages in threads: a key read while another goes out

    def get(self, key: Hashable, text: str, make: Callable[[], str]) -> str:
        """The value for ``key`` (whose text, for the budget, is ``text``), made by ``make`` if not kept."""
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key][0]
        value = make()  # outside the lock: another thread may make the same value meanwhile, the same value
        size = len(text) + len(value)
        if size <= self.budget // 100:
            with self.lock:
                if key not in self.items:
                    self.items[key] = (value, size)
                    self.size += size
                while self.size > self.budget:
                    _, (_, dropped) = self.items.popitem(last=False)
                    self.size -= dropped
        return value
