"""How the program fails: a clean error naming the manifest, never a traceback.

The Python SDK has no `pulumi.ResourceError` (Node's has); its language host prints a
`pulumi.RunError` as a plain error and a traceback for anything else
(pulumi-language-python-exec). So every error of ours is a RunError, and this one also
names the resource it concerns, as Node's ResourceError does.
"""

from __future__ import annotations

import pulumi


class ResourceError(pulumi.RunError):
    def __init__(self, message: str, resource: pulumi.Resource | None = None) -> None:
        super().__init__(message)
        self.resource = resource
