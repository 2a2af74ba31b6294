//! Reads any text as the string values of a MetalLB configuration: a Go
//! duration, a pool address entry and a community. Must never panic
//! (issue 14 finding 9 was an overflow in the duration parser); what
//! parses must hold its invariants.
#![no_main]
// A fuzz target reports a bug by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use api::addr::AddressRange;
use api::community::Community;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(d) = api::duration::parse(text) {
        // Go's durations are i64 nanoseconds.
        assert!(d <= Duration::from_nanos(i64::MAX as u64));
    }
    if let Ok(r) = AddressRange::parse(text) {
        assert!(r.first() <= r.last());
        assert_eq!(r.first().is_ipv4(), r.last().is_ipv4());
        assert!(r.contains(r.first()) && r.contains(r.last()));
        // The summary covers the range exactly: same ends, same size.
        let prefixes = r.prefixes();
        assert_eq!(prefixes.first().unwrap().network(), r.first());
        assert_eq!(prefixes.last().unwrap().broadcast(), r.last());
        assert!(r.shortest_prefix_len() <= if r.is_ipv4() { 32 } else { 128 });
        // Display reads back as the same range.
        assert_eq!(AddressRange::parse(&r.to_string()).unwrap(), r);
    }
    if let Ok(c) = Community::parse(text) {
        assert_eq!(Community::parse(&c.to_string()), Ok(c));
    }
});
