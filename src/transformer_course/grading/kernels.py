"""The grading kernel's manager: jupyter_client's, with each kernel started in the sandbox
(:mod:`.sandbox`) or forked from the worker's warm template in it (:mod:`.forkserver`). Apart
from both, so that neither imports the other."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid

from jupyter_client.manager import AsyncKernelManager
from traitlets import List, Unicode

from transformer_course.grading import forkserver, sandbox


class SandboxedKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager, starting the kernel through :func:`command`, or forked
    from the worker's warm template in the same sandbox (:mod:`.forkserver`)."""

    hidden = List(Unicode(), help="folders the kernel must not see").tag(config=True)
    readonly = List(Unicode(), help="folders it may read (inside hidden ones)").tag(config=True)
    writable = List(Unicode(), help="folders it may write").tag(config=True)
    _sockets = ""  # the folder of this kernel's IPC sockets, when it has no network
    _forked = False

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
        return await super()._async_pre_start_kernel(**kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if self._sockets and not restart:
            shutil.rmtree(self._sockets, ignore_errors=True)

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
