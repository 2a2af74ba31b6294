//! The CRDs' address rules decide as Kubernetes' IP library did, on every
//! apiserver the README names (1.28 and later).
//!
//! Until Kubernetes 1.31 the CEL environment of CRD rules has no `isIP`,
//! `isCIDR`, `ip()` or `cidr()`; ferrolb's rules use RE2 patterns instead
//! (`api::crd`). Two tests:
//!
//! - `address_table`: a table of pool entries and peer addresses, IPv4 and
//!   IPv6, valid and not, with the verdicts of the IP library. It runs on the
//!   apiserver testenv starts: the current one by default, the oldest
//!   supported one when `scripts/test` sets `FERROLB_TESTENV_BIN` to what
//!   `testenv/build --oldest` built.
//! - `reference_*`: on an apiserver that has the IP library (1.31+), a
//!   reference CRD carries the rules as they were written with it; the
//!   production CRD and the reference must refuse exactly the same entries,
//!   for the table and for a few thousand generated ones.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use testenv::TestEnv;

const MANAGER: &str = "ferrolb-cel-compat-test";
const REFERENCE_GROUP: &str = "reference.ferrolb.test";

/// Pool entries and whether the IP library's rules took them.
const POOL_TABLE: &[(&str, bool)] = &[
    // IPv4 CIDRs: host bits may be set; lengths 0-32, no leading zero.
    ("10.0.0.0/24", true),
    ("10.0.0.1/24", true),
    ("0.0.0.0/0", true),
    ("255.255.255.255/32", true),
    ("10.0.0.0/33", false),
    ("10.0.0.0/024", false),
    ("10.0.0.0/+8", false),
    ("10.0.0.0/", false),
    ("10.0.0.0", false),
    ("010.0.0.0/8", false),
    ("10.0.0.256/24", false),
    ("10.0.0/24", false),
    ("10.0.0.0.0/24", false),
    (" 10.0.0.0/24", false),
    ("10.0.0.0/24 ", false),
    ("10.0.0.0/8/8", false),
    // IPv6 CIDRs.
    ("fc00::/64", true),
    ("FC00::/7", true),
    ("::/0", true),
    ("::/128", true),
    ("2001:db8:0:0:0:0:0:0/32", true),
    ("2001:0db8:0000:0000:0000:0000:0000:0001/128", true),
    ("1:2:3:4:5:6:7::/112", true),
    ("::2:3:4:5:6:7:8/112", true),
    ("64:ff9b::192.0.2.0/120", true),
    ("::1.2.3.4/128", true),
    ("fc00::/129", false),
    ("fc00::/064", false),
    ("fc00:::/64", false),
    ("fc00::1::/64", false),
    ("1:2:3:4:5:6:7:8:9/64", false),
    ("1:2:3:4:5:6:7::8/64", false),
    ("1:2:3:4:5:6:7/64", false),
    ("12345::/64", false),
    ("fg00::/64", false),
    ("fe80::1%eth0/64", false),
    ("1:2:3:4:5:6:1.2.3.4/128", true),
    ("1:2:3:4:5:6:7:1.2.3.4/128", false),
    ("1:2:3:4:5::1.2.3.4/128", true),
    ("1:2:3:4:5:6::1.2.3.4/128", false),
    ("::1.2.3/128", false),
    ("::01.2.3.4/128", false),
    // IPv4-mapped IPv6 in any spelling is refused.
    ("::ffff:10.0.0.0/120", false),
    ("::FFFF:a00:0/120", false),
    ("0:0:0:0:0:ffff:a00:0/120", false),
    ("0::0:ffff:10.1.2.3/128", false),
    ("0:0:0:0:0:ffff::/96", false),
    ("::ffff:0/128", true),
    ("::ffff:0:0:0/128", true),
    ("ffff::/16", true),
    // Ranges: trimmed ends, one dash, any mix of the above.
    ("10.0.0.1-10.0.0.9", true),
    ("10.0.0.1 - 10.0.0.9", true),
    ("\t10.0.0.1 -\u{a0}10.0.0.9\u{2028}", true),
    ("10.0.0.1-10.0.0.1", true),
    ("10.0.0.9-10.0.0.1", false),
    ("10.0.1.0-9.0.1.0", false),
    ("9.255.255.255-10.0.0.0", true),
    ("10.0.0.1-10.0.0.9-10.0.0.10", false),
    ("10.0.0.1-", false),
    ("-10.0.0.1", false),
    ("10.0.0.1-10.0.0.256", false),
    ("10.0.0.01-10.0.0.9", false),
    ("10.0.0.0/24-10.0.1.0", false),
    ("fc00::1-fc00::9", true),
    ("fc00::9-fc00::1", true),
    ("fc00::1 - fc00::ffff", true),
    ("fc00::1-fc00::g", false),
    ("fe80::1%eth0-fe80::2", false),
    ("::ffff:10.0.0.1-::ffff:10.0.0.9", false),
    ("10.0.0.1-::ffff:10.0.0.9", false),
    // Ranges across families: in MetalLB's order (IPv6 in ::/80 first,
    // then IPv4, then the rest of IPv6) they hold nothing and are taken.
    ("10.0.0.1-fc00::1", true),
    ("::1 - 10.0.0.1", true),
    ("255.255.255.255-1::", true),
    ("0:0:0:0:0:1::-10.0.0.1", true),
    ("0:0:0:0:1::-10.0.0.1", false),
    ("::0:1:2:3-10.0.0.1", true),
    ("::1:2:3:4-10.0.0.1", false),
    ("fc00::1-10.0.0.1", false),
    ("10.0.0.1-::1", false),
    ("1::-0.0.0.0", false),
    ("10.0.0.1-::1.2.3.4", false),
    ("10.0.0.1-::5:1.2.3.4", false),
    ("10.0.0.1-::5:6:1.2.3.4", true),
    ("10.0.0.1-\n::", false),
    // Neither.
    ("", false),
    ("-", false),
    ("pool", false),
    ("10.0.0.0/24,10.0.1.0/24", false),
];

/// Peer addresses (BGPPeer peerAddress, sourceAddress, routerID) and
/// whether `self == '' || isIP(self)` took them: no trimming, no prefix.
const PEER_TABLE: &[(&str, bool)] = &[
    ("", true),
    ("10.0.0.1", true),
    ("0.0.0.0", true),
    ("fc00::1", true),
    ("FC00::A", true),
    ("::", true),
    ("::1", true),
    ("64:ff9b::10.0.0.1", true),
    ("::ffff:0", true),
    ("1:2:3:4:5:6:7:8", true),
    ("10.0.0.256", false),
    ("10.0.0.01", false),
    (" 10.0.0.1", false),
    ("10.0.0.1/32", false),
    ("fc00::1%eth0", false),
    ("fc00:::1", false),
    ("1:2:3:4:5:6:7:8:9", false),
    ("::ffff:10.0.0.1", false),
    ("::FFFF:a00:1", false),
    ("0:0:0:0:0:ffff:10.0.0.1", false),
    ("0:0:0:0:0:ffff::", false),
    ("router-1", false),
];

/// The address rules as written with Kubernetes' IP library (1.31+), before
/// they became patterns: the reference the patterns must agree with.
const REFERENCE_POOL_RULES: &[&str] = &[
    "self.contains('-') ? (self.split('-').size() == 2 && isIP(self.split('-')[0].trim()) && isIP(self.split('-')[1].trim())) : isCIDR(self)",
    "!self.contains('-') || size(self.split('-')) != 2 || !isIP(self.split('-')[0].trim()) || !isIP(self.split('-')[1].trim()) || ip(self.split('-')[0].trim()).family() != 4 || ip(self.split('-')[1].trim()).family() != 4 || ((int(self.split('-')[0].trim().split('.')[0]) * 256 + int(self.split('-')[0].trim().split('.')[1])) * 256 + int(self.split('-')[0].trim().split('.')[2])) * 256 + int(self.split('-')[0].trim().split('.')[3]) <= ((int(self.split('-')[1].trim().split('.')[0]) * 256 + int(self.split('-')[1].trim().split('.')[1])) * 256 + int(self.split('-')[1].trim().split('.')[2])) * 256 + int(self.split('-')[1].trim().split('.')[3])",
    "!self.contains('-') || size(self.split('-')) != 2 || !isIP(self.split('-')[0].trim()) || !isIP(self.split('-')[1].trim()) || ip(self.split('-')[0].trim()).family() == ip(self.split('-')[1].trim()).family() || (ip(self.split('-')[0].trim()).family() == 4 ? !cidr('::/80').containsIP(self.split('-')[1].trim()) : cidr('::/80').containsIP(self.split('-')[0].trim()))",
];
const REFERENCE_PEER_RULE: &str = "self == '' || isIP(self)";

#[tokio::test]
async fn address_table() {
    let env = TestEnv::global();
    env.install_crds(api::crds()).await.unwrap();
    let client = env.client().unwrap();
    let ns = env.fresh_namespace("celtable").await.unwrap();
    let mut failures = Vec::new();

    let entries: Vec<&str> = POOL_TABLE.iter().map(|(e, _)| *e).collect();
    let refused = refused_entries(&client, &ns, "metallb.io", &entries).await;
    for (i, (entry, accepted)) in POOL_TABLE.iter().enumerate() {
        if refused.contains(&i) == *accepted {
            failures.push(format!(
                "pool entry {entry:?}: wanted {}",
                verdict(*accepted)
            ));
        }
    }
    for (i, (address, accepted)) in PEER_TABLE.iter().enumerate() {
        for field in ["peerAddress", "sourceAddress", "routerID"] {
            let took =
                peer_takes(&client, &ns, "metallb.io", &format!("t{i}"), field, address).await;
            if took != *accepted {
                failures.push(format!(
                    "BGPPeer {field} {address:?}: wanted {}",
                    verdict(*accepted)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "on {}: {failures:#?}",
        server_version(&client).await
    );
}

/// The table's verdicts are the IP library's: the reference CRD agrees.
#[tokio::test]
async fn reference_agrees_with_the_table() {
    let env = TestEnv::global();
    let client = env.client().unwrap();
    install_reference(env, &client).await;
    let ns = env.fresh_namespace("celref").await.unwrap();
    let entries: Vec<&str> = POOL_TABLE.iter().map(|(e, _)| *e).collect();
    let refused = refused_entries(&client, &ns, REFERENCE_GROUP, &entries).await;
    let mut failures = Vec::new();
    for (i, (entry, accepted)) in POOL_TABLE.iter().enumerate() {
        if refused.contains(&i) == *accepted {
            failures.push(format!(
                "pool entry {entry:?}: the IP library says {}",
                verdict(!*accepted)
            ));
        }
    }
    for (i, (address, accepted)) in PEER_TABLE.iter().enumerate() {
        let took = peer_takes(
            &client,
            &ns,
            REFERENCE_GROUP,
            &format!("r{i}"),
            "peerAddress",
            address,
        )
        .await;
        if took != *accepted {
            failures.push(format!(
                "peer {address:?}: the IP library says {}",
                verdict(took)
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Generated entries: the patterns refuse exactly what the IP library did.
#[tokio::test]
async fn reference_agrees_on_generated_entries() {
    let env = TestEnv::global();
    let client = env.client().unwrap();
    env.install_crds(api::crds()).await.unwrap();
    install_reference(env, &client).await;
    let ns = env.fresh_namespace("celgen").await.unwrap();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut seen = BTreeSet::new();
    let mut entries = Vec::new();
    while entries.len() < 8192 {
        let e = entry(&mut rng);
        if e.len() <= 120 && seen.insert(e.clone()) {
            entries.push(e);
        }
    }
    let (mut taken, mut differ) = (0, Vec::new());
    for chunk in entries.chunks(256) {
        let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let ours = refused_entries(&client, &ns, "metallb.io", &chunk).await;
        let reference = refused_entries(&client, &ns, REFERENCE_GROUP, &chunk).await;
        for (i, e) in chunk.iter().enumerate() {
            if ours.contains(&i) != reference.contains(&i) {
                differ.push(format!(
                    "{e:?}: ours {}, the IP library's {}",
                    verdict(!ours.contains(&i)),
                    verdict(!reference.contains(&i))
                ));
            }
            taken += usize::from(!reference.contains(&i));
        }
    }
    println!("{taken} of {} generated entries valid", entries.len());
    assert!(differ.is_empty(), "{differ:#?}");
    // The generator must reach both sides of the line, not only one.
    assert!(
        taken >= 700,
        "only {taken} of 8192 generated entries valid (the generator drifted to one side)"
    );
}

fn verdict(accepted: bool) -> &'static str {
    if accepted { "accepted" } else { "refused" }
}

async fn server_version(client: &kube::Client) -> String {
    client
        .apiserver_version()
        .await
        .map_or_else(|e| e.to_string(), |v| v.git_version)
}

/// Applies one pool of `group` holding `entries` (at most the CRD's
/// maxItems) and returns the indices the apiserver refused.
async fn refused_entries(
    client: &kube::Client,
    ns: &str,
    group: &str,
    entries: &[&str],
) -> BTreeSet<usize> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, "v1beta1", "IPAddressPool"),
        "ipaddresspools",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let doc = json!({
        "apiVersion": format!("{group}/v1beta1"), "kind": "IPAddressPool",
        "metadata": {"name": "table", "namespace": ns}, "spec": {"addresses": entries},
    });
    match api
        .patch(
            "table",
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&doc),
        )
        .await
    {
        Ok(_) => BTreeSet::new(),
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            let causes = status.details.map(|d| d.causes).unwrap_or_default();
            assert!(!causes.is_empty(), "{}", status.message);
            causes
                .iter()
                .map(|c| {
                    let index = c
                        .field
                        .strip_prefix("spec.addresses[")
                        .and_then(|rest| rest.split(']').next())
                        .and_then(|n| n.parse().ok());
                    index.unwrap_or_else(|| panic!("a cause on no entry: {c:?}"))
                })
                .collect()
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// Whether a BGPPeer of `group` with `field` set to `address` is taken.
async fn peer_takes(
    client: &kube::Client,
    ns: &str,
    group: &str,
    name: &str,
    field: &str,
    address: &str,
) -> bool {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, "v1beta2", "BGPPeer"),
        "bgppeers",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let mut spec = json!({"myASN": 64500, "peerASN": 64501, "peerAddress": "10.0.0.1"});
    spec[field] = json!(address);
    if field == "peerAddress" && address.is_empty() {
        spec["interface"] = json!("eth0");
    }
    let doc = json!({
        "apiVersion": format!("{group}/v1beta2"), "kind": "BGPPeer",
        "metadata": {"name": name, "namespace": ns}, "spec": spec,
    });
    match api
        .patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&doc),
        )
        .await
    {
        Ok(_) => true,
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            let at = format!("spec.{field}");
            assert!(status.message.contains(&at), "{}", status.message);
            false
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// The production IPAddressPool and BGPPeer CRDs moved to
/// [`REFERENCE_GROUP`], with the address rules as they were written with
/// the IP library. Fails, naming why, on an apiserver before 1.31.
async fn install_reference(env: &TestEnv, client: &kube::Client) {
    let mut crds = Vec::new();
    for crd in api::crds() {
        if crd.spec.names.kind != "IPAddressPool" && crd.spec.names.kind != "BGPPeer" {
            continue;
        }
        let mut v = serde_json::to_value(&crd).unwrap();
        let plural = crd.spec.names.plural.clone();
        v["metadata"]["name"] = json!(format!("{plural}.{REFERENCE_GROUP}"));
        v["spec"]["group"] = json!(REFERENCE_GROUP);
        for version in v["spec"]["versions"].as_array_mut().unwrap() {
            let schema =
                &mut version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
            if crd.spec.names.kind == "IPAddressPool" {
                schema["addresses"]["items"]["x-kubernetes-validations"] = json!(
                    REFERENCE_POOL_RULES
                        .iter()
                        .map(|r| json!({"rule": r, "message": "refused"}))
                        .collect::<Vec<_>>()
                );
            } else {
                for field in ["peerAddress", "sourceAddress", "routerID"] {
                    schema[field]["x-kubernetes-validations"] =
                        json!([{"rule": REFERENCE_PEER_RULE, "message": "refused"}]);
                }
            }
        }
        crds.push(serde_json::from_value::<CustomResourceDefinition>(v).unwrap());
    }
    if let Err(e) = env.install_crds(crds).await {
        panic!(
            "the reference CRDs need Kubernetes' CEL IP library (1.31+); this apiserver is {}: {e}",
            server_version(client).await
        );
    }
}

/// A small deterministic generator (xorshift64).
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

const GROUPS: &[&str] = &[
    "0", "0", "0", "00", "0000", "ffff", "FFFF", "fFfF", "1", "a", "F", "1234", "abcd", "10",
];
const BAD_GROUPS: &[&str] = &["12345", "g", ""];
const V4: &[&str] = &[
    "1.2.3.4",
    "0.0.0.0",
    "255.255.255.255",
    "10.0.0.1",
    "9.255.255.255",
    "256.1.1.1",
    "01.2.3.4",
    "10.0.0",
    "10.0.0.1.2",
];
const SPACES: &[&str] = &[
    "", "", "", "", " ", "  ", "\t", "\u{a0}", "\u{2028}", "\u{b}", "\u{200b}", "\n",
];
const LENGTHS: &[&str] = &[
    "0", "8", "24", "32", "33", "64", "80", "96", "120", "128", "129", "024", "+8", "",
];

/// An IPv6-looking string: up to nine groups, biased to zeros and ffff,
/// maybe one `::`, maybe an IPv4 tail, rarely a zone or a stray character.
fn v6(rng: &mut XorShift) -> String {
    let n = rng.below(10);
    let groups: Vec<&str> = (0..n)
        .map(|_| match rng.below(40) {
            0..=9 => "0",
            10..=17 => "ffff",
            18 => rng.pick(BAD_GROUPS),
            _ => rng.pick(GROUPS),
        })
        .collect();
    let mut s = if rng.below(2) == 0 {
        let at = rng.below(n + 1);
        format!("{}::{}", groups[..at].join(":"), groups[at..].join(":"))
    } else {
        groups.join(":")
    };
    if rng.below(3) == 0 {
        if !(s.is_empty() || s.ends_with(':')) {
            s.push(':');
        }
        s.push_str(rng.pick(V4));
    }
    if rng.below(25) == 0 {
        s.push_str("%eth0");
    }
    if rng.below(30) == 0 && !s.is_empty() {
        let at = rng.below(s.len());
        s.insert_str(at, rng.pick(&[":", ".", "g", "0", "/"]));
    }
    s
}

fn address(rng: &mut XorShift) -> String {
    if rng.below(3) == 0 {
        rng.pick(V4).to_owned()
    } else {
        v6(rng)
    }
}

/// A pool entry: a range, a CIDR, or a bare address.
fn entry(rng: &mut XorShift) -> String {
    match rng.below(3) {
        0 => {
            let (a, b) = (address(rng), address(rng));
            let sp: Vec<&str> = (0..4).map(|_| rng.pick(SPACES)).collect();
            format!("{}{a}{}-{}{b}{}", sp[0], sp[1], sp[2], sp[3])
        }
        1 => format!("{}/{}", address(rng), rng.pick(LENGTHS)),
        _ => address(rng),
    }
}
