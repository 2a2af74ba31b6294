//! The memberlist key file: 32-byte AES-256 keys, one per line, in hex (64
//! digits) or base64 (44 characters); blank lines and `#` comments are
//! skipped. The first key is primary (encrypts), the others are accepted
//! when decrypting (key rotation). [`parse`] is pure; [`watch`] re-reads
//! the file and hands each changed keyring on (a rotated Secret applies
//! without a restart).
//!
//! A line that is neither (MetalLB's `memberlist` Secret holds
//! `openssl rand -base64 128`, 172 characters) is a passphrase: its key is
//! the SHA-256 of the line, so an existing MetalLB Secret works unchanged.
//!
//! `ferrolb-memberlist --key-file` reads its keys with this parser too.

use std::path::PathBuf;
use std::time::Duration;

use memberlist::{Key, Keyring};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

/// The keyring of a key file's text.
pub fn parse(text: &str) -> Result<Keyring, String> {
    let mut keys = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .enumerate()
        .map(|(i, l)| parse_key(l).map_err(|e| format!("key {}: {e}", i + 1)));
    let primary = keys.next().ok_or("no key")??;
    let mut ring = Keyring::new(primary);
    for key in keys {
        ring.install(key?);
    }
    Ok(ring)
}

/// Re-reads the key file at `path` every `every` and hands each changed
/// keyring to `apply` (a Secret volume is updated in place when the Secret
/// changes); stops when `apply` returns false. A file that cannot be read
/// or parsed is logged and the keys in use stay. The first read is
/// compared with what is in the file when this starts: call it after the
/// initial keyring was taken from the file.
pub async fn watch(path: PathBuf, every: Duration, mut apply: impl FnMut(Keyring) -> bool) {
    let mut last = std::fs::read_to_string(&path).ok();
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                warn!(path = %path.display(), error = %e, "memberlist key file unreadable; keys unchanged");
                continue;
            }
        };
        if last.as_deref() == Some(text.as_str()) {
            continue;
        }
        match parse(&text) {
            Ok(ring) => {
                info!(keys = ring.keys().count(), "memberlist keys reloaded");
                if !apply(ring) {
                    return;
                }
                last = Some(text);
            }
            Err(e) => warn!(error = %e, "memberlist key file rejected; keys unchanged"),
        }
    }
}

fn parse_key(s: &str) -> Result<Key, String> {
    let bytes = if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        s.as_bytes()
            .chunks(2)
            .map(|p| Ok(hex_digit(p[0])? << 4 | hex_digit(p[1])?))
            .collect::<Result<Vec<u8>, String>>()?
    } else {
        match base64(s) {
            Ok(b) if b.len() == 32 => b,
            // A passphrase (MetalLB's Secret): its SHA-256.
            _ => Sha256::digest(s.as_bytes()).to_vec(),
        }
    };
    Key::from_slice(&bytes).map_err(|e| e.to_string())
}

fn hex_digit(c: u8) -> Result<u8, String> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err("bad hex digit".into()),
    }
}

/// Standard base64 (RFC 4648 §4), padded or not.
fn base64(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err("not hex or base64".into()),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            // Masked to one octet.
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_base64_and_rotation() {
        let hex = "00".repeat(31) + "ff";
        let b64 = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAP8=";
        assert_eq!(parse_key(&hex).unwrap(), parse_key(b64).unwrap());
        let ring = parse(&format!("# rotation\n{hex}\n\n{}\n", "11".repeat(32))).unwrap();
        assert_eq!(ring.keys().count(), 2);
        assert!(parse("").is_err());
        assert!(parse("# only a comment\n").is_err());
    }

    #[test]
    fn metallb_secret_is_a_passphrase() {
        // `openssl rand -base64 128`: 172 characters, 128 octets.
        let secret = "A".repeat(170) + "==";
        let key = parse_key(&secret).unwrap();
        assert_eq!(
            key,
            Key::from_slice(&Sha256::digest(secret.as_bytes())).unwrap()
        );
        // Short or odd strings too; distinct passphrases, distinct keys.
        assert_ne!(parse_key("abcd").unwrap(), parse_key("abce").unwrap());
        // 32 octets of base64 stay the key itself.
        let b64 = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAP8=";
        assert_ne!(
            parse_key(b64).unwrap(),
            Key::from_slice(&Sha256::digest(b64.as_bytes())).unwrap()
        );
    }
}
