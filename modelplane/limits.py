"""Bounds on every input the commands and the program read (docs/inputs.md explains them).

An input past a bound is refused with an error naming the file and the bound, before
the work it would cause: nothing here is a soft limit. The values leave a wide margin
over real fleets (a generated 1,000-cluster, 10,000-replica fleet is under 1 MB of YAML
and its `plan --json` under 4 MB).
"""

from __future__ import annotations

MIB = 1024 * 1024

# Manifests (YAML): per file, all files of one load together, and how many files.
MAX_MANIFEST_FILE_BYTES = 16 * MIB
MAX_MANIFEST_TOTAL_BYTES = 256 * MIB
MAX_MANIFEST_FILES = 10_000
# Nesting of mappings and sequences in one YAML document (a manifest needs about 15).
MAX_YAML_DEPTH = 100
# Values in one YAML document once aliases are expanded (a billion-laughs bound).
MAX_YAML_NODES = 2_000_000
# Digits of a YAML integer; Kubernetes API integers are int64 (19 digits).
MAX_INT_DIGITS = 32

# JSON inputs: `--previous`, `--observed`, `lint --config`.
MAX_JSON_FILE_BYTES = 64 * MIB
# Nesting of objects and arrays (the placement schema needs 6).
MAX_JSON_DEPTH = 64

# An engine's /metrics response (modelplane.autoscale.exposition): a vLLM or SGLang engine
# writes tens of KB; many LoRA adapters or engines per pod stay far below these.
MAX_METRICS_RESPONSE_BYTES = 4 * MIB
MAX_METRICS_LINE_CHARS = 16 * 1024
MAX_METRICS_SAMPLES = 50_000
# Samples of one family the autoscaler reads (a series per model and engine, ~20 buckets
# each for a histogram): past it the pod's metrics are missing, not parsed on.
MAX_METRICS_FAMILY_SAMPLES = 1_000
# Seconds one autoscaling pass may spend parsing the pods' responses (all of them): a pod
# left unparsed by then is missing, with the reason (modelplane.autoscale.scraped.from_pods).
MAX_METRICS_PARSE_SECONDS = 3.0
# A `plan --metrics` file: deployments it may name (each with at most the four metric types).
MAX_METRICS_FILE_DEPLOYMENTS = 10_000
# Kubernetes clients (modelplane/kube): what one cluster read may cost, whatever the
# kubeconfig or the API server does.
KIB = 1024
MAX_KUBECONFIG_BYTES = 4 * MIB            # kubectl's own are a few KiB; embedded CA bundles ~200 KiB
MAX_TOKEN_FILE_BYTES = 64 * KIB           # a service-account token is ~1 KiB
MAX_PEM_FILE_BYTES = 4 * MIB              # a CA bundle (the system one is ~200 KiB)
MAX_PLUGIN_OUTPUT_BYTES = 1 * MIB         # an ExecCredential is ~2 KiB
MAX_ANSWER_BYTES = 16 * MIB               # one response, decompressed (a 500-node page is ~2.5 MB)
MAX_CLUSTER_READ_BYTES = 256 * MIB        # every response of one cluster read together, decompressed
