#!/usr/bin/python3
"""Strict validation of rendered Kubernetes manifests (kubectl kustomize output on stdin).

Every object is checked against the models of Debian's python3-kubernetes: a field the API does
not know, a value of the wrong type or a missing required field fails, as `kubectl apply
--validate=strict` would on a cluster. The models predate autoscaling/v2, so an
autoscaling/v2 HorizontalPodAutoscaler is checked against v2beta2, which has the same schema.
Prints one line per object; exits 1 on the first list of errors.
"""
import datetime
import re
import sys

import kubernetes.client as k8s
import yaml

KINDS = {
    ("apps/v1", "Deployment"): k8s.V1Deployment,
    ("v1", "Service"): k8s.V1Service,
    ("policy/v1", "PodDisruptionBudget"): k8s.V1PodDisruptionBudget,
    ("autoscaling/v2", "HorizontalPodAutoscaler"): k8s.V2beta2HorizontalPodAutoscaler,
    ("v1", "ConfigMap"): k8s.V1ConfigMap,
    ("v1", "Secret"): k8s.V1Secret,
}
PRIMITIVE = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}


def build(value, typ, path, errors):
    """Returns `value` as an instance of the model type string `typ`, appending to errors."""
    if value is None:
        return None
    m = re.fullmatch(r"list\[(.+)\]", typ)
    if m:
        if not isinstance(value, list):
            errors.append(f"{path}: expected a list, got {type(value).__name__}")
            return None
        return [build(v, m.group(1), f"{path}[{i}]", errors) for i, v in enumerate(value)]
    m = re.fullmatch(r"dict\(str, (.+)\)", typ)
    if m:
        if not isinstance(value, dict):
            errors.append(f"{path}: expected a map, got {type(value).__name__}")
            return None
        return {k: build(v, m.group(1), f"{path}.{k}", errors) for k, v in value.items()}
    if typ == "object":
        return value
    if typ in PRIMITIVE:
        if not isinstance(value, PRIMITIVE[typ]) or (typ != "bool" and isinstance(value, bool)):
            errors.append(f"{path}: expected {typ}, got {type(value).__name__} {value!r}")
        return value
    if typ in ("datetime", "date"):
        return value if isinstance(value, (str, datetime.date)) else errors.append(path)
    cls = getattr(k8s, typ)
    if not isinstance(value, dict):
        errors.append(f"{path}: expected an object ({typ}), got {type(value).__name__}")
        return None
    by_json = {j: a for a, j in cls.attribute_map.items()}
    kwargs = {}
    for key, v in value.items():
        if key not in by_json:
            errors.append(f"{path}.{key}: unknown field (in {typ})")
            continue
        attr = by_json[key]
        kwargs[attr] = build(v, cls.openapi_types[attr], f"{path}.{key}", errors)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as e:
        errors.append(f"{path}: {typ}: {e}")
        return None


def main():
    docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
    if not docs:
        sys.exit("k8s_validate: no objects on stdin")
    for doc in docs:
        key = (doc.get("apiVersion"), doc.get("kind"))
        name = (doc.get("metadata") or {}).get("name")
        if key not in KINDS:
            sys.exit(f"k8s_validate: {key} {name}: kind not known to this validator")
        errors = []
        build(doc, KINDS[key].__name__, f"{key[1]}/{name}", errors)
        if errors:
            print("\n".join(errors), file=sys.stderr)
            sys.exit(1)
        print(f"valid: {key[0]} {key[1]} {name}")


if __name__ == "__main__":
    main()
