#!/usr/bin/env python3
"""The Kubernetes-mode lab's view of the Services the controller assigned.

Usage: kubectl get services,endpointslices -A -o json | k8s-services.py SUMMARY.tsv

Reads the List on standard input and writes SUMMARY.tsv in the format
plan-to-services.py writes in file mode, one line per service IP:
`namespace/name ip pool externalTrafficPolicy nodes-with-an-endpoint`
(nodes comma-separated, `-` when none). The pool is the controller's
`metallb.io/ip-allocated-from-pool` annotation.

Exits 1, writing nothing, while a LoadBalancer Service has no IP or pool yet
(the lab polls it until the controller has assigned them all).
"""

import json
import sys

POOL = "metallb.io/ip-allocated-from-pool"


def main() -> int:
    items = json.load(sys.stdin)["items"]
    endpoints: dict[str, set[str]] = {}
    for o in items:
        if o["kind"] != "EndpointSlice":
            continue
        meta = o["metadata"]
        svc = meta.get("labels", {}).get("kubernetes.io/service-name")
        for ep in o.get("endpoints") or []:
            if svc and ep.get("nodeName"):
                endpoints.setdefault(f"{meta['namespace']}/{svc}", set()).add(ep["nodeName"])

    lines, waiting = [], []
    for o in items:
        if o["kind"] != "Service" or o["spec"].get("type") != "LoadBalancer":
            continue
        meta = o["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        ingress = (o.get("status", {}).get("loadBalancer") or {}).get("ingress") or []
        pool = (meta.get("annotations") or {}).get(POOL)
        if not ingress or not pool:
            waiting.append(key)
            continue
        policy = o["spec"].get("externalTrafficPolicy", "Cluster")
        nodes = ",".join(sorted(endpoints.get(key, ()))) or "-"
        lines += [f"{key}\t{i['ip']}\t{pool}\t{policy}\t{nodes}\n" for i in ingress]
    if waiting:
        print(f"k8s-services: no IP yet for {', '.join(waiting)}", file=sys.stderr)
        return 1
    with open(sys.argv[1], "w") as f:
        f.writelines(sorted(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
