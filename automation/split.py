"""Run a fleet split across stacks with the Automation API (`python -m modelplane up |
preview | destroy --stack NAME`; docs/pulumi-program.md, "Split stacks").

The fleet stack NAME (stack config `split: {role: fleet, shardSize: K}`) places the fleet
and exports each shard's share and the layout; shard stack `NAME.<shard>` applies its
clusters. The driver creates the shard stacks, gives each the fleet stack's config (its
`split` block says which shard; kubeconfigs of other clusters are left out), and runs:

* up: the fleet stack, then every shard stack in parallel (`--parallel N`), then the
  shard hosting the control-plane gateway, whose routes need the others' gateway
  addresses (a LoadBalancer's is known only once its shard stack ran);
* preview: the fleet stack (the placement dry-run), which writes the shares of the
  placement it previews to a file, with each shard's inputs digest; then the shard stacks
  against that file, except those the plan diff proves unchanged: a shard whose last
  successful update recorded (its `applied` output) the same inputs digest and config
  (`diff_shards`). A shard never applied, whose state cannot be read or whose last update
  failed is previewed; `--every-shard` previews them all;
* destroy: the control shard, the other shards in parallel, the fleet stack.

A stack without a `split` block is a one-stack fleet: the verb runs on it alone.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml
from pulumi import automation as auto

from automation.processes import TrackedPulumiCommand
from components.config import SHARES_FILE_ENV
from components.split import APPLIED_OUTPUT, DIGESTS_KEY, LAYOUT_OUTPUT, shard_stack
from modelplane.engine_json import digest
from modelplane.plan import PlanError
from modelplane.plan.share import StackLayout

SPLIT_KEY = "modelplane:split"
KUBECONFIGS_KEY = "modelplane:kubeconfigs"
# The engine serializes its whole snapshot after every step, also in a preview that
# discards it: O(resources^2). Previews skip those checkpoints (pulumi/pulumi#10668).
PREVIEW_ENV = {"PULUMI_SKIP_CHECKPOINTS": "true"}
# Fleet stack steps after which what a shard reads from it (the hop CA) may differ: every shard is previewed.
FLEET_RESHAPING = ("create", "replace", "create-replacement", "delete", "delete-replaced")
SHOWN = 8   # shard stacks named in one line of the preview's summary


class DriverError(Exception):
    """A problem the user fixes (a missing stack, a stack that is not a fleet stack)."""


@dataclass
class Outcome:
    stack: str
    ok: bool
    seconds: float
    changes: Mapping[str, int] = field(default_factory=dict)
    text: str = ""

    def line(self) -> str:
        changes = ", ".join(f"{k} {v}" for k, v in sorted(self.changes.items()) if v) or "no changes"
        return f"{self.stack}: {'ok' if self.ok else 'FAILED'} in {self.seconds:.1f} s ({changes})"


@dataclass(frozen=True)
class AppliedShard:
    """What a shard stack's state says it last applied: the `applied` output of its last
    update when that update succeeded, else why that is not known (`unknown`)."""

    inputs: str | None = None
    from_config: str | None = None
    unknown: str | None = None


@dataclass(frozen=True)
class ShardDiff:
    """Which shard stacks a preview runs (with the reason) and which the plan diff proves unchanged."""

    preview: dict[str, str]
    unchanged: list[str]

    def lines(self, shown: int = SHOWN) -> str:
        total = len(self.preview) + len(self.unchanged)
        out = []
        if self.unchanged:
            out.append(f"{len(self.unchanged)} of {total} shard stacks unchanged by the plan diff (their share, "
                       f"the manifests it reads, their config and the program are those they last applied), not "
                       f"previewed: {_bounded(self.unchanged, shown)}")
        if self.preview:
            reasons = [f"{stack} ({why})" for stack, why in self.preview.items()]
            out.append(f"previewing {len(self.preview)} of {total} shard stacks: {_bounded(reasons, shown)}")
        return "".join(f"{line}\n" for line in out)


def diff_shards(previewed: Mapping[str, str | None], configs: Mapping[str, str],
                applied: Mapping[str, AppliedShard | None], *, fleet_reshaped: bool = False) -> ShardDiff:
    """The plan diff: a shard stack (`previewed`: stack -> the inputs digest of the share the
    fleet stack's preview computed, in the order they run) is unchanged only when its last
    successful update recorded that digest and the config it now has (`configs`: stack ->
    the driver's digest of its config). Anything the diff cannot rule out is previewed:
    no record, an unreadable state, a failed last update, a fleet stack preview that
    creates, replaces or deletes resources (`fleet_reshaped`)."""
    preview: dict[str, str] = {}
    unchanged: list[str] = []
    for stack, digest_now in previewed.items():
        record = applied.get(stack)
        if fleet_reshaped:
            preview[stack] = "the fleet stack's preview creates, replaces or deletes resources"
        elif record is None:
            preview[stack] = "its state was not read"
        elif record.unknown is not None:
            preview[stack] = record.unknown
        elif digest_now is None:
            preview[stack] = "the fleet stack's preview gave no digest of its share"
        elif record.inputs is None:
            preview[stack] = "its last update recorded no applied digest"
        elif record.from_config != configs.get(stack):
            preview[stack] = "its config changed since it was applied"
        elif record.inputs != digest_now:
            preview[stack] = "its share, the manifests it reads or the program changed"
        else:
            unchanged.append(stack)
    return ShardDiff(preview, unchanged)


def applied_from(history: Any, outputs: Any) -> AppliedShard:
    """An AppliedShard from `pulumi stack history --json --page-size 1` and `pulumi stack
    output --json` (None: not read, because the history already says it is unknown)."""
    if not isinstance(history, list) or not history:
        return AppliedShard(unknown="it was never applied")
    last = history[0] if isinstance(history[0], Mapping) else {}
    kind, result = last.get("kind"), last.get("result")
    if kind != "update" or result != "succeeded":
        return AppliedShard(unknown=f"its last operation was {kind or 'unknown'} ({result or 'no result'}), "
                                    "not a successful update")
    record = outputs.get(APPLIED_OUTPUT) if isinstance(outputs, Mapping) else None
    if not isinstance(record, Mapping) or not isinstance(record.get("inputs"), str):
        return AppliedShard()
    from_config = record.get("fromConfig")
    return AppliedShard(str(record["inputs"]), str(from_config) if from_config is not None else None)


def layout_of(data: Any) -> StackLayout:
    try:
        return StackLayout.from_json(data)
    except PlanError as exc:
        raise DriverError(f"the fleet stack's layout output: {exc}") from None


class _Workspace(auto.LocalWorkspace):
    """The Automation API selects a stack (one more `pulumi` process) before every
    operation, though each names its stack with --stack anyway: skipped for the stacks
    the driver knows exist. With a hundred shard stacks that is a hundred CLI starts."""

    def __init__(self, known: set[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.known = known

    def select_stack(self, stack_name: str) -> None:
        if stack_name not in self.known:
            super().select_stack(stack_name)


class SplitFleet:
    def __init__(self, project: Path, fleet_stack: str, *, parallel: int, out: TextIO,
                 verbose: bool = False, skip_checkpoints: bool = False, every_shard: bool = False) -> None:
        self.project = project
        self.fleet_stack = fleet_stack
        self.parallel = max(1, parallel)
        self.out = out
        self.verbose = verbose
        self.up_env = dict(PREVIEW_ENV) if skip_checkpoints else {}
        self.every_shard = every_shard
        self.command = TrackedPulumiCommand()
        self.known: set[str] = set()    # stacks that exist

    # ---------------------------------------------------------------- stacks and config

    def _workspace(self, env: Mapping[str, str] | None = None) -> auto.LocalWorkspace:
        secrets = "passphrase" if ("PULUMI_CONFIG_PASSPHRASE" in os.environ
                                   or "PULUMI_CONFIG_PASSPHRASE_FILE" in os.environ) else None
        return _Workspace(self.known, work_dir=str(self.project), env_vars=dict(env or {}),
                          secrets_provider=secrets, pulumi_command=self.command)

    def _stack(self, name: str, env: Mapping[str, str] | None = None, *, create: bool = False) -> auto.Stack:
        workspace = self._workspace(env)
        try:
            stack = (auto.Stack.create_or_select if create else auto.Stack.select)(name, workspace)
        except auto.errors.StackNotFoundError:
            raise DriverError(f"no stack {name}: create it (`pulumi stack init {name}`) with its config in "
                              f"stacks/Pulumi.{name}.yaml") from None
        self.known.add(name)
        return stack

    def _cli(self, args: list[str], stdin: str | None = None) -> str:
        return self.command.run(args, str(self.project), {}, stdin=stdin).stdout

    def config_of(self, stack: str) -> dict[str, Any]:
        """`pulumi config --json` of a stack, secrets shown (they stay in this process)."""
        return dict(json.loads(self._cli(["config", "--show-secrets", "--json", "--stack", stack]) or "{}"))

    def split_block(self, config: Mapping[str, Any]) -> dict[str, Any] | None:
        return fleet_split_block(self.fleet_stack, config)

    def shard_config(self, fleet_config: Mapping[str, Any], shard: str, clusters: Sequence[str]) -> dict[str, Any]:
        return shard_config(self.fleet_stack, fleet_config, shard, clusters, self._config_digest(shard, clusters))

    def _config_file(self, stack: str) -> Path:
        return self.project / "stacks" / f"Pulumi.{stack}.yaml"

    def _config_digest(self, shard: str, clusters: Sequence[str]) -> str:
        """The fleet stack's config file (secrets as ciphertext) and the shard: when a shard
        stack's config was made from the same, it needs no sync (no `pulumi` calls)."""
        return digest([self._config_file(self.fleet_stack).read_text(encoding="utf-8"), shard, list(clusters)])

    def in_sync(self, stack: str, shard: str, clusters: Sequence[str]) -> bool:
        try:
            config = yaml.safe_load(self._config_file(stack).read_text(encoding="utf-8")) or {}
            block = (config.get("config") or {}).get(SPLIT_KEY) or {}
            return bool(block.get("fromConfig") == self._config_digest(shard, clusters))
        except (OSError, yaml.YAMLError, AttributeError):
            return False

    def sync(self, stack: str, desired: Mapping[str, Any]) -> None:
        """Make a stack's config `desired`: plain values through `config set-all --json`,
        each secret through `config set --secret` on stdin (never on a command line)."""
        current = self.config_of(stack)
        gone = sorted(set(current) - set(desired))
        if gone:
            self._cli(["config", "rm-all", "--stack", stack, *gone])
        changed = {k: v for k, v in desired.items() if _comparable(current.get(k)) != _comparable(v)}
        plain = {k: v for k, v in changed.items() if not v.get("secret")}
        if plain:
            self._cli(["config", "set-all", "--stack", stack, "--json", json.dumps(plain)])
        for key, value in sorted(changed.items()):
            if value.get("secret"):
                self._cli(["config", "set", key, "--secret", "--stack", stack], stdin=value["value"])

    # ---------------------------------------------------------------- running stacks

    def _run(self, name: str, verb: str, env: Mapping[str, str] | None = None) -> Outcome:
        retried = False
        while True:
            start = time.perf_counter()
            try:
                stack = self._stack(name, env, create=verb != "destroy")
                if verb == "preview":
                    preview = stack.preview(color="never", suppress_progress=True, suppress_outputs=True)
                    changes, text = preview.change_summary, preview.stdout
                elif verb == "up":
                    up = stack.up(color="never", suppress_progress=True, suppress_outputs=True)
                    changes, text = up.summary.resource_changes or {}, up.stdout
                else:
                    destroyed = stack.destroy(color="never", suppress_progress=True)
                    changes, text = destroyed.summary.resource_changes or {}, destroyed.stdout
            except auto.errors.StackNotFoundError as exc:
                if name in self.known and not retried and verb != "destroy":
                    # its config file is there but the stack is not (another backend?): create it
                    self.known.discard(name)
                    retried = True
                    continue
                return Outcome(name, ok=False, seconds=time.perf_counter() - start, text=_tail(str(exc)))
            except auto.errors.CommandError as exc:
                return Outcome(name, ok=False, seconds=time.perf_counter() - start, text=_tail(str(exc)))
            except DriverError as exc:
                return Outcome(name, ok=False, seconds=time.perf_counter() - start, text=str(exc))
            return Outcome(name, ok=True, seconds=time.perf_counter() - start,
                           changes={str(k): int(v) for k, v in changes.items()}, text=text)

    def _report(self, outcome: Outcome, done: int, total: int) -> None:
        self.out.write(f"[{done}/{total}] {outcome.line()}\n")
        if not outcome.ok or self.verbose:
            self.out.write(_indent(outcome.text) + "\n")
        self.out.flush()

    def _run_all(self, groups: Sequence[Sequence[str]], verb: str, env: Mapping[str, str] | None = None
                 ) -> list[Outcome]:
        """Each group's stacks in parallel (at most `parallel` at once), group after group;
        a group starts only when the one before succeeded."""
        outcomes: list[Outcome] = []
        total = sum(len(g) for g in groups)
        pool = ThreadPoolExecutor(max_workers=self.parallel)
        try:
            for group in groups:
                futures = [pool.submit(self._run, name, verb, env) for name in group]
                for future in futures:
                    outcome = future.result()
                    outcomes.append(outcome)
                    self._report(outcome, len(outcomes), total)
                if not all(o.ok for o in outcomes):
                    break
        except BaseException:
            # Ctrl-C, SIGTERM, SIGHUP: stop the engines before waiting for their threads.
            pool.shutdown(wait=False, cancel_futures=True)
            self.command.stop_all()
            raise
        finally:
            pool.shutdown(wait=True)
        return outcomes

    def _shards(self, layout: StackLayout, fleet_config: Mapping[str, Any]) -> tuple[list[str], list[str]]:
        first, last = layout.order()
        for shard in [*first, *last]:
            name = shard_stack(self.fleet_stack, shard)
            if self.in_sync(name, shard, layout.shards[shard]):
                self.known.add(name)   # made by an earlier run; an operation on it says if it is gone
                continue
            self._stack(name, create=True)
            self.sync(name, self.shard_config(fleet_config, shard, layout.shards[shard]))
        return [shard_stack(self.fleet_stack, s) for s in first], [shard_stack(self.fleet_stack, s) for s in last]

    # ---------------------------------------------------------------- verbs

    def _fleet_config(self) -> dict[str, Any]:
        self._stack(self.fleet_stack, create=True)   # its config is the user's stacks/Pulumi.<name>.yaml
        return self.config_of(self.fleet_stack)

    def up(self) -> bool:
        fleet_config = self._fleet_config()
        fleet = self._run_all([[self.fleet_stack]], "up", self.up_env)
        if not fleet[-1].ok or self.split_block(fleet_config) is None:
            return fleet[-1].ok
        layout = layout_of(self._stack(self.fleet_stack).outputs()[LAYOUT_OUTPUT].value)
        first, last = self._shards(layout, fleet_config)
        return all(o.ok for o in self._run_all([first, last], "up", self.up_env))

    def preview(self) -> bool:
        fleet_config = self._fleet_config()
        if self.split_block(fleet_config) is None:
            return all(o.ok for o in self._run_all([[self.fleet_stack]], "preview", PREVIEW_ENV))
        with tempfile.TemporaryDirectory(prefix="modelplane-shares-") as tmp:
            shares_file = os.path.join(tmp, "shares.json")
            env = {**PREVIEW_ENV, SHARES_FILE_ENV: shares_file}
            fleet = self._run_all([[self.fleet_stack]], "preview", env)
            if not fleet[-1].ok:
                return False
            self.out.write(_diagnostics(fleet[-1].text))
            try:
                with open(shares_file, encoding="utf-8") as fh:
                    layout = layout_of(json.load(fh).get(LAYOUT_OUTPUT))
            except OSError:
                raise DriverError("the fleet stack's preview wrote no shares: its placement was not known "
                                  "(an input unknown at preview time?)") from None
            first, last = self._shards(layout, fleet_config)
            stacks = [*first, *last]
            if not self.every_shard:
                stacks = self._changed(layout, stacks, fh_digests(shares_file), fleet[-1].changes)
            return all(o.ok for o in self._run_all([stacks], "preview", env)) if stacks else True

    def applied(self, stack: str) -> AppliedShard:
        """What a shard stack last applied, from its state (two `pulumi` calls at most)."""
        try:
            history = json.loads(self._cli(["stack", "history", "--json", "--page-size", "1", "--stack", stack])
                                 or "[]")
            if not history or history[0].get("kind") != "update" or history[0].get("result") != "succeeded":
                return applied_from(history, None)
            outputs = json.loads(self._cli(["stack", "output", "--json", "--stack", stack]) or "{}")
        except auto.errors.CommandError as exc:
            first = next((ln for ln in str(exc).splitlines() if "error" in ln.lower()), "").strip()
            return AppliedShard(unknown=f"its state could not be read{': ' + first if first else ''}")
        except (ValueError, AttributeError, IndexError, TypeError):
            return AppliedShard(unknown="its state could not be read: `pulumi stack` printed no JSON")
        return applied_from(history, outputs)

    def _changed(self, layout: StackLayout, stacks: Sequence[str], digests: Mapping[str, str],
                 fleet_changes: Mapping[str, int]) -> list[str]:
        """The shard stacks the plan diff cannot prove unchanged; prints the diff's summary."""
        shard_of_stack = {shard_stack(self.fleet_stack, s): s for s in layout.shards}
        configs = {st: self._config_digest(shard_of_stack[st], layout.shards[shard_of_stack[st]]) for st in stacks}
        with ThreadPoolExecutor(max_workers=self.parallel) as pool:
            applied = dict(zip(stacks, pool.map(self.applied, stacks), strict=True))
        diff = diff_shards({st: digests.get(shard_of_stack[st]) for st in stacks}, configs, applied,
                           fleet_reshaped=any(fleet_changes.get(k) for k in FLEET_RESHAPING))
        self.out.write(diff.lines(len(stacks) if self.verbose else SHOWN))
        self.out.flush()
        return [st for st in stacks if st in diff.preview]

    def destroy(self, *, remove: bool = False) -> bool:
        outputs = self._stack(self.fleet_stack).outputs()
        stacks: list[list[str]] = []
        if LAYOUT_OUTPUT in outputs:
            first, last = layout_of(outputs[LAYOUT_OUTPUT].value).order()
            stacks = [[shard_stack(self.fleet_stack, s) for s in last],
                      [shard_stack(self.fleet_stack, s) for s in first]]
        outcomes = self._run_all([*stacks, [self.fleet_stack]], "destroy")
        ok = all(o.ok for o in outcomes)
        if ok and remove:
            for name in [n for group in stacks for n in group]:
                self._workspace().remove_stack(name)
        return ok


def fleet_split_block(fleet_stack: str, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The fleet stack's `split` block from `pulumi config --json`; None: a one-stack fleet."""
    entry = config.get(SPLIT_KEY)
    if entry is None:
        return None
    block = entry.get("objectValue") or json.loads(entry.get("value") or "{}")
    if not isinstance(block, dict) or block.get("role") != "fleet":
        raise DriverError(f"stack {fleet_stack}: split.role must be fleet (the driver runs a fleet "
                          "stack and creates its shard stacks)")
    return block


def shard_config(fleet_stack: str, fleet_config: Mapping[str, Any], shard: str, clusters: Sequence[str],
                 from_config: str) -> dict[str, Any]:
    """The fleet stack's config (`pulumi config --json` entries) for one shard: its `split`
    block names the shard and the fleet config it was made from (`from_config`), and only
    its clusters' kubeconfigs travel."""
    block = dict(fleet_split_block(fleet_stack, fleet_config) or {})
    block.update(role="shard", fleetStack=fleet_stack, shard=shard, fromConfig=from_config)
    config = {k: dict(v) for k, v in fleet_config.items() if k != SPLIT_KEY}
    config[SPLIT_KEY] = {"value": json.dumps(block, sort_keys=True), "objectValue": block, "secret": False}
    kubeconfigs = config.get(KUBECONFIGS_KEY)
    if kubeconfigs is not None:
        every = kubeconfigs.get("objectValue") or json.loads(kubeconfigs.get("value") or "{}")
        mine = {c: v for c, v in every.items() if c in clusters}
        config[KUBECONFIGS_KEY] = {"value": json.dumps(mine, sort_keys=True), "secret": True}
    return config


def fh_digests(shares_file: str) -> dict[str, str]:
    """Each shard's inputs digest from the shares file the fleet stack's preview wrote."""
    try:
        with open(shares_file, encoding="utf-8") as fh:
            digests = json.load(fh).get(DIGESTS_KEY) or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in digests.items()} if isinstance(digests, Mapping) else {}


def _bounded(names: Sequence[str], shown: int) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def _comparable(entry: Any) -> Any:
    if entry is None:
        return None
    return (entry.get("secret", False), entry.get("objectValue", entry.get("value")))


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())


def _diagnostics(stdout: str) -> str:
    """The Diagnostics section of the fleet stack's preview: the placement table (what
    `modelplane plan` prints) and a warning per shortfall."""
    lines = stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Diagnostics:")), None)
    if start is None:
        return ""
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("Resources:", "Outputs:"))),
               len(lines))
    return "\n".join(lines[start:end]).rstrip() + "\n"
