"""The environment variables this server adds to the kernels it starts, and to nothing else.

Discovery (:mod:`clustermgr_lab.foreign.discovery`) and the kernels' dashboard link
(:mod:`.kernel_dashboard_link`) each give kernels a few variables. They are not written into the
server's own ``os.environ``: terminals, server-proxy apps and every other child of the server keep
the environment they had. Instead :class:`KernelEnvironment` wraps the ``start_kernel`` of this
server's kernel manager (the one entry point that the kernels REST API, the sessions API and
extensions use): it adds the variables to the ``env`` of that launch (jupyter_client's
``KernelManager.start_kernel(env=...)``, which a restart reuses) and calls the original.

Each provider is a callable that receives the environment the kernel would get without this server
(the session's ``env``, else the server's) and returns the variables to add; a provider decides
itself whether to leave a variable the site set alone.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping

#: One source of kernel variables: the kernel's environment without them -> the variables to add.
Provider = Callable[[Mapping[str, str]], Mapping[str, str]]


class KernelEnvironment:
    """Adds the providers' variables to every kernel the wrapped kernel manager starts from now on.

    Parameters
    ----------
    kernel_manager
        The server's ``MappingKernelManager`` (``serverapp.kernel_manager``).
    """

    def __init__(self, kernel_manager):
        self.kernel_manager = kernel_manager
        self.providers: list[Provider] = []
        self._original = None

    def add(self, provider: Provider) -> None:
        self.providers.append(provider)

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with every provider's variables added (the launch ``env`` of one kernel)."""
        env = dict(base)
        for provider in self.providers:
            env.update(provider(env))
        return env

    def start(self) -> None:
        """Wrap the kernel manager's ``start_kernel`` (once)."""
        if self._original is not None:
            return
        original = self.kernel_manager.start_kernel

        @functools.wraps(original)
        async def start_kernel(*args, **kwargs):
            base = kwargs.get("env")
            kwargs["env"] = self.environment(os.environ if base is None else base)
            return await original(*args, **kwargs)

        self._original = original
        self.kernel_manager.start_kernel = start_kernel

    def stop(self) -> None:
        """Give the kernel manager its own ``start_kernel`` back."""
        if self._original is not None:
            if self.kernel_manager.__dict__.get("start_kernel") is not None:
                del self.kernel_manager.start_kernel
            self._original = None
