#!/usr/bin/env python3
"""The controller's part of the file-mode lab: give Services their IPs.

Usage: plan-to-services.py PLAN.json SERVICES.yaml SUMMARY.tsv > OUT.yaml

PLAN.json is `controller plan -o json` over the demo directory. SERVICES.yaml
holds the demo's Services (and EndpointSlices), without status. The output is
the same documents, each assigned Service followed by the
status.loadBalancer.ingress the controller would write, for the speakers'
configuration directory.

SUMMARY.tsv gets one line per service IP for the lab script:
`namespace/name ip pool externalTrafficPolicy nodes-with-an-endpoint`
(nodes comma-separated, `-` when none).

Plain text, no YAML library: each Service document in SERVICES.yaml has no
`status:` and names itself with top-level `metadata:` lines `  name: X` and
`  namespace: Y` (as testdata/demo/services.yaml does).
"""

import json
import re
import sys


def main() -> int:
    plan_path, services_path, summary_path = sys.argv[1:4]
    with open(plan_path) as f:
        plan = json.load(f)
    assigned = {s["service"]: s for s in plan["services"] if s["status"] == "assigned"}
    with open(services_path) as f:
        docs = re.split(r"^---[ \t]*$", f.read(), flags=re.M)

    out, missing, policies, endpoints = [], [], {}, {}
    for doc in docs:
        kind = field(doc, "kind")
        key = f"{field(doc, '  namespace')}/{field(doc, '  name')}"
        if kind == "EndpointSlice":
            owner = re.search(r"kubernetes\.io/service-name: ([\w.-]+)", doc)
            key = f"{field(doc, '  namespace')}/{owner.group(1) if owner else ''}"
            nodes = re.findall(r"^\s+nodeName: (\S+)", doc, flags=re.M)
            endpoints.setdefault(key, []).extend(nodes)
        if kind == "Service":
            if re.search(r"^status:", doc, flags=re.M):
                sys.exit(f"plan-to-services: {key} already has a status")
            if key not in assigned:
                missing.append(key)
            else:
                ingress = "".join(f"      - ip: {ip}\n" for ip in assigned[key]["ips"])
                doc = doc.rstrip("\n") + "\nstatus:\n  loadBalancer:\n    ingress:\n" + ingress
                policies[key] = field(doc, "  externalTrafficPolicy") or "Cluster"
        out.append(doc)
    if missing:
        sys.exit(f"plan-to-services: the controller assigned no IP to {', '.join(missing)}")
    sys.stdout.write("---".join(out))
    with open(summary_path, "w") as f:
        for key, policy in sorted(policies.items()):
            nodes = ",".join(sorted(set(endpoints.get(key, [])))) or "-"
            for ip in assigned[key]["ips"]:
                f.write(f"{key}\t{ip}\t{assigned[key]['pool']}\t{policy}\t{nodes}\n")
    return 0


def field(doc: str, key: str) -> str:
    """The value of the line `key: value` (indentation included in key)."""
    m = re.search(rf"^{key}: (.+?)\s*$", doc, flags=re.M)
    return m.group(1) if m else ""


if __name__ == "__main__":
    sys.exit(main())
