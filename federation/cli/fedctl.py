"""``fedctl``: the submitter's command line, a thin shell over ``federation.client``.

Exit codes are part of the contract for scripts: 0 success; 2 bad input — a usage error,
a manifest that does not parse or validate, or the server's INVALID_ARGUMENT — always as
one line naming the field path; 1 any other refusal or failure (not found, permission,
server unreachable), also one line. ``-o json`` on every read prints the proto's JSON
mapping with every field present, so scripts need no defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
from collections.abc import Awaitable, Callable, Sequence

import grpc

from federation.cli import fedctl_format as fmt
from federation.cli.durations import MAX_SECONDS
from federation.cli.errors import EXIT_FAILURE, EXIT_USAGE, fail
from federation.client import MAX_RETRIES, FederationClient, Reconnect, Retry, ServiceError, Tls
from federation.domain.errors import InvalidInput
from federation.domain.manifests_fields import INT32, INT64, integer
from federation.files import MAX_MANIFEST_BYTES, read_text
from federation.v1 import queues_pb2, types_pb2

DEFAULT_SERVER = "127.0.0.1:50051"
MAX_RECONNECT_MS = 600_000  # ten minutes between reconnect attempts; gRPC's own maximum back-off is 120 s
# Server answers that mean "your input is wrong" (exit 2) rather than "it failed" (exit 1).
_USAGE_CODES = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE)


def _output(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fedctl", description="Apply, submit and inspect federated training jobs and the objects around "
        "them (queues, priority classes, propagation policies). Exit codes: 0 ok, 2 bad input, 1 other failure.")
    parser.add_argument("--server", default=os.environ.get("FEDCTL_SERVER", DEFAULT_SERVER),
                        help="HOST:PORT of federation serve (default $FEDCTL_SERVER or %(default)s)")
    parser.add_argument("--token", default=None, help="bearer token (default $FEDCTL_TOKEN)")
    parser.add_argument("--ca", help="CA certificate (PEM) to verify the server; enables TLS")
    parser.add_argument("--cert", help="client certificate (PEM) for mutual TLS")
    parser.add_argument("--key", help="client private key (PEM) for mutual TLS")
    parser.add_argument("--server-name", help="name to verify in the server certificate (default: the host)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per call")
    parser.add_argument("--retries", type=int, default=3,
                        help="re-send an idempotent call this many times when the server is UNAVAILABLE, with "
                             f"bounded back-off (default %(default)s; 0 = never; at most {MAX_RETRIES})")
    parser.add_argument("--reconnect-max-ms", type=int, default=2000,
                        help="longest wait between reconnect attempts after losing the server (default %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    apply = sub.add_parser("apply", help="create or update every object in files or directories "
                           "(Volcano Job/Queue, PriorityClass, Karmada (Cluster)PropagationPolicy, ...)")
    apply.add_argument("-f", "--filename", action="append", required=True, metavar="FILE|DIR",
                       help="YAML file, directory of *.yaml/*.yml/*.json files, or '-' for stdin (repeatable)")
    apply.add_argument("--atomic", action="store_true",
                       help="all or nothing: refuse every object if one is refused, undo what was applied")

    submit = sub.add_parser("submit", help="submit one Volcano Job (with an optional Karmada PropagationPolicy "
                            "for it in the same file)")
    submit.add_argument("-f", "--filename", required=True, help="YAML file ('-' = stdin): one Volcano Job and at "
                        "most one (Cluster)PropagationPolicy")
    _output(submit)

    get = sub.add_parser("get", help="show one job, queue, cluster, policy or priority class")
    get.add_argument("kind", choices=("job", "queue", "cluster", *fmt.OBJECT_KINDS))
    get.add_argument("name")
    get.add_argument("-n", "--namespace", default="default", help="namespace of a propagationpolicy")
    _output(get)

    delete = sub.add_parser("delete", help="delete a policy or priority class (admin token)")
    delete.add_argument("kind", choices=fmt.OBJECT_KINDS)
    delete.add_argument("name")
    delete.add_argument("-n", "--namespace", default="default", help="namespace of a propagationpolicy")

    lst = sub.add_parser("list", help="list jobs, queues, clusters, policies or priority classes")
    lst.add_argument("kind", choices=("jobs", "queues", "clusters", "policies", "priorityclasses"))
    lst.add_argument("--queue", default="", help="only this queue's jobs")
    lst.add_argument("--state", default="", help="only jobs in this state (pending, running, ...)")
    _output(lst)

    cancel = sub.add_parser("cancel", help="cancel a job")
    cancel.add_argument("name")
    cancel.add_argument("--reason", default="", help="recorded in the job's events")
    _output(cancel)

    explain = sub.add_parser("explain", help="where a job went, or why it is pending")
    explain.add_argument("name")
    _output(explain)

    audit = sub.add_parser("audit", help="every planning decision about a job")
    audit.add_argument("name")
    _output(audit)

    watch = sub.add_parser("watch", help="stream job events (resumable with --from)")
    watch.add_argument("--from", dest="from_event", type=int, default=0, help="resume after this event id")
    watch.add_argument("--queue", default="")
    watch.add_argument("--count", type=int, default=0, help="stop after this many events (0 = follow)")
    _output(watch)

    queue = sub.add_parser("queue", help="manage queues (create/update/delete need an admin token)")
    qsub = queue.add_subparsers(dest="queue_command", required=True, metavar="QUEUE_COMMAND")
    for verb in ("create", "update"):
        qc = qsub.add_parser(verb, help=f"{verb} a queue from flags or a Volcano Queue YAML file")
        qc.add_argument("name", nargs="?", help="queue name (omit with -f)")
        qc.add_argument("-f", "--filename", help="Volcano scheduling.volcano.sh Queue YAML ('-' = stdin)")
        qc.add_argument("--weight", type=int, default=1)
        qc.add_argument("--priority", type=int, default=0)
        qc.add_argument("--capability", action="append", default=[], metavar="RES=QTY",
                        help="hard cap (repeatable or comma-separated)")
        qc.add_argument("--guarantee", action="append", default=[], metavar="RES=QTY")
        qc.add_argument("--deserved", action="append", default=[], metavar="RES=QTY")
        qc.add_argument("--owner", action="append", default=[], help="tenant allowed to use the queue (repeatable)")
        qc.add_argument("--parent", default="")
        qc.add_argument("--namespace", action="append", default=[], dest="namespaces",
                        help="namespace the queue's jobs may use (repeatable; none = only --default-namespace)")
        qc.add_argument("--default-namespace", default="", help="namespace of a job that names none (default: default)")
        qc.add_argument("--pod-security", default="", choices=("", "baseline", "restricted", "privileged"),
                        help="Pod Security Standard for the queue's pod templates (default: baseline)")
        qc.add_argument("--allow-system-namespaces", action="store_true",
                        help="let --namespace list kube-system and other kube-* namespaces")
        qc.add_argument("--no-reclaimable", action="store_true")
        _output(qc)
    ql = qsub.add_parser("list", help="list queues")
    _output(ql)
    qg = qsub.add_parser("get", help="show a queue")
    qg.add_argument("name")
    _output(qg)
    qd = qsub.add_parser("delete", help="delete an empty queue")
    qd.add_argument("name")

    cluster = sub.add_parser("cluster", help="member clusters")
    csub = cluster.add_subparsers(dest="cluster_command", required=True, metavar="CLUSTER_COMMAND")
    _output(csub.add_parser("list", help="list clusters"))
    cg = csub.add_parser("get", help="show a cluster")
    cg.add_argument("name")
    _output(cg)
    ct = csub.add_parser("taint", help="add or remove admin taints (admin token), kubectl taint syntax")
    ct.add_argument("name")
    ct.add_argument("taints", nargs="+", metavar="KEY[=VALUE]:EFFECT|KEY[:EFFECT]-",
                    help="add (effect NoSchedule or PreferNoSchedule) or, with a trailing '-', remove")
    _output(ct)
    return parser


def _read(path: str) -> str:
    """A ``-f`` file or stdin, bounded (``federation/files.py``)."""
    return read_text(path, "-f", MAX_MANIFEST_BYTES)


def _quantities(values: Sequence[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        for item in filter(None, (v.strip() for v in value.split(","))):
            name, sep, qty = item.partition("=")
            if not sep or not name or not qty:
                raise InvalidInput(flag, f"{item!r} is not RESOURCE=QUANTITY")
            if name in out:  # the first value would be dropped without a word
                raise InvalidInput(flag, f"{name} is given twice ({out[name]} and {qty})")
            out[name] = qty
    return out


def taint_args(values: Sequence[str]) -> tuple[list[types_pb2.Taint], list[str]]:
    """kubectl taint arguments: ``KEY[=VALUE]:EFFECT`` adds, ``KEY[:EFFECT]-`` removes."""
    add: list[types_pb2.Taint] = []
    remove: list[str] = []
    for value in values:
        if value.endswith("-"):
            remove.append(value[:-1])
            continue
        body, sep, effect = value.rpartition(":")
        if not sep or not body or not effect:
            raise InvalidInput("taints", f"{value!r} is not KEY[=VALUE]:EFFECT or KEY[:EFFECT]-")
        key, _, val = body.partition("=")
        add.append(types_pb2.Taint(key=key, value=val, effect=effect))
    return add, remove


def queue_from_flags(args: argparse.Namespace) -> queues_pb2.Queue:
    """The queue the flags describe (validated by the server, which names the field on error)."""
    if not args.name:
        raise InvalidInput("name", "a queue name (or -f FILE) is required")
    q = queues_pb2.Queue(name=args.name, weight=args.weight, priority=args.priority, parent=args.parent,
                         owners=args.owner, guarantee=_quantities(args.guarantee, "--guarantee"),
                         namespaces=args.namespaces, default_namespace=args.default_namespace,
                         pod_security=args.pod_security, allow_system_namespaces=args.allow_system_namespaces)
    if args.capability:
        q.capability.quantities.update(_quantities(args.capability, "--capability"))
    if args.deserved:
        q.deserved.quantities.update(_quantities(args.deserved, "--deserved"))
    if args.no_reclaimable:
        q.reclaimable = False
    return q


async def _submit(c: FederationClient, args: argparse.Namespace) -> str:
    from federation.domain.manifests import load_manifests
    from federation.wire.convert import job_to_proto

    submission = load_manifests(_read(args.filename))
    spec = job_to_proto(submission.job)
    if not submission.explicit_priority:
        spec.ClearField("priority")  # the server resolves the class (applied PriorityClasses first)
    results = [await c.submit_job(spec)]
    if args.output == "json":
        return fmt.dumps({"results": [fmt.to_dict(r) for r in results]})
    return "\n".join(f"job/{r.job.id} {'created' if r.created else 'unchanged (already submitted)'} "
                     f"in queue {r.job.spec.queue}" for r in results)


async def _apply(c: FederationClient, args: argparse.Namespace) -> int:
    """Print one line per object; the exit code is the worst outcome (see ``apply``)."""
    from federation.cli import apply

    docs, refused = apply.read(args.filename, _read)
    if not docs and not refused:  # an empty rendering applied in CI must not pass as success (kubectl: an error)
        raise InvalidInput("-f", f"no objects to apply in {', '.join(args.filename)}")
    if args.atomic and refused:
        lines = [*refused, apply.Line("nothing applied (--atomic)", EXIT_USAGE)]
    elif args.atomic:
        lines = await apply.apply_atomic(c, docs)
    else:
        lines = [*refused, *await apply.apply_all(c, docs)]
    for line in lines:
        print(line.text, file=sys.stderr if line.code else sys.stdout, flush=True)
    return apply.exit_code(lines)


async def _object(c: FederationClient, args: argparse.Namespace, js: bool) -> str:
    """get/delete of a propagationpolicy, clusterpropagationpolicy or priorityclass."""
    if args.kind == "priorityclass":
        if args.command == "delete":
            await c.delete_priority_class(args.name)
            return f"priorityclass/{args.name} deleted"
        pc = await c.get_priority_class(args.name)
        return fmt.json_one(pc) if js else fmt.classes_table([pc])
    kind = "PropagationPolicy" if args.kind == "propagationpolicy" else "ClusterPropagationPolicy"
    namespace = args.namespace if kind == "PropagationPolicy" else ""
    if args.command == "delete":
        await c.delete_policy(kind, namespace, args.name)
        return f"{args.kind}/{f'{namespace}/' if namespace else ''}{args.name} deleted"
    policy = await c.get_policy(kind, namespace, args.name)
    return fmt.json_one(policy) if js else fmt.policy_block(policy)


async def _queue_write(c: FederationClient, args: argparse.Namespace) -> str:
    if args.filename:
        from federation.domain.manifests import load_queues
        from federation.wire.convert import queue_to_proto

        queues = [queue_to_proto(q) for q in load_queues(_read(args.filename))]
    else:
        queues = [queue_from_flags(args)]
    write = c.create_queue if args.queue_command == "create" else c.update_queue
    done: list[queues_pb2.Queue] = []

    def report() -> str:
        if args.output == "json":
            return fmt.json_many("queues", done)
        return "\n".join(f"queue/{q.name} {args.queue_command}d" for q in done)

    for q in queues:
        try:
            done.append(await write(q))
        except ServiceError:
            if done:  # the file's earlier queues stay written: say so before the error line
                print(report(), flush=True)
            raise
    return report()


async def _run(c: FederationClient, args: argparse.Namespace) -> str | None:
    """The command's output text (None when it printed as it went)."""
    js = getattr(args, "output", "table") == "json"
    cmd = args.command
    if cmd == "submit":
        return await _submit(c, args)
    if cmd == "apply":
        args.exit_code = await _apply(c, args)
        return None
    if cmd in ("get", "delete") and args.kind in fmt.OBJECT_KINDS:
        return await _object(c, args, js)
    if cmd == "get":
        if args.kind == "job":
            job = await c.get_job(args.name)
            return fmt.json_one(job) if js else fmt.job_block(job)
        if args.kind == "queue":
            q = await c.get_queue(args.name)
            return fmt.json_one(q) if js else fmt.queues_table([q])
        cl = await c.get_cluster(args.name)
        return fmt.json_one(cl) if js else fmt.clusters_table([cl])
    if cmd == "list":
        if args.kind == "jobs":
            from federation.wire.convert import job_state_from_name

            state = job_state_from_name(args.state, "--state") if args.state else 0
            jobs = await c.list_jobs(queue=args.queue, state=state)
            return fmt.json_many("jobs", jobs) if js else fmt.jobs_table(jobs)
        if args.kind == "queues":
            queues = await c.list_queues()
            return fmt.json_many("queues", queues) if js else fmt.queues_table(queues)
        if args.kind == "policies":
            policies = await c.list_policies()
            return fmt.json_many("policies", policies) if js else fmt.policies_table(policies)
        if args.kind == "priorityclasses":
            classes = await c.list_priority_classes()
            return fmt.json_many("priorityClasses", classes) if js else fmt.classes_table(classes)
        clusters = await c.list_clusters()
        return fmt.json_many("clusters", clusters) if js else fmt.clusters_table(clusters)
    if cmd == "cancel":
        job = await c.cancel_job(args.name, args.reason)
        return fmt.json_one(job) if js else f"job/{job.id} {fmt.state(job.state)}"
    if cmd == "explain":
        resp = await c.explain_job(args.name)
        return fmt.json_one(resp) if js else fmt.explain_block(resp)
    if cmd == "audit":
        audit = await c.job_audit(args.name)
        return fmt.json_one(audit) if js else fmt.audit_table(audit)
    if cmd == "watch":
        seen = 0
        async for ev in c.watch_jobs(args.from_event, args.queue):
            print(fmt.dumps(fmt.to_dict(ev)) if js else fmt.event_line(ev), flush=True)
            seen += 1
            if args.count and seen >= args.count:
                break
        return None
    if cmd == "queue":
        if args.queue_command in ("create", "update"):
            return await _queue_write(c, args)
        if args.queue_command == "list":
            queues = await c.list_queues()
            return fmt.json_many("queues", queues) if js else fmt.queues_table(queues)
        if args.queue_command == "get":
            q = await c.get_queue(args.name)
            return fmt.json_one(q) if js else fmt.queues_table([q])
        await c.delete_queue(args.name)
        return f"queue/{args.name} deleted"
    if cmd == "cluster":
        if args.cluster_command == "taint":
            add, remove = taint_args(args.taints)
            cl = await c.taint_cluster(args.name, add, remove)
            return fmt.json_one(cl) if js else fmt.clusters_table([cl])
        if args.cluster_command == "list":
            clusters = await c.list_clusters()
            return fmt.json_many("clusters", clusters) if js else fmt.clusters_table(clusters)
        cl = await c.get_cluster(args.name)
        return fmt.json_one(cl) if js else fmt.clusters_table([cl])
    raise InvalidInput("command", f"unknown command {cmd!r}")


def _one_line(text: str) -> str:
    return fmt.printable(" ".join(text.split()))


def _check_token(token: str | None) -> None:
    """Refuse a token gRPC cannot send: a metadata value is printable ASCII (0x20-0x7E), so
    ``$'a\\nb'`` would otherwise fail inside the channel as an opaque batch error (exit 1)."""
    if token is not None and not all(" " <= ch <= "~" for ch in token):
        raise InvalidInput("--token", "must be printable ASCII (a gRPC metadata value): no newline, "
                           "control or non-ASCII character")


def _check_numbers(args: argparse.Namespace) -> None:
    """Numeric flags argparse takes but the call cannot: a timeout that is not a positive
    finite number, or one so long that now + timeout overflows gRPC's deadline (about 9e9 s),
    expires at once (DEADLINE_EXCEEDED, exit 1); an integer outside its proto field's range
    fails as ``Value out of range`` naming no flag; ``--retries`` sizes a list of back-off
    delays per call (10**9 aborted the process in C++ ``bad_alloc``) and
    ``--reconnect-max-ms`` is a C ``int`` channel argument (OverflowError traceback)."""
    if not math.isfinite(args.timeout) or not 0 < args.timeout <= MAX_SECONDS:
        raise InvalidInput("--timeout", f"must be a positive number of seconds up to {MAX_SECONDS} (10 years), "
                           f"got {args.timeout}")
    if not 0 <= args.retries <= MAX_RETRIES:
        raise InvalidInput("--retries", f"must be between 0 and {MAX_RETRIES}, got {args.retries}")
    if not 1 <= args.reconnect_max_ms <= MAX_RECONNECT_MS:
        raise InvalidInput("--reconnect-max-ms", f"must be between 1 and {MAX_RECONNECT_MS}, "
                           f"got {args.reconnect_max_ms}")
    if getattr(args, "count", 0) < 0:
        raise InvalidInput("--count", f"must not be negative (0 = follow), got {args.count}")
    for flag, attr, wire in (("--weight", "weight", INT32), ("--priority", "priority", INT32),
                             ("--from", "from_event", INT64)):
        if getattr(args, attr, None) is not None:
            integer(getattr(args, attr), flag, wire=wire)


async def _main(args: argparse.Namespace, run: Callable[[FederationClient, argparse.Namespace],
                                                        Awaitable[str | None]]) -> int:
    token = args.token or os.environ.get("FEDCTL_TOKEN") or None
    _check_token(token)
    _check_numbers(args)
    tls = Tls(args.ca, args.cert, args.key, args.server_name) if (args.ca or args.cert or args.key) else None
    reconnect = Reconnect(min(100, args.reconnect_max_ms), min(100, args.reconnect_max_ms), args.reconnect_max_ms)
    async with FederationClient(args.server, token=token, tls=tls, timeout=args.timeout,
                                retry=Retry(attempts=args.retries + 1), reconnect=reconnect) as client:
        out = await run(client, args)
    if out is not None:
        print(out)
    return int(getattr(args, "exit_code", 0))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(_main(args, _run))
    except InvalidInput as exc:
        return fail(_one_line(str(exc)), EXIT_USAGE)
    except ServiceError as exc:
        code = EXIT_USAGE if exc.code in _USAGE_CODES else EXIT_FAILURE
        return fail(_one_line(f"{exc.message} ({exc.code.name})"), code)
    except FileNotFoundError as exc:
        return fail(f"{exc.filename}: no such file", EXIT_USAGE)
    except (OSError, ValueError) as exc:
        return fail(_one_line(str(exc)), EXIT_USAGE)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
