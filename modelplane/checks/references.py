"""References that resolve to nothing, each with the nearest match (modelplane.references):

* service-selector (mandatory): a ModelService entry selecting no ModelDeployment or
  ModelEndpoint takes no traffic, and the others take its share without a word;
* budget-scope (mandatory): a FleetBudget whose namespaces or deploymentSelector select no
  deployment limits nothing;
* observed-names (mandatory): observed pool sizes naming a cluster or pool the fleet does not
  have are never read (`plan` and `lint` refuse such a file; the pack sees the stacks'
  `observed` config here)."""

from __future__ import annotations

from collections.abc import Iterable

from modelplane.references import budget_scopes, observed_problems, service_selectors

from .context import CheckContext
from .findings import MANDATORY, Finding
from .registry import register

SERVICE_SELECTOR = "service-selector"
BUDGET_SCOPE = "budget-scope"
OBSERVED_NAMES = "observed-names"


@register(SERVICE_SELECTOR, MANDATORY, "every ModelService entry selects a ModelDeployment or a ModelEndpoint")
def service_selector(ctx: CheckContext) -> Iterable[Finding]:
    for ref in service_selectors(ctx.fleet):
        yield Finding(SERVICE_SELECTOR, MANDATORY, ctx.ref(ref.obj), ref.field, ref.message + ".")


@register(BUDGET_SCOPE, MANDATORY, "every FleetBudget's scope selects a ModelDeployment")
def budget_scope(ctx: CheckContext) -> Iterable[Finding]:
    for ref in budget_scopes(ctx.fleet):
        yield Finding(BUDGET_SCOPE, MANDATORY, ctx.ref(ref.obj), ref.field, ref.message + ".")


@register(OBSERVED_NAMES, MANDATORY, "observed pool sizes name clusters and pools of the fleet")
def observed_names(ctx: CheckContext) -> Iterable[Finding]:
    for problem in observed_problems(ctx.observed or {}, ctx.fleet):
        yield Finding(OBSERVED_NAMES, MANDATORY, "observed capacity", "",
                      f"{problem}{'' if problem.endswith('?') else '.'} This size is never read and the declared "
                      "one stands. Fix the name.")
