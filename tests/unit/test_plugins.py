"""Volcano job plugin options (federation/domain/plugins.py): each option honoured or
refused naming the argument, implied plugins as Volcano's admission webhook adds them."""

from __future__ import annotations

import pytest

from federation.domain.errors import InvalidInput
from federation.domain.plugins import parse_plugin, resolve_plugins

ACCEPTED = [
    pytest.param("mpi", (), {"master": "master", "worker": "worker", "port": 22}, id="mpi-defaults"),
    pytest.param("mpi", ("--master=mpimaster", "--worker=mpiworker", "--port=2222"),
                 {"master": "mpimaster", "worker": "mpiworker", "port": 2222}, id="mpi-options"),
    pytest.param("pytorch", ("-port=29500",), {"master": "master", "worker": "worker", "port": 29500},
                 id="go-flags-accept-one-dash"),
    pytest.param("tensorflow", ("--ps=server", "--chief=boss"),
                 {"ps": "server", "worker": "worker", "chief": "boss", "evaluator": "evaluator", "port": 2222},
                 id="tensorflow-role-names"),
    pytest.param("ssh", (), {"ssh-key-file-path": "/root/.ssh", "no-root": False}, id="ssh-root-default"),
    pytest.param("ssh", ("--no-root",), {"ssh-key-file-path": "/etc/volcano/.ssh", "no-root": True},
                 id="ssh-no-root-moves-the-keys-as-volcano-does"),
    pytest.param("ssh", ("--ssh-key-file-path=/home/user/.ssh",),
                 {"ssh-key-file-path": "/home/user/.ssh", "no-root": False}, id="ssh-key-path"),
    pytest.param("svc", ("--publish-not-ready-addresses=true", "--disable-network-policy=true",
                         "--inject-hosts-env=False"),
                 {"publish-not-ready-addresses": True, "disable-network-policy": True, "inject-hosts-env": False},
                 id="svc-go-bool-spellings"),
    pytest.param("svc", (), {"publish-not-ready-addresses": False, "disable-network-policy": False,
                             "inject-hosts-env": True}, id="svc-network-policy-by-default-as-volcano"),
]


@pytest.mark.parametrize(("plugin", "args", "values"), ACCEPTED)
def test_options_are_read_with_volcano_defaults(plugin: str, args: tuple[str, ...], values: dict[str, object]) -> None:
    assert dict(parse_plugin(plugin, args, f"spec.plugins.{plugin}").values) == values


REFUSED = [
    pytest.param("ray", (), "spec.plugins.ray", "plugin 'ray' not supported", id="unknown-plugin"),
    pytest.param("env", ("--foo=1",), "spec.plugins.env[0]", "not supported by the env plugin", id="env-takes-none"),
    pytest.param("pytorch", ("--master=m", "--wait-master-enabled=true"), "spec.plugins.pytorch[1]",
                 "--wait-master-enabled not supported", id="pytorch-wait-master-refused"),
    pytest.param("mpi", ("--port=0",), "spec.plugins.mpi[0]", "between 1 and 65535", id="port-range"),
    pytest.param("mpi", ("--port=ssh",), "spec.plugins.mpi[0]", "must be an integer", id="port-integer"),
    pytest.param("mpi", ("--master",), "spec.plugins.mpi[0]", "needs a value", id="string-flag-needs-value"),
    pytest.param("mpi", ("mpimaster",), "spec.plugins.mpi[0]", "not supported", id="positional-argument"),
    pytest.param("svc", ("--inject-hosts-env=yes",), "spec.plugins.svc[0]", "true or false", id="bool-spelling"),
    pytest.param("ssh", ("--ssh-key-file-path=.ssh",), "spec.plugins.ssh[0]", "absolute path", id="relative-path"),
]


@pytest.mark.parametrize(("plugin", "args", "path", "rule"), REFUSED)
def test_options_we_do_not_implement_are_refused_naming_the_argument(
        plugin: str, args: tuple[str, ...], path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_plugin(plugin, args, f"spec.plugins.{plugin}")
    assert info.value.path == path
    assert rule in info.value.rule


IMPLIED = [
    pytest.param((("mpi", ("--port=22",)),), {"mpi", "svc", "ssh"}, id="mpi-implies-svc-and-ssh"),
    pytest.param((("tensorflow", ()),), {"tensorflow", "svc"}, id="tensorflow-implies-svc"),
    pytest.param((("pytorch", ()),), {"pytorch", "svc"}, id="pytorch-implies-svc"),
    pytest.param((("env", ()),), {"env"}, id="env-implies-nothing"),
]


@pytest.mark.parametrize(("plugins", "expected"), IMPLIED)
def test_implied_plugins_follow_volcanos_webhook(plugins: tuple[tuple[str, tuple[str, ...]], ...],
                                                  expected: set[str]) -> None:
    assert set(resolve_plugins(plugins)) == expected


def test_a_named_plugin_keeps_the_users_options_over_the_implied_default() -> None:
    resolved = resolve_plugins((("mpi", ()), ("ssh", ("--no-root",))))
    assert resolved["ssh"].switch("no-root")
