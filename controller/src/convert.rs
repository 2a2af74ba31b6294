//! Services to the allocator's plain types, field by field as MetalLB
//! reads them. Pools need no conversion here: they are the model's
//! ([`api::validate::ip_address_pool`]).
//!
//! Pure: no client, no clock. `controller plan` and the reconciler both use
//! these, so a file and a cluster are read the same way.

use std::collections::BTreeMap;
use std::net::IpAddr;

use api::addr::AddressRange;
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, Service as K8sService, ServicePort, ServiceSpec,
};
use kube::ResourceExt;

use crate::alloc::{Family, FamilyPolicy, Pool, Port, Protocol, Service, ServiceKey};

/// `metallb.io/loadBalancerIPs`: requested addresses, comma-separated.
pub const ANNOTATION_LOAD_BALANCER_IPS: &str = "metallb.io/loadBalancerIPs";
/// `metallb.io/address-pool`: the pool to allocate from.
pub const ANNOTATION_ADDRESS_POOL: &str = "metallb.io/address-pool";
/// `metallb.io/allow-shared-ip`: the sharing key.
pub const ANNOTATION_ALLOW_SHARED_IP: &str = "metallb.io/allow-shared-ip";
/// `metallb.io/ip-allocated-from-pool`: written by the controller.
pub const ANNOTATION_ALLOCATED_FROM_POOL: &str = "metallb.io/ip-allocated-from-pool";
/// The deprecated prefix of every annotation above, still read.
const DEPRECATED_PREFIX: &str = "metallb.universe.tf/";

/// What the controller makes of a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// A LoadBalancer service of our class, ready for the allocator.
    LoadBalancer(Box<Service>),
    /// Not `type: LoadBalancer`: holds no address.
    NotLoadBalancer,
    /// A LoadBalancer service of another `loadBalancerClass`: not ours.
    OtherClass(Option<String>),
    /// Ours, but its annotations or spec cannot be honoured
    /// (MetalLB's `LoadBalancerFailed`); the message says why.
    Invalid(String),
}

/// Reads a Service. `lb_class` is the class we serve (`None`: services
/// without a class, MetalLB's default); `namespace_labels` are the labels of
/// its namespace.
pub fn service(
    svc: &K8sService,
    lb_class: Option<&str>,
    namespace_labels: &BTreeMap<String, String>,
) -> Reading {
    let Some(spec) = svc.spec.as_ref() else {
        return Reading::NotLoadBalancer;
    };
    if spec.type_.as_deref() != Some("LoadBalancer") {
        return Reading::NotLoadBalancer;
    }
    if spec.load_balancer_class.as_deref() != lb_class {
        return Reading::OtherClass(spec.load_balancer_class.clone());
    }
    let annotations = svc.annotations();
    let requested = match requested_ips(
        annotation_entry(annotations, "loadBalancerIPs"),
        spec.load_balancer_ip.as_deref(),
    ) {
        Ok(r) => r,
        Err(msg) => return Reading::Invalid(msg),
    };
    let mut families = Vec::new();
    for f in spec.ip_families.iter().flatten() {
        match f.as_str() {
            "IPv4" => families.push(Family::V4),
            "IPv6" => families.push(Family::V6),
            other => return Reading::Invalid(format!("unknown ipFamily {other:?}")),
        }
    }
    let policy = match spec.ip_family_policy.as_deref() {
        None | Some("SingleStack") => FamilyPolicy::SingleStack,
        Some("PreferDualStack") => FamilyPolicy::PreferDualStack,
        Some("RequireDualStack") => FamilyPolicy::RequireDualStack,
        Some(other) => return Reading::Invalid(format!("unknown ipFamilyPolicy {other:?}")),
    };
    let mut ports = Vec::new();
    for p in spec.ports.iter().flatten() {
        let protocol = match p.protocol.as_deref() {
            None | Some("TCP") => Protocol::Tcp,
            Some("UDP") => Protocol::Udp,
            Some("SCTP") => Protocol::Sctp,
            Some(other) => return Reading::Invalid(format!("unknown port protocol {other:?}")),
        };
        let Ok(port) = u16::try_from(p.port) else {
            return Reading::Invalid(format!("port {} out of range", p.port));
        };
        ports.push(Port { port, protocol });
    }
    let current = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.as_deref()?.parse().ok())
        .collect();
    Reading::LoadBalancer(Box::new(Service {
        key: key(svc),
        labels: svc.labels().clone(),
        namespace_labels: namespace_labels.clone(),
        families,
        policy,
        requested,
        pool: annotation(annotations, "address-pool").map(str::to_owned),
        sharing_key: annotation(annotations, "allow-shared-ip").map(str::to_owned),
        ports,
        etp_local: spec.external_traffic_policy.as_deref() == Some("Local"),
        selector: spec.selector.clone().unwrap_or_default(),
        current,
    }))
}

/// The namespace and name of a Service (namespace `default` if unset).
pub fn key(svc: &K8sService) -> ServiceKey {
    key_of(svc)
}

/// [`key`] of any object: a packed [`crate::watched::Service`] too.
pub fn key_of(svc: &impl kube::Resource) -> ServiceKey {
    ServiceKey {
        namespace: svc.namespace().unwrap_or_else(|| "default".to_owned()),
        name: svc.name_any(),
    }
}

/// `svc` as the controller writes it back: MetalLB's pool annotation set
/// to `pool` (the deprecated one removed) and `ips` as its ingress (none:
/// both cleared). The reconciler `PUT`s this to the status subresource;
/// `kubectl ferrolb diff` builds the Services the speakers would read.
pub fn written(svc: &K8sService, pool: Option<&str>, ips: &[IpAddr]) -> K8sService {
    let mut obj = svc.clone();
    let annotations = obj
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    annotations.remove("metallb.universe.tf/ip-allocated-from-pool");
    match pool {
        Some(pool) => {
            annotations.insert(ANNOTATION_ALLOCATED_FROM_POOL.to_owned(), pool.to_owned());
        }
        None => {
            annotations.remove(ANNOTATION_ALLOCATED_FROM_POOL);
        }
    }
    let status = obj.status.get_or_insert_with(Default::default);
    let lb = status.load_balancer.get_or_insert_with(Default::default);
    lb.ingress = (!ips.is_empty()).then(|| {
        ips.iter()
            .map(|ip| LoadBalancerIngress {
                ip: Some(ip.to_string()),
                ..LoadBalancerIngress::default()
            })
            .collect()
    });
    obj
}

/// `svc` cut to what the controller reads and what its write must carry,
/// for the watch cache (issue 18: the cache held every Service whole).
///
/// Dropped: `metadata.managedFields` (the apiserver keeps the stored ones
/// when an update carries none) and every `spec` field [`service`] does not
/// read (the Service status strategy takes the whole spec from the stored
/// object, so the `PUT` to `/status` that [`written`] builds cannot change
/// it). Kept: the rest of `metadata` (labels, annotations, owners,
/// finalizers: the write carries them back) and the whole `status`.
pub fn trim(svc: &mut K8sService) {
    svc.metadata.managed_fields = None;
    if let Some(spec) = svc.spec.take() {
        svc.spec = Some(ServiceSpec {
            type_: spec.type_,
            load_balancer_class: spec.load_balancer_class,
            load_balancer_ip: spec.load_balancer_ip,
            ip_families: spec.ip_families,
            ip_family_policy: spec.ip_family_policy,
            ports: spec.ports.map(|ports| {
                ports
                    .into_iter()
                    .map(|p| ServicePort {
                        port: p.port,
                        protocol: p.protocol,
                        ..ServicePort::default()
                    })
                    .collect()
            }),
            external_traffic_policy: spec.external_traffic_policy,
            selector: spec.selector,
            ..ServiceSpec::default()
        });
    }
}

/// The addresses in `status.loadBalancer.ingress`, as written.
pub fn ingress_ips(svc: &K8sService) -> Vec<String> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone())
        .collect()
}

/// A `metallb.io/<name>` annotation, else its deprecated
/// `metallb.universe.tf/<name>` form (MetalLB's `valueForAnnotation`).
fn annotation<'a>(annotations: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    annotation_entry(annotations, name).map(|(_, v)| v)
}

/// [`annotation`] with the key it was found under.
fn annotation_entry<'a>(
    annotations: &'a BTreeMap<String, String>,
    name: &str,
) -> Option<(&'a str, &'a str)> {
    annotations
        .get_key_value(&format!("metallb.io/{name}"))
        .or_else(|| annotations.get_key_value(&format!("{DEPRECATED_PREFIX}{name}")))
        .map(|(k, v)| (k.as_str(), v.as_str()))
}

/// MetalLB's `getDesiredLbIPs`: the annotation (its key and value) or
/// `spec.loadBalancerIP`, not both.
///
/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is refused, naming where
/// it was written and the IPv4 address to request instead. MetalLB (Go's
/// `net.ParseIP`) reads it as the IPv4 address; ferrolb refuses it as its
/// pools do (the CRDs refuse it, as Kubernetes' CEL `isIP` does), so a
/// requested address is always written as the Service's status shows it.
fn requested_ips(
    annotation: Option<(&str, &str)>,
    spec_ip: Option<&str>,
) -> Result<Vec<IpAddr>, String> {
    let spec_ip = spec_ip.filter(|s| !s.is_empty());
    let not_mapped = |field: &str, written: &str, ip: IpAddr| match api::addr::ipv4_mapped(ip) {
        Some(ipv4) => Err(format!(
            "{field}: {written:?} is an IPv4-mapped IPv6 address: request it as IPv4 ({ipv4})"
        )),
        None => Ok(ip),
    };
    match (annotation.filter(|(_, v)| !v.is_empty()), spec_ip) {
        (None, None) => Ok(Vec::new()),
        (Some(_), Some(_)) => Err(format!(
            "service can not have both {ANNOTATION_LOAD_BALANCER_IPS} and svc.Spec.LoadBalancerIP"
        )),
        (Some((key, list)), None) => list
            .split(',')
            .map(|s| {
                let s = s.trim();
                let ip = s
                    .parse()
                    .map_err(|_| format!("invalid {ANNOTATION_LOAD_BALANCER_IPS}: {list:?}"))?;
                not_mapped(key, s, ip)
            })
            .collect(),
        (None, Some(ip)) => {
            let written = ip.trim();
            let parsed = written
                .parse()
                .map_err(|_| format!("invalid spec.loadBalancerIP {ip:?}"))?;
            not_mapped("spec.loadBalancerIP", written, parsed).map(|ip| vec![ip])
        }
    }
}

/// Per-family address counts of a pool, as `IPAddressPool.status` carries
/// them (MetalLB saturates huge IPv6 pools at `i64::MAX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capacity {
    /// Usable IPv4 addresses.
    pub v4: u128,
    /// Usable IPv6 addresses.
    pub v6: u128,
}

/// Usable addresses of a pool per family: every address of its ranges,
/// less the `.0` and `.255` ones with `avoidBuggyIPs` (MetalLB's
/// `poolCount`).
pub fn capacity(p: &Pool) -> Capacity {
    let mut c = Capacity::default();
    for r in &p.ranges {
        match Family::of(r.first()) {
            Family::V4 => {
                let mut n = r.len();
                if p.avoid_buggy_ips {
                    n -= buggy_in(r);
                }
                c.v4 = c.v4.saturating_add(n);
            }
            Family::V6 => c.v6 = c.v6.saturating_add(r.len()),
        }
    }
    c
}

/// IPv4 addresses ending in `.0` or `.255` within an IPv4 range.
fn buggy_in(r: &AddressRange) -> u128 {
    let (IpAddr::V4(first), IpAddr::V4(last)) = (r.first(), r.last()) else {
        return 0;
    };
    let (a, b) = (u64::from(u32::from(first)), u64::from(u32::from(last)));
    // Count x in [a, b] with x % 256 == k, for k = 0 and 255.
    let count = |k: u64| {
        let upto = |n: u64| if n < k { 0 } else { (n - k) / 256 + 1 };
        upto(b) - if a == 0 { 0 } else { upto(a - 1) }
    };
    u128::from(count(0) + count(255))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A Service with every field the controller reads or trims, and some
    /// it neither reads nor trims (shared with `watched`'s tests).
    pub(crate) const FULL_SERVICE: &str = r#"
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  uid: u1
  resourceVersion: "42"
  creationTimestamp: "2026-11-01T00:00:00Z"
  labels: {app: web, team: a}
  annotations: {metallb.io/address-pool: p, metallb.io/allow-shared-ip: k, note: kept}
  finalizers: [example.com/hold]
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: owner, uid: u2}
  managedFields:
  - {manager: kubectl, operation: Update, apiVersion: v1, fieldsType: FieldsV1, fieldsV1: {"f:spec": {}}}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.10
  clusterIPs: [10.96.0.10]
  sessionAffinity: None
  internalTrafficPolicy: Cluster
  allocateLoadBalancerNodePorts: false
  externalTrafficPolicy: Local
  loadBalancerIP: 10.0.0.5
  loadBalancerClass: c
  selector: {app: web}
  ipFamilies: [IPv6, IPv4]
  ipFamilyPolicy: RequireDualStack
  ports:
  - {name: http, port: 80, targetPort: 8080, nodePort: 30080, protocol: TCP}
  - {port: 53, protocol: UDP}
  - {port: 9}
status:
  loadBalancer:
    ingress: [{ip: 10.0.0.5, ipMode: VIP}, {hostname: x.example}]
  conditions:
  - {type: Ready, status: "True", reason: r, message: m, lastTransitionTime: "2026-11-01T00:00:00Z"}
"#;

    fn svc(yaml: &str) -> K8sService {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn reads_metallb_annotations_and_spec() {
        let s = svc(r#"
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  labels: {app: web}
  annotations:
    metallb.universe.tf/loadBalancerIPs: "10.0.0.5, 2001:db8::5"
    metallb.io/address-pool: old-pool
    metallb.universe.tf/address-pool: ignored
    metallb.universe.tf/allow-shared-ip: key1
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {app: web}
  ipFamilies: [IPv6, IPv4]
  ipFamilyPolicy: RequireDualStack
  ports:
  - {port: 80}
  - {port: 53, protocol: UDP}
status:
  loadBalancer:
    ingress: [{ip: 10.0.0.5}, {hostname: x.example}]
"#);
        let Reading::LoadBalancer(s) = service(&s, None, &BTreeMap::new()) else {
            panic!("not read as a LoadBalancer");
        };
        assert_eq!(s.key.to_string(), "shop/web");
        assert_eq!(
            s.requested,
            [
                "10.0.0.5".parse::<IpAddr>().unwrap(),
                "2001:db8::5".parse().unwrap()
            ]
        );
        assert_eq!(s.pool.as_deref(), Some("old-pool"));
        assert_eq!(s.sharing_key.as_deref(), Some("key1"));
        assert_eq!(s.families, [Family::V6, Family::V4]);
        assert_eq!(s.policy, FamilyPolicy::RequireDualStack);
        assert!(s.etp_local);
        assert_eq!(
            s.ports[1],
            Port {
                port: 53,
                protocol: Protocol::Udp
            }
        );
        assert_eq!(s.current, ["10.0.0.5".parse::<IpAddr>().unwrap()]);
    }

    #[test]
    fn trimmed_reads_the_same_and_writes_back_its_metadata() {
        let full = svc(FULL_SERVICE);
        let mut trimmed = full.clone();
        trim(&mut trimmed);
        let labels = BTreeMap::from([("team".to_owned(), "a".to_owned())]);
        assert_eq!(
            service(&trimmed, None, &labels),
            service(&full, None, &labels)
        );
        assert_eq!(trimmed.metadata.managed_fields, None);
        let spec = trimmed.spec.as_ref().unwrap();
        assert_eq!(spec.cluster_ip, None);
        assert_eq!(spec.session_affinity, None);
        assert_eq!(spec.ports.as_ref().unwrap()[0].node_port, None);
        // What the PUT to /status carries back: all metadata but the
        // managed fields, and the whole status.
        let w = written(&trimmed, Some("p"), &["10.0.0.5".parse().unwrap()]);
        let mut want = full.metadata.clone();
        want.managed_fields = None;
        want.annotations
            .as_mut()
            .unwrap()
            .insert(ANNOTATION_ALLOCATED_FROM_POOL.into(), "p".into());
        assert_eq!(w.metadata, want);
        assert_eq!(
            w.status.as_ref().unwrap().conditions,
            full.status.as_ref().unwrap().conditions
        );
        // Trimming twice changes nothing.
        let mut again = trimmed.clone();
        trim(&mut again);
        assert_eq!(again, trimmed);
    }

    #[test]
    fn class_type_and_bad_requests() {
        let base = "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: n}\n";
        let cluster = svc(&format!("{base}spec: {{type: ClusterIP}}"));
        assert_eq!(
            service(&cluster, None, &BTreeMap::new()),
            Reading::NotLoadBalancer
        );
        let classed = svc(&format!(
            "{base}spec: {{type: LoadBalancer, loadBalancerClass: x}}"
        ));
        assert_eq!(
            service(&classed, None, &BTreeMap::new()),
            Reading::OtherClass(Some("x".into()))
        );
        assert!(matches!(
            service(&classed, Some("x"), &BTreeMap::new()),
            Reading::LoadBalancer(_)
        ));
        let both = svc(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  annotations: {metallb.io/loadBalancerIPs: 10.0.0.1}\nspec: {type: LoadBalancer, loadBalancerIP: 10.0.0.2}",
        );
        let Reading::Invalid(msg) = service(&both, None, &BTreeMap::new()) else {
            panic!("both accepted");
        };
        assert!(msg.contains("can not have both"), "{msg}");
        let bad = svc(&format!(
            "{base}spec: {{type: LoadBalancer, loadBalancerIP: banana}}"
        ));
        assert_eq!(
            service(&bad, None, &BTreeMap::new()),
            Reading::Invalid("invalid spec.loadBalancerIP \"banana\"".into())
        );
    }

    #[test]
    fn capacity_skips_buggy_ips() {
        let mut p = Pool::new(
            "p",
            &["10.0.0.0/23", "10.0.2.250-10.0.3.5", "2001:db8::/64"],
        )
        .unwrap();
        assert_eq!(
            capacity(&p),
            Capacity {
                v4: 512 + 12,
                v6: 1 << 64
            }
        );
        p.avoid_buggy_ips = true;
        // .0 and .255 of two /24s, then 10.0.2.255 and 10.0.3.0.
        assert_eq!(capacity(&p).v4, 512 + 12 - 4 - 2);
        let zero = Pool {
            avoid_buggy_ips: true,
            ..Pool::new("z", &["0.0.0.0-0.0.1.0"]).unwrap()
        };
        assert_eq!(capacity(&zero).v4, 257 - 3);
    }
}
