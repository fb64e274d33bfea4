"""The `engine` container: the user's container plus what the platform must add."""

from __future__ import annotations

from modelplane.api import Engine, Fleet, ModelDeployment
from modelplane.clouds.aws import EFA_RESOURCE, member_efa_share
from modelplane.engine_family import engine_family
from modelplane.vocabulary import ENGINE_PORT, Manifest

from .context import MemberContext
from .env import injected_env, merge_env
from .meta import CACHE_MOUNT, CLAIM_NAME
from .mock_engine_configmap import mock_engine_mount, ships_mock_engine

DSHM_VOLUME = "dshm"
# SGLang serves /metrics only when started with it (sgl-project/sglang python/sglang/srt/
# entrypoints/http_server.py mounts it, add_prometheus_middleware, only `if
# server_args.enable_metrics`, off by default): without it the autoscaler reads nothing.
SGLANG_METRICS_FLAG = "--enable-metrics"
CACHE_VOLUME = "model-cache"


def readiness_probe() -> Manifest:
    return {
        "httpGet": {"path": "/health", "port": ENGINE_PORT},
        "initialDelaySeconds": 30,
        "periodSeconds": 10,
        # SGLang answers /health in about a second; the kubelet default of 1s flaps.
        "timeoutSeconds": 5,
    }


def has_flag(args: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def needs_metrics_flag(fleet: Fleet, deployment: ModelDeployment, engine: Engine) -> bool:
    """An SGLang engine whose /metrics something reads: the deployment's ReplicaAutoscaler (the
    only reader of engine metrics, through observe's cluster access: modelplane.autoscale.pod_metrics).
    vLLM serves /metrics unconditionally."""
    key = (deployment.metadata.namespace or "default", deployment.metadata.name)
    return engine_family(engine) == "sglang" and fleet.autoscaler_for(key) is not None


def engine_args(m: MemberContext, user_args: list[str] | None, *, has_command: bool) -> list[str] | None:
    """Flags appended to an image-entrypoint engine (`vllm serve`).

    A custom command owns its own command line (a shell script, Ray bootstrap), so it
    only gets the values as env (MODELPLANE_MODEL_REVISION, MODELPLANE_LOAD_FORMAT); the
    `sglang-metrics` check reports one that lacks `--enable-metrics` where it is needed.
    """
    if has_command:
        return user_args
    args = list(user_args or [])
    r = m.replica
    if r.cache is not None and not has_flag(args, "--revision"):
        # By construction the engine asks for exactly the revision the cache staged.
        args += ["--revision", r.revision or ""]
    if m.modelexpress_loader and not has_flag(args, "--load-format"):
        args += ["--load-format", "modelexpress"]
    if (m.serving and needs_metrics_flag(r.fleet, r.deployment, m.engine)
            and not has_flag(args, SGLANG_METRICS_FLAG)):
        args.append(SGLANG_METRICS_FLAG)
    return args or user_args


def efa_devices(m: MemberContext) -> int:
    """`vpc.amazonaws.com/efa` one pod of this member requests: 0 off device-plugin EFA pools,
    and for members whose traffic never leaves their node."""
    r = m.replica
    pool = r.cluster.pool(m.pool)
    share = (member_efa_share(r.fleet, r.cluster, pool, m.claimed, crosses_nodes=m.crosses_nodes)
             if pool is not None else None)
    return share.devices if share is not None else 0


def engine_container(m: MemberContext) -> Manifest:
    user = m.member.template.spec.containers[0]
    spec = user.model_dump(by_alias=True, exclude_none=True, mode="json")
    has_command = bool(user.command)
    container: Manifest = {"name": spec.pop("name"), "image": spec.pop("image")}
    if has_command:
        container["command"] = list(user.command or [])
    spec.pop("command", None)
    spec.pop("args", None)
    args = engine_args(m, user.args, has_command=has_command)
    if args is not None:
        container["args"] = list(args)
    container["env"] = merge_env(injected_env(m), spec.pop("env", None) or [])
    if m.serving:
        container["ports"] = [{"name": "http", "containerPort": ENGINE_PORT, "protocol": "TCP"}]
        container["readinessProbe"] = readiness_probe()
    resources = spec.pop("resources", None) or {}
    efa = efa_devices(m)
    if efa:
        # Extended resources must request what they limit; quantities as strings, as the
        # API server returns them (and as Pulumi's YAML renderer writes them).
        resources = {**resources, "limits": {EFA_RESOURCE: str(efa)}, "requests": {EFA_RESOURCE: str(efa)}}
    if m.claim_template:
        # The whole claim: every device the member resolved belongs to this container.
        resources = {**resources, "claims": [{"name": CLAIM_NAME}]}
    if resources:
        container["resources"] = resources
    security = spec.pop("securityContext", None) or {}
    if m.replica.modelexpress:
        # NIXL pins GPU memory for RDMA transfers between peers.
        caps = security.get("capabilities", {})
        add = sorted(set(caps.get("add", [])) | {"IPC_LOCK"})
        security = {**security, "capabilities": {**caps, "add": add}}
    if security:
        container["securityContext"] = security
    mounts = [{"name": DSHM_VOLUME, "mountPath": "/dev/shm"}]
    if m.replica.cache is not None:
        mounts.append({"name": CACHE_VOLUME, "mountPath": CACHE_MOUNT})
    if ships_mock_engine(m.replica.cluster):
        mounts.append(mock_engine_mount())
    container["volumeMounts"] = mounts + spec.pop("volumeMounts", [])
    container.update(spec)  # anything else the API model may carry, passed through
    return container
