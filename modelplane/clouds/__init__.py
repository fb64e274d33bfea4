"""Facts about the clouds the program provisions, as pure data and functions.

One home for every cloud rule the components, the renderers and the checks share: which
labels our EKS/GKE GPU node pools carry (`nodes`), EFA interfaces and launch-template rules
(`aws`), GPU networking per GKE machine family and node counts per zone (`gcp`). Each rule
names the upstream page or file it was checked against; the contract tests are named
after the rules.
"""
