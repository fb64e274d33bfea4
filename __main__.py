"""The Modelplane fleet as a Pulumi program: stack config -> components.

Everything lives in `components/` and `providers/`; this file only reads config and
exports what people read after `pulumi up` (docs/pulumi-program.md).
"""

import os

import pulumi

from components import deploy_fleet
from components.config import fleet_args_from_config

# Pulumi runs the program from the project directory; __file__ is the surer anchor
# when a host sets it.
PROJECT_DIR = os.path.dirname(os.path.abspath(globals().get("__file__") or os.path.join(os.getcwd(), "__main__.py")))

fleet = deploy_fleet(fleet_args_from_config(PROJECT_DIR))
for key, value in fleet.outputs.items():
    pulumi.export(key, value)
