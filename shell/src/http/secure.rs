//! TLS for the secure metrics listener (MetalLB's `--port`): MetalLB's
//! TLS flags read into a rustls configuration, the certificate from
//! `--metrics-cert-dir` (re-read while running) or a self-signed one made
//! at start, and [`Secure`], what [`super::Server::spawn_secure`] needs.
//!
//! MetalLB's flags are Go's: `--tls-min-version` VersionTLS12 or
//! VersionTLS13 (empty: TLS 1.3, MetalLB's default), `--tls-cipher-suites`
//! Go's IANA names for TLS 1.2 (TLS 1.3 suites cannot be chosen, in Go as
//! in rustls), `--tls-curve-preferences` Go's numeric CurveIDs. rustls
//! (with ring) implements a subset: TLS 1.2 only with ECDHE and AES-GCM or
//! ChaCha20-Poly1305, the groups X25519, P-256 and P-384. What it cannot
//! do is listed in [`TlsOptions::notes`] (the server logs it once) and
//! left out; a name Go does not know either is an error, as in MetalLB.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{CipherSuite, NamedGroup, ServerConfig, SupportedCipherSuite};
use tokio_rustls::TlsAcceptor;

use super::review::Gate;

/// The certificate file in `--metrics-cert-dir` (PEM, the leaf first).
pub const CERT_FILE: &str = "tls.crt";
/// The private key file in `--metrics-cert-dir` (PEM: PKCS#8, PKCS#1 or
/// SEC1).
pub const KEY_FILE: &str = "tls.key";

/// MetalLB's TLS flags, parsed: what rustls will offer.
#[derive(Clone)]
pub struct TlsOptions {
    tls12: bool,
    /// TLS 1.2 suites chosen, in order; `None`: rustls's.
    suites: Option<Vec<CipherSuite>>,
    /// Key exchange groups chosen, in order; `None`: rustls's.
    groups: Option<Vec<NamedGroup>>,
    notes: Vec<String>,
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("tls12", &self.tls12)
            .field("suites", &self.suites)
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

impl TlsOptions {
    /// Reads `--tls-min-version`, `--tls-cipher-suites` and
    /// `--tls-curve-preferences` (each empty or absent for the default).
    ///
    /// # Errors
    /// A version, suite or curve Go does not know either (naming the
    /// flag), cipher suites with a TLS 1.3 minimum (MetalLB refuses that
    /// too), or a list of which rustls can honour nothing.
    pub fn parse(
        min_version: Option<&str>,
        cipher_suites: Option<&str>,
        curves: Option<&str>,
    ) -> Result<Self, String> {
        let mut notes = Vec::new();
        let tls12 = match min_version.unwrap_or("").trim() {
            "" | "VersionTLS13" => false,
            "VersionTLS12" => true,
            old @ ("VersionTLS10" | "VersionTLS11") => {
                notes.push(format!(
                    "--tls-min-version {old}: rustls has no TLS 1.0 or 1.1; TLS 1.2 is the minimum"
                ));
                true
            }
            other => {
                return Err(format!(
                    "--tls-min-version {other:?}: unknown (VersionTLS12 or VersionTLS13)"
                ));
            }
        };
        let suites = match list(cipher_suites) {
            None => None,
            Some(_) if !tls12 => {
                return Err(
                    "--tls-cipher-suites: cipher suites cannot be configured with TLS 1.3 (the minimum unless --tls-min-version=VersionTLS12)".into(),
                );
            }
            Some(names) => {
                let mut chosen = Vec::new();
                for name in names {
                    match go_suite(name) {
                        Some(GoSuite::Tls12(s)) => chosen.push(s),
                        Some(GoSuite::Tls13) => notes.push(format!(
                            "--tls-cipher-suites {name}: a TLS 1.3 suite; every TLS 1.3 suite is always offered"
                        )),
                        Some(GoSuite::Unsupported) => notes.push(format!(
                            "--tls-cipher-suites {name}: not implemented by rustls (TLS 1.2 is offered with ECDHE and AES-GCM or ChaCha20-Poly1305 only); left out"
                        )),
                        None => {
                            return Err(format!("--tls-cipher-suites {name}: unknown cipher suite"));
                        }
                    }
                }
                if chosen.is_empty() {
                    return Err(
                        "--tls-cipher-suites: rustls implements none of these TLS 1.2 suites"
                            .into(),
                    );
                }
                Some(chosen)
            }
        };
        let groups = match list(curves) {
            None => None,
            Some(ids) => {
                let mut chosen = Vec::new();
                for id in ids {
                    let n: u16 = id.parse().map_err(|_| {
                        format!("--tls-curve-preferences {id}: not a numeric CurveID")
                    })?;
                    match n {
                        23 => chosen.push(NamedGroup::secp256r1),
                        24 => chosen.push(NamedGroup::secp384r1),
                        29 => chosen.push(NamedGroup::X25519),
                        25 | 4587..=4589 => notes.push(format!(
                            "--tls-curve-preferences {n}: not implemented by rustls with ring (X25519, P-256 and P-384 are); left out"
                        )),
                        _ => {
                            return Err(format!(
                                "--tls-curve-preferences {n}: unknown CurveID"
                            ));
                        }
                    }
                }
                if chosen.is_empty() {
                    return Err(
                        "--tls-curve-preferences: rustls implements none of these curves".into(),
                    );
                }
                Some(chosen)
            }
        };
        Ok(Self {
            tls12,
            suites,
            groups,
            notes,
        })
    }

    /// What was asked for and cannot be done, one line each: the server
    /// logs them once.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Whether TLS 1.2 is offered (else TLS 1.3 only).
    pub fn tls12(&self) -> bool {
        self.tls12
    }

    /// The ring provider with the suites and groups chosen.
    fn provider(&self) -> CryptoProvider {
        let mut p = rustls::crypto::ring::default_provider();
        if let Some(chosen) = &self.suites {
            // The TLS 1.3 suites stay; TLS 1.2's in the order given.
            let all = p.cipher_suites.clone();
            p.cipher_suites = all
                .iter()
                .filter(|s| matches!(s, SupportedCipherSuite::Tls13(_)))
                .copied()
                .chain(
                    chosen
                        .iter()
                        .filter_map(|c| all.iter().find(|s| s.suite() == *c).copied()),
                )
                .collect();
        }
        if let Some(chosen) = &self.groups {
            let all: Vec<&'static dyn SupportedKxGroup> = p.kx_groups.clone();
            p.kx_groups = chosen
                .iter()
                .filter_map(|g| all.iter().find(|k| k.name() == *g).copied())
                .collect();
        }
        p
    }
}

impl Default for TlsOptions {
    /// MetalLB's defaults: TLS 1.3 only, rustls's suites and groups.
    fn default() -> Self {
        Self {
            tls12: false,
            suites: None,
            groups: None,
            notes: Vec::new(),
        }
    }
}

/// A comma-separated flag value, without empty items; `None` when empty.
fn list(value: Option<&str>) -> Option<Vec<&str>> {
    let items: Vec<&str> = value
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    (!items.is_empty()).then_some(items)
}

enum GoSuite {
    Tls12(CipherSuite),
    Tls13,
    Unsupported,
}

/// A cipher suite by its Go name (crypto/tls, and Kubernetes' aliases).
fn go_suite(name: &str) -> Option<GoSuite> {
    use CipherSuite as C;
    Some(match name {
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => {
            GoSuite::Tls12(C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)
        }
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => {
            GoSuite::Tls12(C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384)
        }
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
        | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => {
            GoSuite::Tls12(C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256)
        }
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => {
            GoSuite::Tls12(C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)
        }
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => {
            GoSuite::Tls12(C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384)
        }
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => {
            GoSuite::Tls12(C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256)
        }
        "TLS_AES_128_GCM_SHA256" | "TLS_AES_256_GCM_SHA384" | "TLS_CHACHA20_POLY1305_SHA256" => {
            GoSuite::Tls13
        }
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"
        | "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA"
        | "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"
        | "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA"
        | "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256"
        | "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"
        | "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA"
        | "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA"
        | "TLS_ECDHE_RSA_WITH_RC4_128_SHA"
        | "TLS_RSA_WITH_RC4_128_SHA"
        | "TLS_RSA_WITH_3DES_EDE_CBC_SHA"
        | "TLS_RSA_WITH_AES_128_CBC_SHA"
        | "TLS_RSA_WITH_AES_256_CBC_SHA"
        | "TLS_RSA_WITH_AES_128_CBC_SHA256"
        | "TLS_RSA_WITH_AES_128_GCM_SHA256"
        | "TLS_RSA_WITH_AES_256_GCM_SHA384" => GoSuite::Unsupported,
        _ => return None,
    })
}

/// Where the certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// `tls.crt` and `tls.key` in this directory, re-read when they change.
    Dir(PathBuf),
    /// A self-signed certificate made at start (for localhost and the
    /// host's name), as MetalLB's programs make one without
    /// `--metrics-cert-dir`.
    SelfSigned,
}

/// The certificate in use, swapped when the directory's files change.
#[derive(Debug)]
pub(crate) struct Current(Mutex<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.0.lock().unwrap_or_else(PoisonError::into_inner),
        ))
    }
}

/// The certificate directory being watched: the files' bytes last loaded.
#[derive(Debug)]
pub(crate) struct Watched {
    dir: PathBuf,
    loaded: (Vec<u8>, Vec<u8>),
    provider: Arc<CryptoProvider>,
    current: Arc<Current>,
}

impl Watched {
    /// Re-reads the files; swaps the certificate when they changed and
    /// still hold a valid pair. `Ok(true)` when swapped.
    pub(crate) fn reload(&mut self) -> Result<bool, String> {
        let files = read_pair(&self.dir)?;
        if files == self.loaded {
            return Ok(false);
        }
        let key = certified(&files, &self.provider)?;
        *self
            .current
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(key);
        self.loaded = files;
        Ok(true)
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// What the secure listener needs: the TLS acceptor, the certificate
/// directory to watch (if any) and the token gate.
pub struct Secure {
    pub(crate) acceptor: TlsAcceptor,
    pub(crate) watched: Option<Watched>,
    pub(crate) gate: Arc<Gate>,
    pub(crate) notes: Vec<String>,
    pub(crate) source: CertSource,
}

impl fmt::Debug for Secure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secure")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Secure {
    /// TLS with `options` and the certificate from `source`, requests
    /// checked by `gate`. HTTP/1.1 only (ALPN `http/1.1`), as MetalLB
    /// turns HTTP/2 off on its metrics.
    ///
    /// # Errors
    /// A certificate directory without a readable, valid `tls.crt` and
    /// `tls.key` that match (the message names the file), or a
    /// self-signed certificate that could not be made.
    pub fn new(options: &TlsOptions, source: CertSource, gate: Arc<Gate>) -> Result<Self, String> {
        let provider = Arc::new(options.provider());
        let (key, watched_files) = match &source {
            CertSource::Dir(dir) => {
                let files = read_pair(dir)?;
                (certified(&files, &provider)?, Some(files))
            }
            CertSource::SelfSigned => (self_signed(&provider)?, None),
        };
        let current = Arc::new(Current(Mutex::new(Arc::new(key))));
        let versions: &[&'static rustls::SupportedProtocolVersion] = if options.tls12 {
            &[&rustls::version::TLS13, &rustls::version::TLS12]
        } else {
            &[&rustls::version::TLS13]
        };
        let mut config = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(versions)
            .map_err(|e| format!("TLS configuration: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(&current) as Arc<dyn ResolvesServerCert>);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let watched = match (&source, watched_files) {
            (CertSource::Dir(dir), Some(loaded)) => Some(Watched {
                dir: dir.clone(),
                loaded,
                provider,
                current,
            }),
            _ => None,
        };
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            watched,
            gate,
            notes: options.notes.clone(),
            source,
        })
    }
}

/// The bytes of `dir/tls.crt` and `dir/tls.key`.
fn read_pair(dir: &Path) -> Result<(Vec<u8>, Vec<u8>), String> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|e| format!("--metrics-cert-dir: {}: {e}", path.display()))
    };
    Ok((read(CERT_FILE)?, read(KEY_FILE)?))
}

/// The chain and key in `files` (PEM), checked to match.
fn certified(
    (cert, key): &(Vec<u8>, Vec<u8>),
    provider: &CryptoProvider,
) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--metrics-cert-dir: {CERT_FILE}: {e}"))?;
    if chain.is_empty() {
        return Err(format!("--metrics-cert-dir: {CERT_FILE}: no certificate"));
    }
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| format!("--metrics-cert-dir: {KEY_FILE}: {e}"))?;
    CertifiedKey::from_der(chain, key, provider)
        .map_err(|e| format!("--metrics-cert-dir: {CERT_FILE} and {KEY_FILE}: {e}"))
}

/// A self-signed certificate for localhost and this host's name, with a
/// new P-256 key.
fn self_signed(provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let mut names = vec!["localhost".to_owned()];
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = host.trim();
        if !host.is_empty() && host != "localhost" {
            names.push(host.to_owned());
        }
    }
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| format!("self-signed metrics certificate: {e}"))?;
    let key = PrivateKeyDer::try_from(made.signing_key.serialize_der())
        .map_err(|e| format!("self-signed metrics certificate: {e}"))?;
    CertifiedKey::from_der(vec![made.cert.der().clone()], key, provider)
        .map_err(|e| format!("self-signed metrics certificate: {e}"))
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;

    use super::*;
    use crate::http::review::{Reviewer, Verdict};

    /// Never asked here: these tests make configurations only.
    struct Refuses;

    impl Reviewer for Refuses {
        fn review<'a>(
            &'a self,
            _token: &'a str,
        ) -> Pin<Box<dyn Future<Output = Result<Verdict, String>> + Send + 'a>> {
            Box::pin(async { Err("no API here".into()) })
        }
    }

    #[test]
    fn metallb_defaults_are_tls13_only() {
        let o = TlsOptions::parse(None, None, Some("")).unwrap();
        assert!(!o.tls12());
        assert!(o.notes().is_empty());
        assert!(
            !TlsOptions::parse(Some("VersionTLS13"), None, None)
                .unwrap()
                .tls12()
        );
    }

    #[test]
    fn what_rustls_cannot_do_is_noted_and_left_out() {
        let o = TlsOptions::parse(
            Some("VersionTLS12"),
            Some("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305"),
            Some("25,29,23"),
        )
        .unwrap();
        assert!(o.tls12());
        assert_eq!(
            o.suites.as_deref(),
            Some(
                &[
                    CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                    CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
                ][..]
            )
        );
        assert_eq!(
            o.groups.as_deref(),
            Some(&[NamedGroup::X25519, NamedGroup::secp256r1][..])
        );
        assert_eq!(o.notes().len(), 3, "{:?}", o.notes());
        assert!(o.notes()[0].contains("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"));
        assert!(o.notes()[2].contains("--tls-curve-preferences 25"));
        // The provider offers the TLS 1.3 suites, then the chosen ones.
        let p = o.provider();
        let names: Vec<CipherSuite> = p.cipher_suites.iter().map(|s| s.suite()).collect();
        assert_eq!(names.len(), 5, "{names:?}");
        assert_eq!(
            names[3],
            CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        );
        let groups: Vec<NamedGroup> = p.kx_groups.iter().map(|g| g.name()).collect();
        assert_eq!(groups, [NamedGroup::X25519, NamedGroup::secp256r1]);
        let old = TlsOptions::parse(Some("VersionTLS10"), None, None).unwrap();
        assert!(old.tls12() && old.notes().len() == 1);
    }

    #[test]
    fn errors_name_the_flag() {
        for (min, suites, curves, flag) in [
            (Some("TLS1.2"), None, None, "--tls-min-version"),
            (
                Some("VersionTLS12"),
                Some("TLS_NOPE"),
                None,
                "--tls-cipher-suites",
            ),
            (
                None,
                Some("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
                None,
                "cannot be configured with TLS 1.3",
            ),
            (
                Some("VersionTLS12"),
                Some("TLS_RSA_WITH_AES_128_CBC_SHA"),
                None,
                "none of these",
            ),
            (None, None, Some("x25519"), "--tls-curve-preferences"),
            (None, None, Some("99"), "unknown CurveID"),
            (None, None, Some("25"), "none of these curves"),
        ] {
            let e = TlsOptions::parse(min, suites, curves).unwrap_err();
            assert!(e.contains(flag), "{e}");
        }
    }

    #[test]
    fn a_cert_dir_must_hold_a_matching_pair() {
        let dir = std::env::temp_dir().join(format!("shell-secure-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let gate = || Arc::new(Gate::new(Arc::new(Refuses)));
        let o = TlsOptions::default();
        let e = Secure::new(&o, CertSource::Dir(dir.clone()), gate()).unwrap_err();
        assert!(
            e.contains("--metrics-cert-dir") && e.contains("tls.crt"),
            "{e}"
        );
        let a = rcgen::generate_simple_self_signed(vec!["a".to_owned()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["b".to_owned()]).unwrap();
        std::fs::write(dir.join(CERT_FILE), a.cert.pem()).unwrap();
        std::fs::write(dir.join(KEY_FILE), b.signing_key.serialize_pem()).unwrap();
        let e = Secure::new(&o, CertSource::Dir(dir.clone()), gate()).unwrap_err();
        assert!(e.contains("tls.crt and tls.key"), "{e}");
        std::fs::write(dir.join(KEY_FILE), a.signing_key.serialize_pem()).unwrap();
        let mut s = Secure::new(&o, CertSource::Dir(dir.clone()), gate()).unwrap();
        let w = s.watched.as_mut().unwrap();
        assert_eq!(w.reload(), Ok(false), "unchanged files");
        // A half-written pair keeps the old certificate.
        std::fs::write(dir.join(CERT_FILE), b.cert.pem()).unwrap();
        assert!(w.reload().is_err());
        std::fs::write(dir.join(KEY_FILE), b.signing_key.serialize_pem()).unwrap();
        assert_eq!(w.reload(), Ok(true));
        let now = w.current.0.lock().unwrap().cert[0].clone();
        assert_eq!(now, b.cert.der().clone());
        assert!(Secure::new(&o, CertSource::SelfSigned, gate()).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
