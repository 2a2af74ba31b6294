//! The speaker's HTTPS metrics (MetalLB's `--port`) against testenv's
//! real apiserver, scraped as MetalLB's ServiceMonitor scrapes them: a
//! service account allowed to `get` /metrics reads them (200, and they
//! parse), one that is not gets 403, no token or a bad one 401, and
//! repeated scrapes are answered from the cache. With `--metrics-cert-dir`
//! the certificate there is served (a client trusting only its CA
//! verifies it); a directory without one stops the speaker with an error
//! naming the flag.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../shell/tests/support/hostile.rs"]
mod hostile;
#[path = "../../shell/tests/support/https.rs"]
mod https;
#[path = "../../shell/tests/support/secure_scrape.rs"]
mod secure_scrape;

use std::time::Duration;

use hostile::{Process, TempDir};
use secure_scrape::Readers;
use testenv::TestEnv;

/// Bounds a failure only.
const T: Duration = Duration::from_secs(60);

fn speaker(dir: &TempDir, ns: &str, port: u16, extra: &[&str]) -> Process {
    let env = TestEnv::global();
    let port = port.to_string();
    let mut args = vec![
        "--node-name",
        "n1",
        "--kubeconfig",
        env.kubeconfig_path().to_str().unwrap(),
        "--namespace",
        ns,
        "--metrics-addr",
        "127.0.0.1:0",
        "--health-probe-port",
        "0",
        "--port",
        &port,
        "--log-format",
        "json",
        "--log-level",
        "debug,kube=info,hyper=info,tower=info,hyper_util=info",
    ];
    args.extend(extra);
    Process::start(
        env!("CARGO_BIN_EXE_speaker"),
        &args,
        dir.join("speaker.log"),
    )
}

fn crds() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(TestEnv::global().install_crds(api::crds()))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speaker_serves_metrics_over_https_to_allowed_tokens() {
    let env = TestEnv::global();
    tokio::task::spawn_blocking(crds).await.unwrap();
    let readers = tokio::task::spawn_blocking(move || Readers::new(env, "spk-scrape"))
        .await
        .unwrap();
    let dir = TempDir::new("speaker-secure");
    let mut p = speaker(&dir, &readers.ns, secure_scrape::free_port(), &[]);
    let listener = secure_scrape::secure_listener(&mut p, T);
    let figures = secure_scrape::scrape_as_metallb(
        listener,
        &readers,
        "metallb_k8s_client_config_loaded_bool",
    )
    .await;
    eprintln!("speaker secure metrics: {figures:?}");
    assert!(p.alive(), "the speaker exited");
    // The self-signed certificate is named in the listening line.
    let line = p.logged("secure metrics server listening").pop().unwrap();
    assert_eq!(line["certificate"], "self-signed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_dir_is_served_and_a_wrong_one_names_the_flag() {
    let env = TestEnv::global();
    tokio::task::spawn_blocking(crds).await.unwrap();
    let readers = tokio::task::spawn_blocking(move || Readers::new(env, "spk-certs"))
        .await
        .unwrap();
    let dir = TempDir::new("speaker-certs");
    // A CA, and a certificate for localhost it signed, as cert-manager
    // would mount them (tls.crt, tls.key).
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::write(certs.join("tls.crt"), leaf.pem()).unwrap();
    std::fs::write(certs.join("tls.key"), leaf_key.serialize_pem()).unwrap();
    let mut p = speaker(
        &dir,
        &readers.ns,
        secure_scrape::free_port(),
        &["--metrics-cert-dir", certs.to_str().unwrap()],
    );
    let listener = secure_scrape::secure_listener(&mut p, T);
    let trusted = https::client(https::Trust::Ca(ca.der().clone()), false);
    let (code, r) = https::get(&trusted, listener.addr, "/metrics", Some(&readers.allowed))
        .await
        .unwrap();
    assert_eq!(code, 200, "{r}");
    secure_scrape::parse(https::body(&r));
    // A client trusting another CA refuses the certificate.
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let stranger = https::client(https::Trust::Ca(other.cert.der().clone()), false);
    let e = https::get(&stranger, listener.addr, "/metrics", Some(&readers.allowed))
        .await
        .unwrap_err();
    assert!(e.starts_with("handshake"), "{e}");
    drop(p);

    // A directory without the pair: the speaker stops, naming the flag.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let port = secure_scrape::free_port().to_string();
    let ns = readers.ns.clone();
    let (code, stderr) = tokio::task::spawn_blocking(move || {
        secure_scrape::run_to_exit(
            env!("CARGO_BIN_EXE_speaker"),
            &[
                "--node-name",
                "n1",
                "--kubeconfig",
                env.kubeconfig_path().to_str().unwrap(),
                "--namespace",
                &ns,
                "--metrics-addr",
                "127.0.0.1:0",
                "--health-probe-port",
                "0",
                "--port",
                &port,
                "--metrics-cert-dir",
                empty.to_str().unwrap(),
            ],
            T,
        )
    })
    .await
    .unwrap();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--metrics-cert-dir") && stderr.contains("tls.crt"),
        "{stderr}"
    );
}

#[test]
fn file_mode_refuses_the_https_port() {
    let dir = TempDir::new("speaker-file-port");
    let config = dir.join("config");
    std::fs::create_dir_all(&config).unwrap();
    let (code, stderr) = secure_scrape::run_to_exit(
        env!("CARGO_BIN_EXE_speaker"),
        &[
            "--node-name",
            "n1",
            "--config-dir",
            config.to_str().unwrap(),
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-probe-port",
            "0",
            "--port",
            "9120",
        ],
        T,
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("--port 9120"), "{stderr}");
}
