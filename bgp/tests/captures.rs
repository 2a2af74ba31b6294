//! Real captures: every `testdata/bgp/*.bin` (raw messages as FRR, BIRD and
//! GoBGP sent them; see testdata/bgp/README.md) must
//!
//! - decode with `bgp-decode` to exactly the reviewed `<name>.json`
//!   (`UPDATE_GOLDEN=1 cargo test -p bgp --test captures` rewrites them), and
//! - round-trip: every message that parses without RFC 7606 errors emits
//!   back to the very same bytes.
//!
//! A capture that needs a non-default decode context (a 2-octet AS session,
//! ADD-PATH) lists its `bgp-decode` flags in `<name>.args`.

use std::path::{Path, PathBuf};
use std::process::Command;

use bgp::frame;
use bgp::wire::{AddPathSet, DecodeCtx, Family, Message};
use bytes::Bytes;
use rstest::rstest;

fn flags(bin: &Path) -> Vec<String> {
    std::fs::read_to_string(bin.with_extension("args"))
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The decode context the flags describe (the subset captures use).
fn context(flags: &[String]) -> DecodeCtx {
    let mut ctx = DecodeCtx::default();
    for f in flags {
        match f.as_str() {
            "--as4=false" => ctx.as4 = false,
            "--extended-message" => ctx.extended_message = true,
            "--add-path" | "--add-path=all" => ctx.add_path = AddPathSet::of(&Family::ALL),
            "--add-path=ipv4-unicast" => ctx.add_path.insert(Family::Ipv4Unicast),
            "--add-path=ipv6-unicast" => ctx.add_path.insert(Family::Ipv6Unicast),
            other => panic!("capture flag {other:?} not understood by this test"),
        }
    }
    ctx
}

#[rstest]
fn capture_decodes_to_golden_json(#[files("../testdata/bgp/*.bin")] bin: PathBuf) {
    let args = flags(&bin);
    let out = Command::new(env!("CARGO_BIN_EXE_bgp-decode"))
        .args(&args)
        .arg(&bin)
        .output()
        .expect("run bgp-decode");
    let stdout = String::from_utf8(out.stdout).expect("utf-8 output");
    assert!(
        out.status.success(),
        "{}: bgp-decode failed: {stdout}",
        bin.display()
    );
    assert!(
        !stdout.contains("\"error\""),
        "{}: decode errors:\n{stdout}",
        bin.display()
    );
    let golden = bin.with_extension("json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &stdout).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_else(|_| {
        panic!(
            "{} missing: run with UPDATE_GOLDEN=1 and review it",
            golden.display()
        )
    });
    assert_eq!(
        stdout,
        expected,
        "{}: decode differs from the golden file",
        bin.display()
    );
}

#[rstest]
fn capture_round_trips(#[files("../testdata/bgp/*.bin")] bin: PathBuf) {
    let ctx = context(&flags(&bin));
    let data = std::fs::read(&bin).expect("read capture");
    let mut rest = &data[..];
    let mut count = 0;
    while !rest.is_empty() {
        let len = frame::decode(rest, &ctx)
            .expect("valid framing")
            .unwrap_or_else(|| panic!("{}: truncated message", bin.display()));
        let msg = Message::parse(&rest[..len], &ctx)
            .unwrap_or_else(|e| panic!("{}: message {count}: {e}", bin.display()));
        let shared = Message::parse_bytes(&Bytes::copy_from_slice(&rest[..len]), &ctx);
        assert_eq!(
            shared.as_ref(),
            Ok(&msg),
            "{}: message {count}",
            bin.display()
        );
        if let Message::Update(u) = &msg {
            assert!(
                u.errors.is_empty(),
                "{}: message {count}: {:?}",
                bin.display(),
                u.errors
            );
        }
        let again = msg.to_bytes(&ctx).expect("emit");
        assert_eq!(
            &again[..],
            &rest[..len],
            "{}: message {count} ({msg}) does not round-trip",
            bin.display()
        );
        rest = &rest[len..];
        count += 1;
    }
    assert!(count > 0, "{}: empty capture", bin.display());
}
