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

/// RFC 6793 §4.2.3 on real input: FRR with AS 4200000002 sends a peer
/// without the 4-octet AS capability AS_PATHs of AS_TRANS plus AS4_PATH
/// (`as-trans.as4.bin`); put back together they are the paths FRR had
/// (testdata/bgp/README.md: 10.70.0.0/24 prepended 4200000002 4200000077
/// 64999, 10.70.1.0/24 its own, 10.71.0.0/24 the legacy peer's sent back).
/// The legacy peer (`as-trans.legacy.bin`) sends no AS4_PATH: its AS_PATH
/// is the path.
#[test]
fn as_trans_capture_paths_put_back_together() {
    use bgp::wire::{AsPath, AttrType, AttrValue, as4};
    type Route = (String, Vec<u32>, Vec<u32>);
    let asns = |p: &AsPath| {
        p.segments()
            .flat_map(|s| s.asns().collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    // Each UPDATE's first prefix, its AS_PATH as sent, and the real path.
    let routes = |name: &str| -> Vec<Route> {
        let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../testdata/bgp")
            .join(name);
        let ctx = context(&flags(&bin));
        assert!(!ctx.as4, "{name}: a 2-octet session");
        let data = std::fs::read(&bin).expect("read capture");
        let mut rest = &data[..];
        let mut out = Vec::new();
        while let Some(len) = frame::decode(rest, &ctx).expect("valid framing") {
            if let Ok(Message::Update(u)) = Message::parse(&rest[..len], &ctx)
                && let Some(AttrValue::AsPath(sent)) = u.attribute(AttrType::AsPath)
            {
                let real = as4::as_path(&u.attributes, ctx.as4).expect("an AS_PATH");
                out.push((u.nlri[0].prefix.to_string(), asns(sent), asns(&real)));
            }
            rest = &rest[len..];
        }
        out
    };
    const BIG: u32 = 4_200_000_002;
    const TRANS: u32 = 23456;
    let r = |p: &str, sent: &[u32], real: &[u32]| (p.to_owned(), sent.to_vec(), real.to_vec());
    assert_eq!(
        routes("as-trans.as4.bin"),
        [
            r(
                "10.70.0.0/24",
                &[TRANS, TRANS, TRANS, 64999],
                &[BIG, BIG, 4_200_000_077, 64999]
            ),
            r("10.70.1.0/24", &[TRANS], &[BIG]),
            r("10.71.0.0/24", &[TRANS, 64510], &[BIG, 64510]),
        ]
    );
    assert_eq!(
        routes("as-trans.legacy.bin"),
        [
            r("10.71.0.0/24", &[64510], &[64510]),
            r("10.71.0.0/24", &[64510], &[64510]),
        ]
    );
}
