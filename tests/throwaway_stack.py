"""A throwaway Pulumi stack of this project for the engine and sim tests: its config file in
stacks/ and the stack, created together or not at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pulumi import automation as auto

REPO = Path(__file__).resolve().parents[1]


def create_throwaway_stack(name: str, config: dict[str, Any], env: dict[str, str], pulumi_home: str,
                           command: auto.PulumiCommand | None, written_by: str) -> tuple[auto.Stack, Path]:
    """stacks/Pulumi.<name>.yaml holding `config`, then the stack `name` (passphrase secrets,
    `env` for every engine run); the file is removed again when the stack cannot be created.
    The caller removes both at teardown."""
    config_file = REPO / "stacks" / f"Pulumi.{name}.yaml"
    config_file.write_text(f"# Throwaway stack written by {written_by}; removed at teardown.\n"
                           + yaml.safe_dump({"config": config}, sort_keys=True))
    opts = auto.LocalWorkspaceOptions(work_dir=str(REPO), pulumi_home=pulumi_home, env_vars=env,
                                      secrets_provider="passphrase", pulumi_command=command)
    try:
        stack = auto.create_stack(name, work_dir=str(REPO), opts=opts)
    except Exception:
        config_file.unlink(missing_ok=True)
        raise
    return stack, config_file
