//! bgp-decode: decode a stream of raw BGP messages into JSON, one object
//! per message per line.

use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use bgp::frame;
use bgp::wire::{AddPathSet, DecodeCtx, Family, HeaderError, Message, Notification, json};
use clap::Parser;

/// Decode raw BGP messages (each starting with the 16-octet marker) into
/// JSON, one object per line.
///
/// A malformed message prints {"error": {"code", "subcode", "name",
/// "reason", "data"}} with the NOTIFICATION a BGP speaker would send, and
/// decoding goes on with the next message. A broken frame (bad marker,
/// impossible length, or a stream that ends inside a message) prints an
/// error and ends with exit status 1.
///
/// Example: bgp-decode testdata/bgp/frr-bird.frr.bin
#[derive(Debug, Parser)]
#[command(version, about, long_about)]
struct Args {
    /// Input file; "-" or none reads standard input.
    file: Option<PathBuf>,

    /// The input is hexadecimal text; whitespace and a leading "0x" on
    /// each word are ignored.
    #[arg(long)]
    hex: bool,

    /// Decode AS_PATH and AGGREGATOR with 4-octet AS numbers (RFC 6793),
    /// as on every modern session. Use --as4=false for a 2-octet session.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    as4: bool,

    /// Families whose NLRI carry ADD-PATH path identifiers (RFC 7911):
    /// "ipv4-unicast", "ipv6-unicast" or "all"; repeat or separate with
    /// commas. Given without a value, means "all".
    #[arg(long, value_delimiter = ',', num_args = 0.., default_missing_value = "all")]
    add_path: Vec<String>,

    /// Accept UPDATE, NOTIFICATION and ROUTE-REFRESH up to 65535 octets
    /// (RFC 8654 extended messages).
    #[arg(long)]
    extended_message: bool,

    /// Pretty-print each JSON object over several lines.
    #[arg(long)]
    pretty: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bgp-decode: {e}");
            ExitCode::from(2)
        }
    }
}

fn context(args: &Args) -> Result<DecodeCtx, String> {
    let mut add_path = AddPathSet::EMPTY;
    for name in &args.add_path {
        match name.as_str() {
            "ipv4-unicast" => add_path.insert(Family::Ipv4Unicast),
            "ipv6-unicast" => add_path.insert(Family::Ipv6Unicast),
            "all" => Family::ALL.iter().for_each(|f| add_path.insert(*f)),
            other => {
                return Err(format!(
                    "--add-path: unknown family {other:?} (ipv4-unicast, ipv6-unicast, all)"
                ));
            }
        }
    }
    Ok(DecodeCtx {
        as4: args.as4,
        extended_message: args.extended_message,
        add_path,
    })
}

fn read_input(args: &Args) -> Result<Vec<u8>, String> {
    let mut raw = Vec::new();
    match args.file.as_deref() {
        None => io::stdin().read_to_end(&mut raw).map(drop),
        Some(p) if p.as_os_str() == "-" => io::stdin().read_to_end(&mut raw).map(drop),
        Some(p) => std::fs::read(p).map(|b| raw = b),
    }
    .map_err(|e| format!("reading input: {e}"))?;
    if !args.hex {
        return Ok(raw);
    }
    let text = String::from_utf8(raw).map_err(|_| "--hex: input is not text".to_owned())?;
    let mut digits = String::new();
    for word in text.split_whitespace() {
        digits.push_str(word.strip_prefix("0x").unwrap_or(word));
    }
    hex_decode(&digits)
}

fn hex_decode(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err("--hex: odd number of hex digits".into());
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(format!("--hex: {:?} is not a hex digit", char::from(c))),
    };
    s.as_bytes()
        .chunks(2)
        .map(|p| Ok(nibble(p[0])? << 4 | nibble(p[1])?))
        .collect()
}

/// Decodes everything; returns whether the framing held to the end.
fn run(args: &Args) -> Result<bool, String> {
    let ctx = context(args)?;
    let input = read_input(args)?;
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut emit = |v: &serde_json::Value| -> Result<(), String> {
        let line = if args.pretty {
            serde_json::to_string_pretty(v)
        } else {
            serde_json::to_string(v)
        };
        writeln!(out, "{}", line.map_err(|e| e.to_string())?)
            .map_err(|e| format!("writing output: {e}"))
    };
    let mut rest = &input[..];
    let mut offset = 0usize;
    while !rest.is_empty() {
        let len = match frame::decode(rest, &ctx) {
            Ok(Some(len)) => len,
            Ok(None) => {
                let reason = format!(
                    "stream ends inside a message at offset {offset}: {} more octets needed",
                    frame::needed(rest)
                );
                emit(&frame_error(
                    &HeaderError::BadLength {
                        length: rest.len() as u16,
                    },
                    reason,
                ))?;
                return Ok(false);
            }
            Err(e) => {
                let reason = format!("{e} at offset {offset}");
                emit(&frame_error(&e, reason))?;
                return Ok(false);
            }
        };
        match Message::parse(&rest[..len], &ctx) {
            Ok(msg) => emit(&json::message(&msg))?,
            Err(e) => emit(&json::error(&e))?,
        }
        rest = &rest[len..];
        offset += len;
    }
    Ok(true)
}

fn frame_error(e: &HeaderError, reason: String) -> serde_json::Value {
    let n = Notification::from(e);
    serde_json::json!({
        "error": {
            "code": u8::from(n.code),
            "subcode": n.subcode,
            "name": format!("{} / {}", n.code_name(), n.subcode_name()),
            "reason": reason,
            "fatal": true,
        }
    })
}
