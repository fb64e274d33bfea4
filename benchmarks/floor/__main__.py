"""The engine's floor for benchmarks/scale.py.

* `resources: N`: N plain ConfigMaps through one render-mode Kubernetes provider, nothing
  else: what any program registering that many resources pays on this engine build.
* `objects: DIR` (a `modelplane render` output): every object of every cluster
  directory, flat, through one render-mode provider per cluster, no components, no
  dependencies, no placement: what registering our objects costs, without our program.
"""

import os

import pulumi
import pulumi_kubernetes as k8s
import yaml

config = pulumi.Config()
out = config.require("renderDir")
objects = config.get("objects")
if objects:
    version = pulumi.ResourceOptions(version=k8s._utilities.get_version())
    for cluster in sorted(d for d in os.listdir(objects) if os.path.isdir(os.path.join(objects, d))):
        provider = k8s.Provider(f"{cluster}-k8s", render_yaml_to_directory=os.path.join(out, cluster))
        opts = pulumi.ResourceOptions.merge(pulumi.ResourceOptions(provider=provider), version)
        for file in sorted(os.listdir(os.path.join(objects, cluster))):
            with open(os.path.join(objects, cluster, file)) as fh:
                obj = yaml.load(fh, Loader=yaml.CSafeLoader)
            group, _, api = obj["apiVersion"].rpartition("/")
            meta = obj["metadata"]
            pulumi.CustomResource(f"kubernetes:{group or 'core'}/{api}:{obj['kind']}",
                                  f"{cluster}:{meta.get('namespace', '')}/{meta['name']}", obj, opts)
else:
    provider = k8s.Provider("render", render_yaml_to_directory=out)
    opts = pulumi.ResourceOptions(provider=provider)
    for i in range(config.require_int("resources")):
        k8s.core.v1.ConfigMap(f"cm-{i:05d}", metadata={"name": f"cm-{i:05d}", "namespace": "default"},
                              data={"index": str(i)}, opts=opts)
