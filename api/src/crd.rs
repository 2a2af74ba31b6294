//! The CustomResourceDefinitions: derived schemas plus the CEL rules.
//!
//! kube's derive gives each version's structural schema. This module then
//! adds, in one table ([`RULES`]), the `x-kubernetes-validations` that let the
//! apiserver itself reject bad objects without an admission webhook, merges
//! BGPPeer's two versions, and sets its conversion strategy. Pure: builds
//! values, talks to no cluster.
//!
//! # BGPPeer conversion: `None`, not a webhook
//!
//! MetalLB serves BGPPeer v1beta1 and v1beta2, stores v1beta2 and converts
//! with a webhook. ferrolb runs no webhook, so the CRD uses the `None`
//! strategy: the apiserver only rewrites `apiVersion`. That is enough
//! because every v1beta1 field exists in v1beta2 with the same JSON name,
//! type and meaning (v1beta1's `nodeSelectors` items have the shape of a
//! `LabelSelector`), so a v1beta1 object is a valid v1beta2 object as it
//! stands. What differs from MetalLB's webhook:
//!
//! - Reading a v1beta2-only field through v1beta1 (`dynamicASN`, `interface`,
//!   `localASN`, `connectTime`, `passwordSecret`, `vrf`, `disableMP`,
//!   `dualStackAddressFamily`, `enableGracefulRestart`) shows nothing: the
//!   apiserver prunes it from the v1beta1 response, as the webhook drops it.
//!   The stored object keeps it, but a full update (PUT) sent as v1beta1
//!   replaces the object and so loses it; the webhook loses it too.
//! - The webhook turns an unset `holdTime`/`keepaliveTime` into `"0s"` and an
//!   empty selector into `{}` on the way to v1beta2; here unset stays unset,
//!   which means the same thing to both implementations.
//! - Validation runs against the schema of the version the client sent, so a
//!   v1beta1 object meets v1beta1's rules (required `peerASN` and
//!   `peerAddress`), as with MetalLB.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use kube::CustomResourceExt;
use kube::core::crd::merge_crds;
use serde_json::{Value, json};

use crate::{v1beta1, v1beta2};

/// All of MetalLB's CRDs, with ferrolb's CEL rules, in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        v1beta1::BFDProfile::crd(),
        v1beta1::BGPAdvertisement::crd(),
        bgp_peer_crd(),
        v1beta1::Community::crd(),
        v1beta1::ConfigurationState::crd(),
        v1beta1::IPAddressPool::crd(),
        v1beta1::L2Advertisement::crd(),
        v1beta1::ServiceBGPStatus::crd(),
        v1beta1::ServiceL2Status::crd(),
    ];
    for crd in &mut crds {
        add_rules(crd);
    }
    crds
}

/// The file name MetalLB uses for a CRD: `metallb.io_<plural>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// A CRD as the YAML document committed under `config/crd/`.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::SerializeError> {
    let body = serde_saphyr::to_string(crd)?;
    Ok(format!("{HEADER}---\n{body}"))
}

/// BGPPeer with v1beta2 stored and v1beta1 served, converted by `None`.
fn bgp_peer_crd() -> CustomResourceDefinition {
    let versions = vec![v1beta1::BGPPeer::crd(), v1beta2::BGPPeer::crd()];
    // Both derive from the same group, kind and scope, which is all that
    // merge_crds checks; a failure is a bug in this crate's attributes.
    #[allow(clippy::expect_used)]
    let mut crd = merge_crds(versions, "v1beta2").expect("BGPPeer versions merge");
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "None".into(),
        webhook: None,
    });
    crd
}

/// Adds [`RULES`] and the label-selector rule to one CRD.
fn add_rules(crd: &mut CustomResourceDefinition) {
    let kind = crd.spec.names.kind.clone();
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        // JSONSchemaProps is awkward to walk; JSON pointers on a Value are not.
        let Ok(mut value) = serde_json::to_value(&*schema) else {
            continue;
        };
        for rule in RULES
            .iter()
            .filter(|r| r.kind == kind && r.versions.contains(&version.name.as_str()))
        {
            if let Some(at) = value.pointer_mut(rule.path) {
                push_rule(at, rule.to_json());
            } else {
                // A path in RULES that the schema lacks is a bug caught by the
                // crate's tests (`every_rule_lands`).
                debug_assert!(false, "{kind} {}: no {}", version.name, rule.path);
            }
        }
        for bound in BOUNDS
            .iter()
            .filter(|b| b.kind == kind && b.versions.contains(&version.name.as_str()))
        {
            if let Some(Value::Object(at)) = value.pointer_mut(bound.path) {
                at.insert(bound.key.into(), json!(bound.value));
            } else {
                debug_assert!(false, "{kind} {}: no {}", version.name, bound.path);
            }
        }
        if OPTIONAL_SPEC.contains(&kind.as_str()) {
            optional_spec(&mut value);
        }
        add_selector_rules(&mut value);
        kubernetes_formats(&mut value);
        if let Ok(props) = serde_json::from_value(value) {
            *schema = props;
        }
    }
}

/// Replaces the integer formats schemars writes for Rust's unsigned and
/// small types (`uint32`, `uint16`, `uint8`, ...), which the apiserver warns
/// about on every apply ("unrecognized format"), with the OpenAPI formats
/// Kubernetes knows: `int32` when every value fits, else `int64`. The
/// `minimum: 0` schemars adds for unsigned types stays, so the range is
/// still enforced.
fn kubernetes_formats(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(format)) = map.get_mut("format") {
                let known = match format.as_str() {
                    "uint8" | "uint16" | "int8" | "int16" => Some("int32"),
                    "uint32" | "uint64" | "uint" => Some("int64"),
                    _ => None,
                };
                if let Some(k) = known {
                    *format = k.to_owned();
                }
            }
            map.values_mut().for_each(kubernetes_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(kubernetes_formats),
        _ => {}
    }
}

/// Makes `spec` optional, as MetalLB's `json:"spec,omitempty"` does, and
/// defaults it to `{}`, so that a stored object always has a spec (and its
/// nested defaults) and reads back into the Rust type.
fn optional_spec(schema: &mut Value) {
    let none_left = match schema.get_mut("required") {
        Some(Value::Array(required)) => {
            required.retain(|r| r != "spec");
            required.is_empty()
        }
        _ => false,
    };
    if none_left && let Value::Object(map) = schema {
        map.remove("required");
    }
    if let Some(Value::Object(spec)) = schema.pointer_mut("/properties/spec") {
        spec.insert("default".into(), json!({}));
    }
}

/// Restricts every label selector requirement's operator to the four that
/// exist. (Whether `values` fits the operator is left to
/// [`crate::validate`]: as CEL on lists of lists of selectors, the
/// apiserver's cost estimate exceeds its budget.)
fn add_selector_rules(schema: &mut Value) {
    let is_requirement = schema.get("required").is_some_and(|r| {
        r.as_array()
            .is_some_and(|r| r.contains(&json!("key")) && r.contains(&json!("operator")))
    });
    if is_requirement && let Some(operator) = schema.pointer_mut("/properties/operator") {
        operator["enum"] = json!(["In", "NotIn", "Exists", "DoesNotExist"]);
    }
    match schema {
        Value::Object(map) => map.values_mut().for_each(add_selector_rules),
        Value::Array(items) => items.iter_mut().for_each(add_selector_rules),
        _ => {}
    }
}

fn push_rule(at: &mut Value, rule: Value) {
    let Value::Object(map) = at else { return };
    let list = map
        .entry("x-kubernetes-validations")
        .or_insert_with(|| json!([]));
    if let Value::Array(list) = list {
        list.push(rule);
    }
}

/// One CEL rule placed at a JSON pointer inside a version's
/// `openAPIV3Schema`.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// The CRD kind the rule belongs to.
    pub kind: &'static str,
    /// The versions of that kind that get it.
    pub versions: &'static [&'static str],
    /// JSON pointer to the schema node (`self` in the rule).
    pub path: &'static str,
    /// The CEL expression; true means valid.
    pub rule: &'static str,
    /// The message, or a CEL `messageExpression` when it starts with `=`.
    pub message: &'static str,
    /// The field the error is reported on, relative to `path`.
    pub field_path: Option<&'static str>,
}

impl Rule {
    fn to_json(self) -> Value {
        let mut out = json!({ "rule": self.rule });
        match self.message.strip_prefix('=') {
            Some(expr) => out["messageExpression"] = json!(expr),
            None => out["message"] = json!(self.message),
        }
        if let Some(field) = self.field_path {
            out["fieldPath"] = json!(field);
        }
        out
    }
}

/// Kinds whose spec MetalLB marks `omitempty` and whose spec has no
/// required field. (BGPPeer's spec is `omitempty` too, but `myASN` is
/// required in it: here a BGPPeer needs a spec, which MetalLB's webhook
/// demands anyway.)
const OPTIONAL_SPEC: &[&str] = &[
    "BFDProfile",
    "BGPAdvertisement",
    "Community",
    "L2Advertisement",
    "ServiceBGPStatus",
    "ServiceL2Status",
];
const SPEC: &str = "/properties/spec";
const BGPPEER_BOTH: &[&str] = &["v1beta1", "v1beta2"];
const V1BETA1: &[&str] = &["v1beta1"];
const V1BETA2: &[&str] = &["v1beta2"];

// The address patterns of the CEL rules.
//
// Kubernetes 1.30 added CEL's `isIP`, `isCIDR`, `ip()` and `cidr()`; the
// apiserver takes a new CRD rule only if its functions are in the
// environment of the release before it, so rules that used them needed
// 1.31+. These rules
// use only `matches` (RE2) and the string functions that every apiserver
// from 1.28 on has, and decide exactly as `isIP`/`isCIDR` did: Go's
// `netip.ParseAddr`/`ParsePrefix` grammar, no zone, no IPv4-mapped IPv6
// address (api/tests/cel_compat.rs compares the two on the current
// apiserver, and runs the table on the oldest one the README names).
//
// Every pattern applies to `self`, never to a part cut out with split():
// the apiserver's cost estimate knows the length of `self` (maxLength) but
// not that of a split() element, and prices a pattern on an unknown length
// over any budget. A range's two ends are told apart by the one `-`.
// Letters are matched case-insensitively (`(?i)` where a pattern starts).

/// What CEL's `trim()` strips: Go's `unicode.IsSpace`.
macro_rules! ws {
    () => {
        r"[\t-\r\x{85}\p{Z}]*"
    };
}

/// An IPv4 octet without leading zeros, as netip takes it.
macro_rules! octet {
    () => {
        "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
    };
}

/// A dotted-quad IPv4 address.
macro_rules! v4_re {
    () => {
        concat!("(", octet!(), "[.]){3}", octet!())
    };
}

/// One IPv6 group.
macro_rules! hex {
    () => {
        "[0-9a-f]{1,4}"
    };
}

/// An IPv6 address without zone: eight groups, or fewer around one `::`
/// standing for at least one zero group, the last two groups possibly
/// written as an IPv4 address.
macro_rules! v6_re {
    () => {
        concat!(
            "(",
            hex!(),
            ":){7}",
            hex!(),
            "|(",
            hex!(),
            ":){1,7}:",
            "|(",
            hex!(),
            ":){1,6}:",
            hex!(),
            "|(",
            hex!(),
            ":){1,5}(:",
            hex!(),
            "){1,2}",
            "|(",
            hex!(),
            ":){1,4}(:",
            hex!(),
            "){1,3}",
            "|(",
            hex!(),
            ":){1,3}(:",
            hex!(),
            "){1,4}",
            "|(",
            hex!(),
            ":){1,2}(:",
            hex!(),
            "){1,5}",
            "|",
            hex!(),
            ":(:",
            hex!(),
            "){1,6}",
            "|:(:",
            hex!(),
            "){1,7}",
            "|::",
            // Six groups' worth before an IPv4 tail.
            "|((",
            hex!(),
            ":){6}",
            "|::(",
            hex!(),
            ":){0,5}",
            "|(",
            hex!(),
            ":){1,5}:",
            "|(",
            hex!(),
            ":){1,4}:",
            hex!(),
            ":",
            "|(",
            hex!(),
            ":){1,3}(:",
            hex!(),
            "){2}:",
            "|(",
            hex!(),
            ":){1,2}(:",
            hex!(),
            "){3}:",
            "|",
            hex!(),
            ":(:",
            hex!(),
            "){4}:",
            ")",
            v4_re!()
        )
    };
}

/// Either family.
macro_rules! ip_re {
    () => {
        concat!(v4_re!(), "|", v6_re!())
    };
}

/// A whole value that is a range of two addresses matching `$end`.
macro_rules! range_re {
    ($end:expr) => {
        concat!(
            "(?i)^",
            ws!(),
            "(",
            $end,
            ")",
            ws!(),
            "-",
            ws!(),
            "(",
            $end,
            ")",
            ws!(),
            "$"
        )
    };
}

/// A whole value that is a CIDR (prefix length without leading zeros).
macro_rules! cidr_re {
    () => {
        concat!(
            "(?i)^(",
            v4_re!(),
            "/(3[0-2]|[12]?[0-9])|(",
            v6_re!(),
            ")/(12[0-8]|1[01][0-9]|[1-9]?[0-9]))$"
        )
    };
}

/// The IPv4 tail of an IPv6 address already known valid.
macro_rules! v4_tail {
    () => {
        "[0-9]+([.][0-9]+){3}"
    };
}

// An address already known valid is IPv4-mapped (in ::ffff:0:0/96) when its
// first five groups are zero and its sixth is ffff: written out in full
// (the prefix pattern), or with the `::` before the ffff and exactly two
// groups after it (the full pattern; a trailing IPv4 is two groups).
macro_rules! mapped_prefix {
    () => {
        "(0{1,4}:){5}ffff:"
    };
}
macro_rules! mapped_full {
    () => {
        concat!(
            "((0{1,4}:)*|:):(0{1,4}:)*ffff:(",
            hex!(),
            ":",
            hex!(),
            "|",
            v4_tail!(),
            ")"
        )
    };
}

// An IPv6 address already known valid is in ::/80 when its first five
// groups are zero: written out, or all zero up to the `::` and after it
// all zero but for the last three groups.
macro_rules! in80_prefix {
    () => {
        "(0{1,4}:){5}"
    };
}
macro_rules! in80_full {
    () => {
        concat!(
            "((0{1,4}:)*|:):(0{1,4}:)*((",
            hex!(),
            ":){0,2}",
            hex!(),
            "|(",
            hex!(),
            ":)?",
            v4_tail!(),
            ")?"
        )
    };
}

/// The first end of a range has the property (`$prefix` at its start, or
/// `$full` all of it).
macro_rules! first_re {
    ($prefix:expr, $full:expr) => {
        concat!("(?i)^", ws!(), "(", $prefix, "|", $full, ws!(), "-)")
    };
}

/// The last end of a range has it.
macro_rules! last_re {
    ($prefix:expr, $full:expr) => {
        concat!("(?i)-", ws!(), "(", $prefix, "|", $full, ws!(), "$)")
    };
}

/// A CIDR's address has it (mapped).
macro_rules! cidr_mapped_re {
    () => {
        concat!("(?i)^(", mapped_prefix!(), "|", mapped_full!(), "/)")
    };
}

/// `self == '' || isIP(self)`, in the terms above.
const IS_IP_OR_EMPTY: &str = concat!(
    "self == '' || (self.matches(r'(?i)^(",
    ip_re!(),
    ")$') && !self.matches(r'(?i)^(",
    mapped_prefix!(),
    "|",
    mapped_full!(),
    "$)'))"
);

/// Every CEL rule ferrolb adds to MetalLB's schemas.
///
/// Cross-object rules (overlapping pools, duplicate peers, unknown community
/// aliases, aggregation lengths against pool prefixes) cannot be CEL; they
/// are in [`crate::validate`] only.
pub const RULES: &[Rule] = &[
    // IPAddressPool
    Rule {
        kind: "IPAddressPool",
        versions: V1BETA1,
        path: "/properties/spec/properties/addresses",
        rule: "size(self) > 0",
        message: "at least one address range is required",
        field_path: None,
    },
    Rule {
        kind: "IPAddressPool",
        versions: V1BETA1,
        path: "/properties/spec/properties/addresses/items",
        // Go's netip grammar, as Kubernetes' isIP/isCIDR take it (see the
        // regular expressions below): a CIDR may have host bits set
        // (10.0.0.1/24), as in MetalLB; IPv4-mapped IPv6 addresses
        // (::ffff:a.b.c.d) are refused, as the api crate's parser refuses
        // them. A range's two ends may be of two families: the next rule
        // but one decides, as MetalLB does.
        rule: concat!(
            "self.contains('-') ? (self.matches(r'",
            range_re!(ip_re!()),
            "') && !self.matches(r'",
            first_re!(mapped_prefix!(), mapped_full!()),
            "') && !self.matches(r'",
            last_re!(mapped_prefix!(), mapped_full!()),
            "')) : (self.matches(r'",
            cidr_re!(),
            "') && !self.matches(r'",
            cidr_mapped_re!(),
            "'))"
        ),
        message: "='\"' + self + (self.matches('(?i):ffff:[0-9]+[.]') ? '\" holds an IPv4-mapped IPv6 address (::ffff:a.b.c.d): write it as IPv4' : '\" is neither a CIDR (192.168.10.0/24, fc00::/64) nor a range of two addresses (192.168.10.1-192.168.10.9)')",
        field_path: None,
    },
    Rule {
        kind: "IPAddressPool",
        versions: V1BETA1,
        path: "/properties/spec/properties/addresses/items",
        // An IPv4 range's first address must not be after its last. CEL
        // has no order on addresses, so the dotted quads are compared as
        // numbers (the pattern refuses leading zeros and other spellings).
        // CRD rules have no cel.bind, and a macro used as one costs too
        // much in the apiserver's estimate: the parts are spelt out. IPv6
        // ranges are left to the controller and the speaker, which keep
        // the pool's last good version (the expansion of `::` is beyond
        // what a rule can do within the cost budget).
        rule: concat!(
            "!self.matches(r'",
            range_re!(v4_re!()),
            "') || ((int(self.split('-')[0].trim().split('.')[0]) * 256 + int(self.split('-')[0].trim().split('.')[1])) * 256 + int(self.split('-')[0].trim().split('.')[2])) * 256 + int(self.split('-')[0].trim().split('.')[3]) <= ((int(self.split('-')[1].trim().split('.')[0]) * 256 + int(self.split('-')[1].trim().split('.')[1])) * 256 + int(self.split('-')[1].trim().split('.')[2])) * 256 + int(self.split('-')[1].trim().split('.')[3])"
        ),
        message: "='\"' + self + '\" is a reversed range: its first address is after its last'",
        field_path: None,
    },
    Rule {
        kind: "IPAddressPool",
        versions: V1BETA1,
        path: "/properties/spec/properties/addresses/items",
        // A range from one family to the other, ordered as MetalLB orders
        // them (Go's 16-byte addresses, IPv4 a.b.c.d as ::ffff:a.b.c.d):
        // in order it is accepted and holds no address, as in MetalLB;
        // reversed it is refused. A valid IPv6 address that is not
        // IPv4-mapped is before every ::ffff:a.b.c.d exactly when it is in
        // ::/80. An end is IPv6 when it has a colon.
        rule: concat!(
            "!self.matches(r'",
            range_re!(ip_re!()),
            "') || self.matches(r'",
            first_re!(mapped_prefix!(), mapped_full!()),
            "') || self.matches(r'",
            last_re!(mapped_prefix!(), mapped_full!()),
            "') || self.matches('^[^-:]*:') == self.matches('-[^:]*:') || (self.matches('^[^-:]*:') ? self.matches(r'",
            first_re!(in80_prefix!(), in80_full!()),
            "') : !self.matches(r'",
            last_re!(in80_prefix!(), in80_full!()),
            "'))"
        ),
        message: "='\"' + self + '\" is a reversed range: its first address is after its last'",
        field_path: None,
    },
    // BGPAdvertisement
    Rule {
        kind: "BGPAdvertisement",
        versions: V1BETA1,
        path: "/properties/spec/properties/communities/items",
        // Two or four parts must be a community; other strings name aliases.
        rule: "self.split(':').size() == 2 ? (self.matches('^[0-9]{1,5}:[0-9]{1,5}$') && self.split(':').all(p, int(p) <= 65535)) : (self.split(':').size() != 4 || (self.matches('^large:[0-9]{1,10}:[0-9]{1,10}:[0-9]{1,10}$') && [1, 2, 3].all(i, int(self.split(':')[i]) <= 4294967295)))",
        message: "='\"' + self + '\" is not a community: write <0-65535>:<0-65535>, large:<uint32>:<uint32>:<uint32>, or the name of a Community alias'",
        field_path: None,
    },
    Rule {
        kind: "BGPAdvertisement",
        versions: V1BETA1,
        path: SPEC,
        rule: "!has(self.serviceSelectors) || size(self.serviceSelectors) == 0 || ((!has(self.aggregationLength) || self.aggregationLength == 32) && (!has(self.aggregationLengthV6) || self.aggregationLengthV6 == 128))",
        message: "serviceSelectors and a non-default aggregationLength or aggregationLengthV6 are mutually exclusive",
        field_path: Some(".serviceSelectors"),
    },
    // Community
    Rule {
        kind: "Community",
        versions: V1BETA1,
        path: "/properties/spec/properties/communities/items/properties/value",
        rule: "(self.matches('^[0-9]{1,5}:[0-9]{1,5}$') && self.split(':').all(p, int(p) <= 65535)) || (self.matches('^large:[0-9]{1,10}:[0-9]{1,10}:[0-9]{1,10}$') && [1, 2, 3].all(i, int(self.split(':')[i]) <= 4294967295))",
        message: "='\"' + self + '\" is not a community: write <0-65535>:<0-65535> or large:<uint32>:<uint32>:<uint32>'",
        field_path: None,
    },
    // BGPPeer, both versions
    Rule {
        kind: "BGPPeer",
        versions: BGPPEER_BOTH,
        path: "/properties/spec/properties/myASN",
        // The schema's maximum is 4294967295: RFC 7300 reserves it, but
        // MetalLB takes it, so configurations that use it keep working.
        rule: "self >= 1",
        message: "myASN must be between 1 and 4294967295",
        field_path: None,
    },
    Rule {
        kind: "BGPPeer",
        versions: V1BETA1,
        path: "/properties/spec/properties/peerASN",
        rule: "self >= 1",
        message: "peerASN must be between 1 and 4294967295",
        field_path: None,
    },
    Rule {
        kind: "BGPPeer",
        versions: BGPPEER_BOTH,
        path: "/properties/spec/properties/peerAddress",
        rule: IS_IP_OR_EMPTY,
        message: "='peerAddress \"' + self + (self.matches('(?i):ffff:[0-9]+[.]') ? '\" is an IPv4-mapped IPv6 address: write it as IPv4' : '\" is not an IP address')",
        field_path: None,
    },
    Rule {
        kind: "BGPPeer",
        versions: BGPPEER_BOTH,
        path: "/properties/spec/properties/sourceAddress",
        rule: IS_IP_OR_EMPTY,
        message: "='sourceAddress \"' + self + (self.matches('(?i):ffff:[0-9]+[.]') ? '\" is an IPv4-mapped IPv6 address: write it as IPv4' : '\" is not an IP address')",
        field_path: None,
    },
    Rule {
        kind: "BGPPeer",
        versions: BGPPEER_BOTH,
        path: "/properties/spec/properties/routerID",
        rule: IS_IP_OR_EMPTY,
        message: "='routerID \"' + self + (self.matches('(?i):ffff:[0-9]+[.]') ? '\" is an IPv4-mapped IPv6 address: write it as IPv4' : '\" is not an IP address')",
        field_path: None,
    },
    Rule {
        kind: "BGPPeer",
        versions: BGPPEER_BOTH,
        path: "/properties/spec/properties/holdTime",
        // MetalLB rounds the hold time down to whole seconds first: under
        // 1s is 0 (no hold timer).
        rule: "duration(self) < duration('1s') || duration(self) >= duration('3s')",
        message: "holdTime must be 0 or at least 3s once rounded down to whole seconds",
        field_path: None,
    },
    Rule {
        kind: "BGPPeer",
        versions: BGPPEER_BOTH,
        path: "/properties/spec/properties/keepaliveTime",
        rule: "duration(self) >= duration('0s')",
        message: "keepaliveTime must be a duration such as 30s",
        field_path: None,
    },
    Rule {
        kind: "BGPPeer",
        versions: BGPPEER_BOTH,
        path: SPEC,
        rule: "!has(self.holdTime) || !has(self.keepaliveTime) || duration(self.keepaliveTime) <= duration(self.holdTime)",
        message: "keepaliveTime must not be greater than holdTime",
        field_path: Some(".keepaliveTime"),
    },
    Rule {
        kind: "BGPPeer",
        versions: BGPPEER_BOTH,
        path: SPEC,
        // Alone, keepaliveTime implies a holdTime of three times it, which
        // rounds down to 0 (keepalive under 1/3 s) or must reach 3s.
        rule: "has(self.holdTime) || !has(self.keepaliveTime) || duration(self.keepaliveTime) < duration('333333334ns') || duration(self.keepaliveTime) >= duration('1s')",
        message: "keepaliveTime without holdTime implies a holdTime of 3 × keepaliveTime, which must be 0 or at least 3s once rounded down to whole seconds",
        field_path: Some(".keepaliveTime"),
    },
    Rule {
        kind: "BGPPeer",
        versions: BGPPEER_BOTH,
        path: SPEC,
        rule: "!(has(self.ebgpMultiHop) && self.ebgpMultiHop && has(self.peerASN) && self.peerASN == self.myASN)",
        message: "ebgpMultiHop cannot be set for an iBGP peer (peerASN equal to myASN)",
        field_path: Some(".ebgpMultiHop"),
    },
    // BGPPeer v1beta2 only
    Rule {
        kind: "BGPPeer",
        versions: V1BETA2,
        path: "/properties/spec/properties/localASN",
        rule: "self >= 1",
        message: "localASN must be between 1 and 4294967295",
        field_path: None,
    },
    Rule {
        kind: "BGPPeer",
        versions: V1BETA2,
        path: SPEC,
        rule: "(has(self.peerASN) && self.peerASN != 0) != has(self.dynamicASN)",
        message: "exactly one of peerASN and dynamicASN must be set",
        field_path: Some(".peerASN"),
    },
    Rule {
        kind: "BGPPeer",
        versions: V1BETA2,
        path: SPEC,
        rule: "(has(self.peerAddress) && self.peerAddress != '') != (has(self.interface) && self.interface != '')",
        message: "exactly one of peerAddress and interface must be set",
        field_path: Some(".peerAddress"),
    },
    Rule {
        kind: "BGPPeer",
        versions: V1BETA2,
        path: SPEC,
        rule: "!(has(self.password) && self.password != '' && has(self.passwordSecret) && has(self.passwordSecret.name) && self.passwordSecret.name != '')",
        message: "password and passwordSecret are mutually exclusive",
        field_path: Some(".password"),
    },
    // MetalLB's own two connectTime rules.
    Rule {
        kind: "BGPPeer",
        versions: V1BETA2,
        path: "/properties/spec/properties/connectTime",
        rule: "duration(self).getSeconds() >= 1 && duration(self).getSeconds() <= 65535",
        message: "connect time should be between 1 seconds to 65535",
        field_path: None,
    },
    Rule {
        kind: "BGPPeer",
        versions: V1BETA2,
        path: "/properties/spec/properties/connectTime",
        rule: "duration(self).getMilliseconds() % 1000 == 0",
        message: "connect time should contain a whole number of seconds",
        field_path: None,
    },
    Rule {
        kind: "BGPPeer",
        versions: V1BETA2,
        path: "/properties/spec/properties/enableGracefulRestart",
        rule: "self == oldSelf",
        message: "EnableGracefulRestart cannot be changed after creation",
        field_path: None,
    },
    // Status kinds: MetalLB makes the identifying fields immutable.
    Rule {
        kind: "ServiceL2Status",
        versions: V1BETA1,
        path: "/properties/status/properties/node",
        rule: "self == oldSelf",
        message: "Value is immutable",
        field_path: None,
    },
    Rule {
        kind: "ServiceL2Status",
        versions: V1BETA1,
        path: "/properties/status/properties/serviceName",
        rule: "self == oldSelf",
        message: "Value is immutable",
        field_path: None,
    },
    Rule {
        kind: "ServiceL2Status",
        versions: V1BETA1,
        path: "/properties/status/properties/serviceNamespace",
        rule: "self == oldSelf",
        message: "Value is immutable",
        field_path: None,
    },
    Rule {
        kind: "ServiceBGPStatus",
        versions: V1BETA1,
        path: "/properties/status/properties/node",
        rule: "self == oldSelf",
        message: "Value is immutable",
        field_path: None,
    },
    Rule {
        kind: "ServiceBGPStatus",
        versions: V1BETA1,
        path: "/properties/status/properties/serviceName",
        rule: "self == oldSelf",
        message: "Value is immutable",
        field_path: None,
    },
    Rule {
        kind: "ServiceBGPStatus",
        versions: V1BETA1,
        path: "/properties/status/properties/serviceNamespace",
        rule: "self == oldSelf",
        message: "Value is immutable",
        field_path: None,
    },
];

/// A size bound ferrolb adds to MetalLB's schema.
///
/// The apiserver refuses CEL rules whose estimated worst-case cost is over
/// budget, and with unbounded lists of unbounded strings every rule is. The
/// bounds are far above any real configuration (the longest valid value of
/// each field is noted), so MetalLB manifests still apply unchanged.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// The CRD kind.
    pub kind: &'static str,
    /// The versions of that kind that get it.
    pub versions: &'static [&'static str],
    /// JSON pointer to the schema node.
    pub path: &'static str,
    /// `maxItems` or `maxLength`.
    pub key: &'static str,
    /// The bound.
    pub value: u32,
}

/// Every size bound ferrolb adds to MetalLB's schemas.
pub const BOUNDS: &[Bound] = &[
    // The longest range, two full IPv6 addresses and spaces, is under 100.
    // The address patterns are long, and the apiserver multiplies a rule's
    // cost by the number of items: at 1024 items Kubernetes 1.28 refuses
    // them (estimated cost 2.5 to 2.7 times its budget), at 256 it takes
    // them.
    Bound {
        kind: "IPAddressPool",
        versions: V1BETA1,
        path: "/properties/spec/properties/addresses",
        key: "maxItems",
        value: 256,
    },
    Bound {
        kind: "IPAddressPool",
        versions: V1BETA1,
        path: "/properties/spec/properties/addresses/items",
        key: "maxLength",
        value: 128,
    },
    // An address is at most 45 characters (IPv6 with an IPv4 tail). The
    // address rules are patterns, which the apiserver prices by length.
    Bound {
        kind: "BGPPeer",
        versions: BGPPEER_BOTH,
        path: "/properties/spec/properties/peerAddress",
        key: "maxLength",
        value: 128,
    },
    Bound {
        kind: "BGPPeer",
        versions: BGPPEER_BOTH,
        path: "/properties/spec/properties/sourceAddress",
        key: "maxLength",
        value: 128,
    },
    Bound {
        kind: "BGPPeer",
        versions: BGPPEER_BOTH,
        path: "/properties/spec/properties/routerID",
        key: "maxLength",
        value: 128,
    },
    // A large community is at most 38 characters; alias names are short.
    Bound {
        kind: "BGPAdvertisement",
        versions: V1BETA1,
        path: "/properties/spec/properties/communities",
        key: "maxItems",
        value: 256,
    },
    Bound {
        kind: "BGPAdvertisement",
        versions: V1BETA1,
        path: "/properties/spec/properties/communities/items",
        key: "maxLength",
        value: 253,
    },
    Bound {
        kind: "Community",
        versions: V1BETA1,
        path: "/properties/spec/properties/communities",
        key: "maxItems",
        value: 1024,
    },
    Bound {
        kind: "Community",
        versions: V1BETA1,
        path: "/properties/spec/properties/communities/items/properties/value",
        key: "maxLength",
        value: 64,
    },
];

const HEADER: &str = "# Generated by the api crate (api/tests/crds.rs) from api/src: do not edit.\n# Regenerate with: UPDATE_CRDS=1 cargo test -p api --test crds\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_lands() {
        // add_rules debug_asserts that each path exists.
        let crds = crds();
        let text = serde_json::to_string(&crds).unwrap();
        for rule in RULES {
            assert!(
                text.contains(&serde_json::to_string(rule.rule).unwrap()[1..]),
                "{}",
                rule.rule
            );
        }
    }

    #[test]
    fn bgppeer_versions() {
        let crd = bgp_peer_crd();
        let versions: Vec<_> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage, v.deprecated))
            .collect();
        assert_eq!(
            versions,
            [
                ("v1beta2", true, true, None),
                ("v1beta1", true, false, Some(true))
            ]
        );
        assert_eq!(crd.spec.conversion.unwrap().strategy, "None");
    }

    #[test]
    fn names_and_scope_follow_metallb() {
        let names: Vec<_> = crds().iter().map(file_name).collect();
        assert_eq!(
            names,
            [
                "metallb.io_bfdprofiles.yaml",
                "metallb.io_bgpadvertisements.yaml",
                "metallb.io_bgppeers.yaml",
                "metallb.io_communities.yaml",
                "metallb.io_configurationstates.yaml",
                "metallb.io_ipaddresspools.yaml",
                "metallb.io_l2advertisements.yaml",
                "metallb.io_servicebgpstatuses.yaml",
                "metallb.io_servicel2statuses.yaml",
            ]
        );
        assert!(crds().iter().all(|c| c.spec.scope == "Namespaced"));
    }
}
