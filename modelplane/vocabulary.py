"""The ground floor's vocabulary: the label keys, well-known values and names every layer
speaks (the API, the scheduler, the observer, the renderers, the sim and the components).

It sits below all of them and imports nothing of ours, so no layer has to reach up into
the renderers (or the API) for a label key. A key lives here once; a module that needs one
imports it from here.
"""

from __future__ import annotations

from modelplane.json_types import JsonObject

# A Kubernetes object as plain JSON-like data: what every renderer returns.
Manifest = JsonObject

GROUP = "modelplane.ai/"
# Every cluster belongs to the group named by this key: its own name (the label the
# reference stamps on replicas and endpoints), so spreading by it spreads by cluster.
CLUSTER_NAME_KEY = GROUP + "cluster"

LABEL_DEPLOYMENT = GROUP + "deployment"
LABEL_CLUSTER = CLUSTER_NAME_KEY
LABEL_REPLICA_INDEX = GROUP + "replica-index"
LABEL_SERVING = GROUP + "serving"
LABEL_WORKLOAD = GROUP + "workload"
LABEL_ENGINE = GROUP + "engine"
LABEL_POOL = GROUP + "pool"
LABEL_LWS_ROLE = GROUP + "lws-role"
LABEL_CLIQUE_ROLE = GROUP + "clique-role"
LABEL_MODELCACHE = GROUP + "modelcache"
# On EFA pools' nodes: which driver manages their EFA interfaces ("dra" or "device-plugin").
LABEL_EFA = GROUP + "efa"
LABEL_NAMESPACE = GROUP + "namespace"
# Nodes of provisioned clusters' system pools (not GPU pools).
LABEL_ROLE = GROUP + "role"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_PD_ROLE = "llm-d.ai/role"
LABEL_KAI_QUEUE = "kai.scheduler/queue"
# Labels Grove sets on every pod of a PodCliqueSet (ai-dynamo/grove operator/api/common/labels.go).
LABEL_GROVE_SET_INDEX = "grove.io/podcliqueset-replica-index"
LABEL_GROVE_SCALING_GROUP = "grove.io/podcliquescalinggroup"
LABEL_GROVE_SCALING_GROUP_INDEX = "grove.io/podcliquescalinggroup-replica-index"
# Labels LeaderWorkerSet sets on every pod of a group (kubernetes-sigs/lws api/leaderworkerset/v1).
LABEL_LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
# Opt-in to vLLM's `--load-format modelexpress` on Dynamo clusters: stock vLLM images need the
# `modelexpress` package for that loader (k8s-api-shapes.md §5.3), so it is never assumed.
ANNOTATION_MODELEXPRESS = GROUP + "modelexpress"

MANAGED_BY = "modelplane"
PART_OF = "modelplane"
# Where the platform's own workloads run on every cluster: gateways, the pool labeler.
SYSTEM_NAMESPACE = "modelplane-system"
# Sources whose clusters and pools the program creates itself, labelling every pool's
# nodes with LABEL_POOL as it does; pools of any other source are labelled by a Job.
PROVISIONED_SOURCES = ("Kind", "EKS", "GKE")

# DRA drivers the program knows by name (their facts: modelplane.drivers, modelplane.clouds).
NVIDIA_DRIVER = "gpu.nvidia.com"
EXAMPLE_DRIVER = "gpu.example.com"
# AWS's EFA DRA driver, DRANET (aws/eks-charts stable/aws-dranet templates/deviceclass.yaml).
DRANET_DRIVER = "dra.net"
# The standard DRA device attribute both the NVIDIA GPU driver and DRANET publish: devices under
# one PCIe root share it (kubernetes/api resource/v1 types.go, StandardDeviceAttributePrefix).
ATTRIBUTE_PCIE_ROOT = "resource.kubernetes.io/pcieRoot"

# The port every engine container serves on (its Service, probes, the P/D router, /metrics reads).
ENGINE_PORT = 8000
