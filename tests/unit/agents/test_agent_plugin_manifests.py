"""The ssh, mpi, tensorflow and pytorch plugins as the agent renders and applies them:
the ssh Secret (key pair + config naming every pod) and its mount, TF_CONFIG, the
ports the framework plugins open, and the Secret's whole life on the fake cluster."""

from __future__ import annotations

import json
from dataclasses import replace

from agentkit import fake, job, observe, step, work
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from agents.core.apply import apply_ops
from agents.core.operations import CreateSecret, DeleteSecret, DeleteService
from agents.core.reconcile import reconcile
from agents.core.records import LABEL_JOB, SecretManifest, ServiceManifest, SshMount
from agents.core.render import render
from agents.core.ssh_keys import with_key_pair
from agents.k8s.convert import pod_body, secret_body, secret_record
from agents.runtime_jobs import orphan_ops


def test_ssh_secret_config_names_every_pod_and_asks_for_a_key_pair() -> None:
    rendered = render(work(job(tasks=(("master", 1, 0), ("worker", 2, 8)), plugins=(("ssh", ()),))))
    secret = rendered.secret
    assert secret is not None and secret.name == "train-ssh" and secret.key_pair
    assert secret.labels == {LABEL_JOB: "train"}
    assert secret.data["config"] == (
        "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
        "Host train-master-0\n  HostName train-master-0.train\n"
        "Host train-worker-0\n  HostName train-worker-0.train\n"
        "Host train-worker-1\n  HostName train-worker-1.train\n")
    assert all(p.ssh == SshMount("train-ssh", "/root/.ssh", 0o600) for p in rendered.pods)


def test_ssh_no_root_and_key_path_options_move_the_mount() -> None:
    no_root = render(work(job(plugins=(("ssh", ("--no-root",)),)))).pods[0].ssh
    assert no_root == SshMount("train-ssh", "/etc/volcano/.ssh", 0o755)
    custom = render(work(job(plugins=(("ssh", ("--ssh-key-file-path=/home/user/.ssh",)),)))).pods[0].ssh
    assert custom == SshMount("train-ssh", "/home/user/.ssh", 0o600)


def test_mpi_turns_on_ssh_svc_and_opens_its_port() -> None:
    rendered = render(work(job(tasks=(("master", 1, 0), ("worker", 2, 8)), plugins=(("mpi", ("--port=2022",)),))))
    assert rendered.secret is not None and rendered.config_map is not None
    assert all(p.ports == (("mpijob-port", 2022),) for p in rendered.pods)


def test_no_ssh_means_no_secret_and_no_mount() -> None:
    rendered = render(work(job(plugins=(("svc", ()),))))
    assert rendered.secret is None and all(p.ssh is None for p in rendered.pods)


def test_secret_hash_follows_the_config_not_the_key() -> None:
    two = render(work(job(tasks=(("worker", 2, 8),), plugins=(("ssh", ()),)))).secret
    three = render(work(job(tasks=(("worker", 3, 8),), plugins=(("ssh", ()),)))).secret
    assert two is not None and three is not None and two.annotations != three.annotations
    again = render(work(job(tasks=(("worker", 2, 8),), plugins=(("ssh", ()),)))).secret
    assert again == two


def tf_config(j: object, pod: str) -> dict[str, object]:
    manifest = render(work(j)).pod(pod)  # type: ignore[arg-type]  # the pod key is built loosely for the test
    assert manifest is not None
    return json.loads(manifest.env_dict()["TF_CONFIG"])  # type: ignore[no-any-return]  # json.loads returns Any


def test_tensorflow_config_lists_every_role_and_the_pods_own_task() -> None:
    j = job(tasks=(("ps", 1, 0), ("worker", 2, 8)), plugins=(("tensorflow", ()),))
    assert tf_config(j, "train-worker-1") == {
        "cluster": {"ps": ["train-ps-0.train:2222"],
                    "worker": ["train-worker-0.train:2222", "train-worker-1.train:2222"]},
        "task": {"type": "worker", "index": 1}}


def test_tensorflow_role_names_and_port_are_options() -> None:
    j = job(tasks=(("server", 1, 0), ("boss", 1, 0), ("trainer", 2, 8)),
            plugins=(("tensorflow", ("--ps=server", "--chief=boss", "--worker=trainer", "--port=3333")),))
    config = tf_config(j, "train-boss-0")
    assert config["cluster"] == {"ps": ["train-server-0.train:3333"], "chief": ["train-boss-0.train:3333"],
                                 "worker": ["train-trainer-0.train:3333", "train-trainer-1.train:3333"]}
    assert config["task"] == {"type": "chief", "index": 0}


def test_stand_alone_tensorflow_gets_no_tf_config_as_in_volcano() -> None:
    manifest = render(work(job(tasks=(("worker", 1, 8),), plugins=(("tensorflow", ()),)))).pods[0]
    assert "TF_CONFIG" not in manifest.env_dict()


def test_pytorch_opens_its_port_only_with_a_master_task() -> None:
    with_master = render(work(job(tasks=(("master", 1, 0), ("worker", 1, 8)), plugins=(("pytorch", ()),))))
    assert with_master.pods[0].ports == (("pytorchjob-port", 23456),)
    assert render(work(job(plugins=(("pytorch", ()),)))).pods[0].ports == ()


def test_a_fresh_key_pair_is_added_only_at_creation_and_is_a_valid_pair() -> None:
    secret = SecretManifest("train-ssh", "default", data={"config": "x"}, key_pair=True)
    made = with_key_pair(secret)
    assert made.data["config"] == "x"
    private = serialization.load_pem_private_key(made.data["id_rsa"].encode(), password=None)
    assert isinstance(private, rsa.RSAPrivateKey) and private.key_size == 2048
    assert made.data["id_rsa"].startswith("-----BEGIN RSA PRIVATE KEY-----")
    public = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    assert made.data["id_rsa.pub"] == public.decode() + "\n"
    assert with_key_pair(secret).data["id_rsa"] != made.data["id_rsa"]  # one pair per job, never reused


async def test_secret_is_created_once_kept_across_passes_and_withdrawn_on_cancel() -> None:
    cluster = fake()
    w = work(job(tasks=(("master", 1, 0), ("worker", 2, 8)), plugins=(("mpi", ()),)))
    first = await step(cluster, w)
    assert [op for op in first.ops if isinstance(op, CreateSecret)]
    [stored] = cluster.secrets()
    assert {"config", "id_rsa", "id_rsa.pub"} <= set(stored.data)
    second = await step(cluster, w)
    assert not [op for op in second.ops if isinstance(op, (CreateSecret, DeleteSecret))]
    assert cluster.secrets()[0].data["id_rsa"] == stored.data["id_rsa"]  # the key is not rotated
    cancelled = await step(cluster, work(w.job, cancelled=True))
    kinds = [type(op).__name__ for op in cancelled.ops if not type(op).__name__.endswith("Pod")]
    assert kinds.index("DeleteSecret") < kinds.index("DeleteService")
    assert cluster.secrets() == []


async def test_a_changed_config_replaces_the_secret() -> None:
    cluster = fake()
    await step(cluster, work(job(tasks=(("worker", 2, 8),), plugins=(("ssh", ()),))))
    grown = await step(cluster, work(job(tasks=(("worker", 3, 8),), plugins=(("ssh", ()),)), version=2))
    secret_ops = [type(op) for op in grown.ops if isinstance(op, (CreateSecret, DeleteSecret))]
    assert secret_ops == [DeleteSecret, CreateSecret]
    assert "train-worker-2" in cluster.secrets()[0].data["config"]


async def test_a_users_own_secret_of_the_ssh_name_is_never_replaced_or_withdrawn() -> None:
    # A Secret ``<job>-ssh`` the agent did not make (no job label) is the user's: the job's
    # create is refused (the name is taken) and nothing of theirs is deleted, by a pass,
    # a cancel or the orphan sweep.
    cluster = fake()
    theirs = SecretManifest("train-ssh", "default", data={"token": "precious"})
    await cluster.create_secret(theirs)
    w = work(job(tasks=(("worker", 2, 8),), plugins=(("ssh", ()),)))
    result = reconcile(w, await observe(cluster, w))
    assert not [op for op in result.ops if isinstance(op, DeleteSecret)]
    applied = await apply_ops(cluster, result.ops)
    assert not applied.ok and "already exists" in applied.error
    await step(cluster, work(w.job, cancelled=True))
    assert await cluster.delete_secret("default", "train-ssh") is False  # what the orphan sweep asks
    assert cluster.secrets() == [theirs]


def test_orphan_sweep_deletes_the_secret_before_the_service_that_finds_it() -> None:
    orphan = ServiceManifest("gone", "ns1", labels={LABEL_JOB: "gone"})
    kept = ServiceManifest("train", "default", labels={LABEL_JOB: "train"})
    ops = orphan_ops((), (orphan, kept), (), {"train"}, ())
    assert ops == (DeleteSecret("ns1", "gone-ssh"), DeleteService("ns1", "gone"))


def test_pod_body_mounts_the_secret_as_volcano_does_and_opens_ports() -> None:
    rendered = render(work(job(tasks=(("master", 1, 0), ("worker", 1, 8)), plugins=(("mpi", ()),))))
    body = pod_body(rendered.pods[0])
    [volume] = [v for v in body["spec"]["volumes"] if "secret" in v]
    assert volume == {"name": "train-ssh", "secret": {"secretName": "train-ssh", "defaultMode": 0o600, "items": [
        {"key": "id_rsa", "path": ".ssh/id_rsa"}, {"key": "id_rsa.pub", "path": ".ssh/id_rsa.pub"},
        {"key": "id_rsa.pub", "path": ".ssh/authorized_keys"}, {"key": "config", "path": ".ssh/config"}]}}
    container = body["spec"]["containers"][0]
    assert {"name": "train-ssh", "mountPath": "/root/.ssh", "subPath": ".ssh"} in container["volumeMounts"]
    assert container["ports"] == [{"name": "mpijob-port", "containerPort": 22}]


def test_a_port_the_template_already_opens_is_not_added_twice() -> None:
    template = {"spec": {"containers": [{"name": "c", "image": "i", "ports": [{"name": "ssh", "containerPort": 22}]}]}}
    j = job(tasks=(("master", 1, 0), ("worker", 1, 8)), plugins=(("mpi", ()),))
    manifest = render(work(j)).pods[0]
    body = pod_body(replace(manifest, template_json=json.dumps(template)))
    assert body["spec"]["containers"][0]["ports"] == [{"name": "ssh", "containerPort": 22}]


def test_secret_body_is_base64_and_reads_back_without_data() -> None:
    secret = SecretManifest("train-ssh", "default", labels={LABEL_JOB: "train"}, annotations={"a": "b"},
                            data={"config": "Host x\n"})
    body = secret_body(secret)
    assert body["kind"] == "Secret" and body["data"] == {"config": "SG9zdCB4Cg=="}
    assert secret_record(body) == SecretManifest("train-ssh", "default", labels={LABEL_JOB: "train"},
                                                 annotations={"a": "b"})


def test_svc_publishes_not_ready_addresses_only_when_asked_as_in_volcano() -> None:
    assert not render(work(job(plugins=(("svc", ()),)))).service.publish_not_ready_addresses
    asked = render(work(job(plugins=(("svc", ("--publish-not-ready-addresses=true",)),)))).service
    assert asked.publish_not_ready_addresses
    assert render(work(job())).service.publish_not_ready_addresses  # ours, without svc: DNS before readiness
