//! Allocator and `controller plan` benchmarks (numbers in BENCHMARKS.md).
//!
//! `cargo run --release -p controller --example bench -- alloc` assigns
//! 10 000 services across 10 pools (nine IPv4 /20s and an IPv6 /64), then
//! replays them into a fresh allocator as a restarted controller does.
//! `... -- yaml FILE` writes the same pools and services as YAML for
//! `controller plan`. Run either under `/usr/bin/time -v` for max RSS.

// A benchmark: failing loudly is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::time::Instant;

use controller::alloc::{Allocator, Family, Pool, Port, Protocol, Service, ServiceKey};

const SERVICES: usize = 10_000;

fn pools() -> Vec<Pool> {
    let mut v: Vec<Pool> = (0..9)
        .map(|i| Pool::new(&format!("pool-{i}"), &[&format!("10.{i}.0.0/20")]).unwrap())
        .collect();
    v.push(Pool::new("pool-v6", &["2001:db8:1::/64"]).unwrap());
    v
}

/// Every tenth service asks for the IPv6 pool; the others auto-assign and
/// fill the IPv4 pools in name order.
fn services() -> Vec<Service> {
    (0..SERVICES)
        .map(|i| {
            let v6 = i % 10 == 9;
            Service {
                key: ServiceKey {
                    namespace: format!("ns-{}", i % 50),
                    name: format!("svc-{i:05}"),
                },
                families: if v6 {
                    vec![Family::V6]
                } else {
                    vec![Family::V4]
                },
                pool: v6.then(|| "pool-v6".to_owned()),
                ports: vec![Port {
                    port: 80,
                    protocol: Protocol::Tcp,
                }],
                ..Service::default()
            }
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("alloc") => alloc(),
        Some("yaml") => yaml(args.get(2).expect("yaml FILE")),
        _ => eprintln!("usage: bench alloc | bench yaml FILE"),
    }
}

fn alloc() {
    let svcs = services();
    let t = Instant::now();
    let mut a = Allocator::new(pools());
    let mut placed = Vec::with_capacity(svcs.len());
    for s in &svcs {
        placed.push(a.assign(s).expect("room for every service"));
    }
    let assign = t.elapsed();
    let t = Instant::now();
    for s in &svcs {
        a.assign(s).expect("idempotent");
    }
    let again = t.elapsed();
    // Restart: a fresh allocator, services carrying their addresses.
    let replayed: Vec<Service> = svcs
        .iter()
        .zip(&placed)
        .map(|(s, p)| Service {
            current: p.ips.clone(),
            ..s.clone()
        })
        .collect();
    let t = Instant::now();
    let mut b = Allocator::new(pools());
    for (s, p) in replayed.iter().zip(&placed) {
        assert_eq!(b.assign(s).expect("replay"), *p);
    }
    let replay = t.elapsed();
    let t = Instant::now();
    for s in svcs.iter().step_by(2) {
        b.release(&s.key);
    }
    let release = t.elapsed();
    let per = |d: std::time::Duration, n: usize| d.as_nanos() as f64 / n as f64 / 1000.0;
    println!(
        "services {SERVICES}, pools 10 (one IPv6 /64)\n\
         assign      {assign:>10.2?}  ({:.2} us/service)\n\
         re-assign   {again:>10.2?}  ({:.2} us/service, idempotent)\n\
         replay      {replay:>10.2?}  ({:.2} us/service, fresh allocator)\n\
         release 5k  {release:>10.2?}  ({:.2} us/service)",
        per(assign, SERVICES),
        per(again, SERVICES),
        per(replay, SERVICES),
        per(release, SERVICES / 2),
    );
}

fn yaml(path: &str) {
    let mut out = String::new();
    for p in pools() {
        let ranges: Vec<String> = p.ranges.iter().map(|r| format!("\"{}\"", r)).collect();
        let _ = write!(
            out,
            "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {{name: {}, namespace: metallb-system}}\nspec: {{addresses: [{}]}}\n---\n",
            p.name,
            ranges.join(", ")
        );
    }
    for s in services() {
        let v6 = s.families == [Family::V6];
        let ann = if v6 {
            "\n  annotations: {metallb.io/address-pool: pool-v6}"
        } else {
            ""
        };
        let fam = if v6 { "IPv6" } else { "IPv4" };
        let _ = write!(
            out,
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {}\n  namespace: {}{ann}\nspec:\n  type: LoadBalancer\n  ipFamilies: [{fam}]\n  selector: {{app: {}}}\n  ports:\n  - {{port: 80, protocol: TCP}}\n---\n",
            s.key.name, s.key.namespace, s.key.name
        );
    }
    std::fs::write(path, out).expect("write");
}
