"""Builds the Modelplane policy pack. Constructing PolicyPack starts the analyzer server
and blocks, so nothing else lives here (tests import policies.py instead)."""

from policies import PACK_NAME, build_policies
from pulumi_policy import EnforcementLevel, PolicyPack

PolicyPack(name=PACK_NAME, policies=build_policies(), enforcement_level=EnforcementLevel.ADVISORY)
