"""The grading kernel's manager: jupyter_client's, with each kernel started in the sandbox
(:mod:`.sandbox`) or forked from the worker's warm template in it (:mod:`.forkserver`). Apart
from both, so that neither imports the other."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from traitlets import List, Unicode, default
from zmq.utils.monitor import recv_monitor_message

from transformer_course.grading.kernel import forkserver, memcg, sandbox

# Bytes of one message a kernel may send the grading worker. ZeroMQ checks a message's announced size
# before receiving it and drops the connection to a kernel that sends more: nothing of it is read
# (a test cell's record, 16 MB at most, and a figure fit). The kernel is then stopped (nbgrader_setup).
MAX_KERNEL_MESSAGE = 32 * 2**20


class BoundedKernelClient(AsyncKernelClient):
    """jupyter_client's client whose sockets refuse a message over :data:`MAX_KERNEL_MESSAGE`
    (ZeroMQ's ``MAXMSGSIZE``), and say so through :meth:`oversized`."""

    _monitors: list | None = None
    _dropped = False

    def _create_connected_socket(self, channel: str, identity: bytes | None = None) -> zmq.Socket:
        self.context.setsockopt(zmq.MAXMSGSIZE, MAX_KERNEL_MESSAGE)  # a default for the socket created next
        try:
            sock = super()._create_connected_socket(channel, identity)
        finally:
            self.context.sockopts.pop(zmq.MAXMSGSIZE, None)
        if channel in ("iopub", "shell"):  # the channels a cell's output and reply come on
            monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
            self._monitors = [*(self._monitors or []), zmq.Socket.shadow(monitor.underlying)]
        return sock

    def oversized(self) -> bool:
        """Whether a connection to the kernel was ever dropped: the kernel sent a message over the cap (or
        died, which the caller tells apart by asking whether it is alive). Its output after the dropped
        message may be lost with it (the kernel's "idle"): the cell cannot be read to its end."""
        for monitor in self._monitors or []:
            while monitor.poll(0):
                self._dropped |= recv_monitor_message(monitor)["event"] == zmq.EVENT_DISCONNECTED
        return self._dropped


class SandboxedKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager, starting the kernel through :func:`command`, or forked
    from the worker's warm template in the same sandbox (:mod:`.forkserver`)."""

    hidden = List(Unicode(), help="folders the kernel must not see").tag(config=True)
    readonly = List(Unicode(), help="folders it may read (inside hidden ones)").tag(config=True)
    writable = List(Unicode(), help="folders it may write").tag(config=True)
    _sockets = ""  # the folder of this kernel's IPC sockets, when it has no network
    _group: memcg.Group | None = None  # the cgroups of its own sandbox, when not forked
    _forked = False

    @default("client_factory")
    def _bounded_client(self) -> type:
        return BoundedKernelClient

    async def _async_pre_start_kernel(self, **kw):
        if forkserver.enabled() and self.provisioner is None:
            self.kernel_id = self.kernel_id or kw.pop("kernel_id", str(uuid.uuid4()))
            self.provisioner = forkserver.ForkProvisioner(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec,
                                                          parent=self)
            self._forked = True
        if not self.connection_file:
            self.connection_file = os.path.join(sandbox.connections_dir(), f"kernel-{uuid.uuid4()}.json")
        # Without a network the kernel cannot serve TCP to this process: its sockets become
        # files in a folder of its own, the only one both sides see.
        if sandbox.isolates_network():
            # Under the worker's sockets' folder also when not forked: the judges' sandbox binds that folder.
            self._sockets = tempfile.mkdtemp(prefix="tc-kernel-", dir=forkserver.sockets_root()
                                             if forkserver.enabled() else None)
            self.transport, self.ip = "ipc", os.path.join(self._sockets, "kernel")
        cmd, launch = await super()._async_pre_start_kernel(**kw)
        if not self._forked and sandbox.bwrap() is not None:
            # A sandbox of its own (not forked from the worker's template, whose sandbox has its groups already):
            # its processes are limited as a template's are (memcg.PROCESSES), by a pids cgroup or RLIMIT_NPROC.
            memcg.remove(self._group)
            self._group = memcg.create(0)
            if (preexec := memcg.preexec(self._group)) is not None:
                launch["preexec_fn"] = preexec
        return cmd, launch

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if self._sockets and not restart:
            shutil.rmtree(self._sockets, ignore_errors=True)
        if not restart:
            memcg.remove(self._group)
            self._group = None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        # A SIGINT to the kernel's process group would end bwrap (and the kernel with it), so
        # interrupts go as messages: ipykernel then signals itself, inside the sandbox.
        self.kernel_spec.interrupt_mode = "message"
        cmd = super().format_kernel_cmd(extra_arguments)
        return cmd if self._forked else self.sandboxed_cmd(cmd)

    def kernel_hidden(self) -> list[str]:
        """The folders hidden from the kernel: ``hidden`` and the folder of connection files (other
        kernels' keys, the grader's own too)."""
        return [*self.hidden, os.path.dirname(os.path.realpath(self.connection_file))]

    def sandboxed_cmd(self, cmd: list[str]) -> list[str]:
        """``cmd`` in a sandbox of its own."""
        connection = os.path.realpath(self.connection_file)  # this kernel's only: not the others' keys
        return sandbox.command(cmd, self.kernel_hidden(), [*self.readonly, connection],
                       [*self.writable, *([self._sockets] if self._sockets else [])],
                       network=not self._sockets)
