"""SGLang engines: they must serve on the port the program routes to, PrefillDecode with
SGLang needs both phases SGLang so the program can put SGLang's PD router in front (its
decode servers answer requests without a bootstrap room with 400: modelplane.render.pd_router),
and an autoscaled one must serve /metrics, which SGLang does only with `--enable-metrics`
(the renderer adds it to command lines it owns: modelplane.render.engine.needs_metrics_flag)."""

from __future__ import annotations

from collections.abc import Iterable

from modelplane.engine_family import engine_family
from modelplane.render.engine import SGLANG_METRICS_FLAG, needs_metrics_flag
from modelplane.vocabulary import ENGINE_PORT

from .context import CheckContext
from .engine_args import flag_value, tokens
from .findings import MANDATORY, Finding
from .registry import register

POLICY_PD = "sglang-prefill-decode"
POLICY_PORT = "sglang-port"
POLICY_METRICS = "sglang-metrics"
SGLANG_DEFAULT_PORT = 30000


@register(POLICY_PD, MANDATORY, "SGLang PrefillDecode needs SGLang on both phases with matching "
          "--disaggregation-mode, so its PD router can pair them")
def check_pd(ctx: CheckContext) -> Iterable[Finding]:
    for dep in ctx.fleet.deployments.values():
        spec = dep.spec.template.spec
        if spec.mode != "PrefillDecode":
            continue
        phased = [(e, engine) for e, engine in enumerate(spec.engines) if engine.phase]
        families = {engine.name: engine_family(engine) for _, engine in phased}
        if "sglang" not in families.values():
            continue
        for e, engine in phased:
            field = f"spec.template.spec.engines[{e}]"
            if families[engine.name] != "sglang":
                yield Finding(POLICY_PD, MANDATORY, ctx.ref(dep), f"{field}.members[0].template.spec.containers[0]",
                              f"engine {engine.name!r} ({engine.phase}) is not SGLang while another phase is: "
                              "the program cannot put SGLang's PD router in front of a mixed pair, and routing "
                              "straight to SGLang decode pods gets 400 (no bootstrap room). Fix: run both phases "
                              "on SGLang (or both on vLLM).")
                continue
            phase = (engine.phase or "").lower()    # never empty here: `phased` has a phase
            for m, member in enumerate(engine.members):
                mode = flag_value(member.template.spec.engine, "--disaggregation-mode")
                if mode is None or mode[0] != phase:
                    yield Finding(POLICY_PD, MANDATORY, ctx.ref(dep),
                                  f"{field}.members[{m}].template.spec.containers[0]",
                                  f"engine {engine.name!r} is the {engine.phase} phase but its command line says "
                                  f"{'--disaggregation-mode ' + mode[0] if mode else 'no --disaggregation-mode'}: "
                                  "the PD router pairs prefill and decode servers by that mode. Fix: add "
                                  f"--disaggregation-mode {phase}.")


@register(POLICY_PORT, MANDATORY, f"SGLang engines must serve on port {ENGINE_PORT}, where the program probes "
          "and routes")
def check_port(ctx: CheckContext) -> Iterable[Finding]:
    for dep in ctx.fleet.deployments.values():
        for e, engine in enumerate(dep.spec.template.spec.engines):
            if engine_family(engine) != "sglang":
                continue
            for m, member in enumerate(engine.members):
                if member.role == "Worker":
                    continue
                port = flag_value(member.template.spec.engine, "--port")
                if port is None or port[0] != str(ENGINE_PORT):
                    yield Finding(POLICY_PORT, MANDATORY, ctx.ref(dep),
                                  f"spec.template.spec.engines[{e}].members[{m}].template.spec.containers[0]",
                                  f"engine {engine.name!r} runs SGLang on port "
                                  f"{port[0] if port else SGLANG_DEFAULT_PORT} (SGLang's default is "
                                  f"{SGLANG_DEFAULT_PORT}), but the readiness probe, the Service and the router use "
                                  f"{ENGINE_PORT}: the pods never turn Ready. Fix: add --port {ENGINE_PORT}.")


@register(POLICY_METRICS, MANDATORY, f"An autoscaled SGLang engine with a hand-written command must pass "
          f"{SGLANG_METRICS_FLAG}, or it serves no /metrics and never scales")
def check_metrics(ctx: CheckContext) -> Iterable[Finding]:
    for dep in ctx.fleet.deployments.values():
        for e, engine in enumerate(dep.spec.template.spec.engines):
            if not needs_metrics_flag(ctx.fleet, dep, engine):
                continue
            for m, member in enumerate(engine.members):
                container = member.template.spec.engine
                # Workers serve nothing; without a command the renderer appends the flag itself.
                if member.role == "Worker" or not container.command:
                    continue
                if any(word == SGLANG_METRICS_FLAG for _, _, word in tokens(container)):
                    continue
                yield Finding(POLICY_METRICS, MANDATORY, ctx.ref(dep),
                              f"spec.template.spec.engines[{e}].members[{m}].template.spec.containers[0].command",
                              f"engine {engine.name!r} runs SGLang with a hand-written command that lacks "
                              f"{SGLANG_METRICS_FLAG}, and a ReplicaAutoscaler scales the deployment: SGLang then "
                              f"serves no /metrics, the autoscaler reads nothing and the deployment never scales. "
                              f"Fix: add {SGLANG_METRICS_FLAG} to the command (or drop `command` and give the "
                              "command line as args, to which the program adds it).")
