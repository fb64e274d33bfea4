"""Pulumi dynamic providers. Importing this package must have no side effects: the
provider process unpickles `providers.placement.PlacementProvider` by reference."""
