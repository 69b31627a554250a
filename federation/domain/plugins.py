"""Volcano job plugins and their options, read once into typed values.

A Volcano Job names plugins with Go-style flag arguments (``mpi: ["--master=mpimaster",
"--port=22"]``). Volcano parses them with ``flag.FlagSet`` and, on an unknown flag, logs
and ignores the rest (volcano-sh/volcano ``pkg/controllers/job/plugins/*``); we refuse an
option we do not implement instead, naming it ("not supported"), because an option
silently dropped is a job that fails at run time. The options and their defaults are
Volcano's:

- ``env``: none.
- ``svc`` (plugins/svc): ``--publish-not-ready-addresses`` (default false),
  ``--disable-network-policy`` (default false: the job gets a NetworkPolicy ``<job>``
  that admits ingress to its pods only from its own pods), ``--inject-hosts-env``
  (default true: the ``VC_<TASK>_HOSTS``/``VC_<TASK>_NUM`` environment).
- ``ssh`` (plugins/ssh): ``--ssh-key-file-path`` (default ``/root/.ssh``) and
  ``--no-root`` (keys under ``/etc/volcano/.ssh``, mode 0755, unless a path is given).
- ``mpi`` (plugins/distributed-framework/mpi): ``--master`` (master), ``--worker``
  (worker), ``--port`` (22).
- ``pytorch`` (plugins/distributed-framework/pytorch): ``--master``, ``--worker``,
  ``--port`` (23456). ``--wait-master-enabled``/``--wait-master-timeout`` (an init
  container that waits for the master) are refused.
- ``tensorflow`` (plugins/distributed-framework/tensorflow): ``--ps``, ``--worker``,
  ``--chief``, ``--evaluator`` (each defaulting to its own name), ``--port`` (2222).
- ``deepspeed`` (ours): none.

Implied plugins follow Volcano's job admission webhook (``patchDefaultPlugins`` in
``pkg/webhooks/admission/jobs/mutate``): ``mpi``, ``tensorflow`` and ``pytorch`` turn on
``svc``; ``mpi`` also turns on ``ssh``. A plugin the user names keeps the user's options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from federation.domain.errors import InvalidInput

SSH_DEFAULT_PATH = "/root/.ssh"
HOSTS_MOUNT_PATH = "/etc/volcano"  # svc's host files and deepspeed's hostfile, in every container
SSH_NO_ROOT_PATH = "/etc/volcano/.ssh"
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")

# plugin -> {flag: default}; a bool flag's default is a bool, a port's an int.
_FLAGS: Mapping[str, Mapping[str, str | int | bool]] = {
    "env": {},
    "svc": {"publish-not-ready-addresses": False, "disable-network-policy": False, "inject-hosts-env": True},
    "ssh": {"ssh-key-file-path": "", "no-root": False},
    "mpi": {"master": "master", "worker": "worker", "port": 22},
    "pytorch": {"master": "master", "worker": "worker", "port": 23456},
    "tensorflow": {"ps": "ps", "worker": "worker", "chief": "chief", "evaluator": "evaluator", "port": 2222},
    "deepspeed": {},
}
PLUGINS = tuple(_FLAGS)
_REFUSED = {  # flags refused whatever their value
    ("pytorch", "wait-master-enabled"): "the wait-for-master init container is not implemented",
    ("pytorch", "wait-master-timeout"): "the wait-for-master init container is not implemented",
}
_IMPLIES = {"mpi": ("svc", "ssh"), "tensorflow": ("svc",), "pytorch": ("svc",)}


@dataclass(frozen=True)
class PluginOptions:
    """One plugin's options, every flag resolved to its value (defaults filled in)."""

    name: str
    values: Mapping[str, str | int | bool]

    def text(self, flag: str) -> str:
        return str(self.values[flag])

    def number(self, flag: str) -> int:
        value = self.values[flag]
        assert isinstance(value, int)
        return value

    def switch(self, flag: str) -> bool:
        return bool(self.values[flag])

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.values.items()))))


def _split(arg: str) -> tuple[str, str | None]:
    body = arg[2:] if arg.startswith("--") else arg[1:] if arg.startswith("-") else ""
    name, sep, value = body.partition("=")
    return name, (value if sep else None)


def _value(plugin: str, flag: str, default: str | int | bool, raw: str | None, path: str) -> str | int | bool:
    if isinstance(default, bool):
        if raw is None or raw in _TRUE:
            return True
        if raw in _FALSE:
            return False
        raise InvalidInput(path, f"--{flag} must be true or false, got {raw!r}")
    if raw is None:
        raise InvalidInput(path, f"--{flag} needs a value (write --{flag}=VALUE)")
    if isinstance(default, int):
        try:
            port = int(raw)
        except ValueError:
            raise InvalidInput(path, f"--{flag} must be an integer, got {raw!r}") from None
        if not 1 <= port <= 65535:
            raise InvalidInput(path, f"--{flag} must be a port between 1 and 65535")
        return port
    if plugin == "ssh":
        if not raw.startswith("/") or "\n" in raw:
            raise InvalidInput(path, f"--{flag} must be an absolute path")
    elif not raw:
        raise InvalidInput(path, f"--{flag} must not be empty")
    return raw


def parse_plugin(plugin: str, args: Sequence[str], path: str) -> PluginOptions:
    """Volcano-style ``--flag=value`` arguments into options; ``path`` is
    ``spec.plugins.<plugin>``. Raises ``InvalidInput`` naming the argument."""
    if plugin not in _FLAGS:
        raise InvalidInput(path, f"plugin {plugin!r} not supported (supported: {', '.join(PLUGINS)})")
    flags = _FLAGS[plugin]
    values: dict[str, str | int | bool] = dict(flags)
    for i, arg in enumerate(args):
        where = f"{path}[{i}]"
        name, raw = _split(arg)
        refused = _REFUSED.get((plugin, name))
        if refused:
            raise InvalidInput(where, f"--{name} not supported: {refused}")
        if not name or name not in flags:
            known = ", ".join(f"--{f}" for f in flags) or "none"
            raise InvalidInput(where, f"{arg!r} not supported by the {plugin} plugin (options: {known})")
        values[name] = _value(plugin, name, flags[name], raw, where)
    if plugin == "ssh" and not values["ssh-key-file-path"]:
        values["ssh-key-file-path"] = SSH_NO_ROOT_PATH if values["no-root"] else SSH_DEFAULT_PATH
    return PluginOptions(plugin, values)


def resolve_plugins(plugins: Sequence[tuple[str, Sequence[str]]],
                    path: str = "spec.plugins") -> dict[str, PluginOptions]:
    """Every plugin the job runs with, implied ones included (Volcano's webhook)."""
    resolved = {name: parse_plugin(name, args, f"{path}.{name}") for name, args in plugins}
    for name in list(resolved):
        for implied in _IMPLIES.get(name, ()):
            if implied not in resolved:
                resolved[implied] = parse_plugin(implied, (), f"{path}.{implied}")
    return resolved


def plugin_mounts(options: Mapping[str, PluginOptions]) -> dict[str, str]:
    """mountPath -> plugin for the files the plugins mount in every container: the hosts
    ConfigMap (svc, deepspeed) and the ssh Secret (agents/core/render.py)."""
    hosts = [name for name in ("svc", "deepspeed") if name in options]
    mounts = {HOSTS_MOUNT_PATH: hosts[0]} if hosts else {}
    if "ssh" in options:
        mounts[options["ssh"].text("ssh-key-file-path")] = "ssh"
    return mounts
