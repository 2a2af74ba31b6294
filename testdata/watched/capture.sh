#!/usr/bin/env bash
# Capture Nodes, Services and EndpointSlices as a real kube-apiserver serves
# them, the speaker's watched kinds (api::watched; the fuzz target
# watched_objects starts from these files).
#
# Usage:  testdata/watched/capture.sh
#
# Starts a private testenv cluster (testenv/up in its own state directory,
# dual-stack Service CIDRs), applies objects.yaml, sets the status parts
# through the status subresource (Node conditions and addresses, the
# Services' load-balancer ingress, as kubelets and the controller would),
# writes each object as `kubectl get -o json` prints it to
# <kind>-<name>.json here (with managedFields, which watch events carry
# and kubectl hides by default), and stops the cluster on exit (testenv/down),
# also on failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
export FERROLB_TESTENV_STATE
FERROLB_TESTENV_STATE=$(mktemp -d /tmp/ferrolb-watched-capture.XXXXXX)
rmdir "$FERROLB_TESTENV_STATE"
export FERROLB_TESTENV_SERVICE_CIDRS=10.96.0.0/16,fd00:96::/112
trap '"$root/testenv/down" >/dev/null || true' EXIT
eval "$("$root/testenv/up")"

kubectl apply --server-side -f "$here/objects.yaml" >/dev/null

status() { kubectl patch --subresource=status --type=merge "$@" >/dev/null; }
status node node1 -p '{"status": {
  "conditions": [
    {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
     "lastHeartbeatTime": "2026-11-29T16:00:00Z", "lastTransitionTime": "2026-11-29T15:00:00Z"},
    {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated",
     "lastHeartbeatTime": "2026-11-29T16:00:00Z", "lastTransitionTime": "2026-11-29T15:00:00Z"}],
  "addresses": [
    {"type": "InternalIP", "address": "192.168.10.11"},
    {"type": "InternalIP", "address": "fd00:10::11"},
    {"type": "ExternalIP", "address": "203.0.113.11"},
    {"type": "Hostname", "address": "node1"}],
  "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
  "nodeInfo": {"kubeletVersion": "v1.36.3", "architecture": "amd64", "operatingSystem": "linux",
               "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
               "osImage": "", "containerRuntimeVersion": "", "kubeProxyVersion": ""}}}'
status node node2 -p '{"status": {
  "conditions": [
    {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
     "lastHeartbeatTime": "2026-11-29T16:00:00Z", "lastTransitionTime": "2026-11-29T15:30:00Z"},
    {"type": "NetworkUnavailable", "status": "True", "reason": "NoRouteCreated",
     "lastHeartbeatTime": "2026-11-29T16:00:00Z", "lastTransitionTime": "2026-11-29T15:30:00Z"}],
  "addresses": [
    {"type": "Hostname", "address": "node2"},
    {"type": "InternalIP", "address": "192.168.10.12"}]}}'
status -n demo service web -p '{"status": {"loadBalancer": {"ingress": [
  {"ip": "198.51.100.10", "ipMode": "VIP"},
  {"ip": "2001:db8:100::10", "ipMode": "VIP"}]}}}'
status -n demo service local -p '{"status": {"loadBalancer": {"ingress": [
  {"hostname": "local.example.com"},
  {"ip": "198.51.100.20", "ports": [{"port": 443, "protocol": "TCP"}]}]}}}'

get() { kubectl get "$@" -o json --show-managed-fields >"$here/$1-${@: -1}.json"; }
get node node1
get node node2
get service -n demo web
get service -n demo local
get service -n demo internal
get endpointslice -n demo web-ipv4
get endpointslice -n demo web-ipv6
get endpointslice -n demo local-empty
ls "$here"/*.json
