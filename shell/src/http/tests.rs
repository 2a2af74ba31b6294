//! The server in-process, over loopback (several 127.0.0.0/8 sources).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

use super::*;
use crate::health::State;

fn source(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

async fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    let sock = TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(from, 0)).unwrap();
    sock.connect(to).await.unwrap()
}

/// One request with `Connection: close`; the whole response.
async fn get_from(from: IpAddr, to: SocketAddr, method: &str, path: &str) -> String {
    let mut c = connect_from(from, to).await;
    c.write_all(
        format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut s = String::new();
    c.read_to_string(&mut s).await.unwrap();
    s
}

async fn start(config: Config, health: Health) -> Handle {
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), config)
        .await
        .unwrap();
    server
        .spawn(Routes::new(health, || "a_metric 1\n".to_owned()))
        .unwrap()
}

/// Waits for the peer to close: Ok(()) on EOF or reset.
async fn closed(c: &mut TcpStream) {
    let mut buf = [0u8; 1024];
    loop {
        match c.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[tokio::test]
async fn routes_answer_from_metrics_and_health() {
    let health = Health::new();
    let config_ready = health.component("configuration");
    let server = start(Config::default(), health.clone()).await;
    let addr = server.local_addr();
    let get = |path: &'static str| get_from(source(1), addr, "GET", path);

    let m = get("/metrics").await;
    assert!(m.starts_with("HTTP/1.1 200 OK\r\n"), "{m}");
    assert!(
        m.contains("content-type: text/plain; version=0.0.4\r\n"),
        "{m}"
    );
    assert!(
        m.contains("\r\n\r\na_metric 1\n# HELP ferrolb_live "),
        "{m}"
    );
    assert!(m.contains("\nferrolb_ready 0\n"), "{m}");
    assert!(
        m.ends_with("\nferrolb_component_ready{component=\"configuration\"} 0\n"),
        "{m}"
    );
    assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
    let r = get("/readyz").await;
    assert!(r.starts_with("HTTP/1.1 503"), "{r}");
    assert!(r.ends_with("not ready: configuration: starting\n"), "{r}");
    config_ready.ready();
    assert!(get("/readyz?verbose").await.ends_with("\r\n\r\nok\n"));
    health.component("bgp 10.0.0.1").fail("task panicked");
    let h = get("/healthz").await;
    assert!(h.starts_with("HTTP/1.1 500"), "{h}");
    assert!(h.ends_with("failed: bgp 10.0.0.1: task panicked\n"), "{h}");
    assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
    assert!(get("/nope").await.starts_with("HTTP/1.1 404"));
    let post = get_from(source(1), addr, "POST", "/metrics").await;
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    assert!(post.contains("allow: GET, HEAD\r\n"), "{post}");
    let head = get_from(source(1), addr, "HEAD", "/metrics").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.ends_with("\r\n\r\n"), "HEAD has no body: {head}");
    server.shutdown().await;
}

#[tokio::test]
async fn keep_alive_is_limited_in_requests() {
    let config = Config {
        max_requests_per_connection: 3,
        ..Config::default()
    };
    let server = start(config, Health::new()).await;
    let mut c = connect_from(source(1), server.local_addr()).await;
    let mut all = String::new();
    for _ in 0..3 {
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = c.read(&mut buf).await.unwrap();
        all.push_str(std::str::from_utf8(&buf[..n]).unwrap());
    }
    assert_eq!(all.matches("HTTP/1.1 200").count(), 3, "{all}");
    // Only the third says close, and then the server closes.
    assert_eq!(all.matches("connection: close").count(), 1, "{all}");
    closed(&mut c).await;
    server.shutdown().await;
}

#[tokio::test]
async fn slow_and_idle_connections_are_closed_after_the_header_timeout() {
    let config = Config {
        header_timeout: Duration::from_millis(300),
        ..Config::default()
    };
    let server = start(config.clone(), Health::new()).await;
    let addr = server.local_addr();
    let t0 = Instant::now();
    let mut idle = connect_from(source(1), addr).await;
    let mut slow = connect_from(source(2), addr).await;
    let trickle = async {
        for b in b"GET /healthz HTTP/1.1\r\nHost: x\r\n" {
            if slow.write_all(&[*b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        closed(&mut slow).await;
    };
    tokio::join!(closed(&mut idle), trickle);
    // Neither was closed before its time ran out.
    assert!(t0.elapsed() >= config.header_timeout, "{:?}", t0.elapsed());
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_that_does_not_read_its_response_is_closed_after_the_request_timeout() {
    let config = Config {
        request_timeout: Duration::from_millis(400),
        ..Config::default()
    };
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), config.clone())
        .await
        .unwrap();
    // More than any socket buffers hold.
    let big = "x".repeat(32 << 20);
    let server = server
        .spawn(Routes::new(Health::new(), move || big.clone()))
        .unwrap();
    let sock = TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut c = sock.connect(server.local_addr()).await.unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let t0 = Instant::now();
    tokio::time::sleep(config.request_timeout).await;
    // Now drain: the stream must end well short of the whole body.
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match c.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    assert!(got < 32 << 20, "read {got} bytes: the whole body");
    assert!(t0.elapsed() >= config.request_timeout);
    server.shutdown().await;
}

#[tokio::test]
async fn at_the_caps_the_oldest_connection_makes_room_for_a_probe() {
    let config = Config {
        max_connections: 4,
        max_connections_per_source: 2,
        ..Config::default()
    };
    let server = start(config, Health::new()).await;
    let addr = server.local_addr();
    // Two sources fill every slot with idle connections, and a third
    // source tries to take more than its share.
    let mut held = Vec::new();
    for n in [10, 10, 11, 11] {
        held.push(connect_from(source(n), addr).await);
    }
    let mut greedy = Vec::new();
    for _ in 0..3 {
        greedy.push(connect_from(source(12), addr).await);
    }
    // The probe is answered every time.
    for _ in 0..5 {
        let r = get_from(source(2), addr, "GET", "/healthz").await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    // The greedy source's first connection made room for its third: it
    // was closed, at once, not after a timeout.
    closed(&mut greedy[0]).await;
    // The oldest idle connections were closed for the newcomers.
    closed(&mut held[0]).await;
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_closes_idle_connections_and_stops_accepting() {
    let server = start(Config::default(), Health::new()).await;
    let addr = server.local_addr();
    let mut idle = connect_from(source(1), addr).await;
    // Let the server accept it.
    let r = get_from(source(1), addr, "GET", "/healthz").await;
    assert!(r.starts_with("HTTP/1.1 200"));
    let t0 = Instant::now();
    server.shutdown().await;
    // Idle connections close at once, well before the 2 s grace.
    closed(&mut idle).await;
    assert!(
        t0.elapsed() < Config::default().shutdown_grace,
        "{:?}",
        t0.elapsed()
    );
    assert!(TcpStream::connect(addr).await.is_err());
}

#[test]
fn state_lines_in_the_health_bodies() {
    let health = Health::new();
    health.check("x", || State::Failed("why".into()));
    let routes = Routes::new(health, String::new);
    let (status, _, body) = routes.respond(&Method::GET, "/healthz");
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(body, "failed: x: why\n");
}

#[path = "../../tests/support/https.rs"]
mod https;

mod secure_listener {
    use std::future::Future;
    use std::pin::Pin;

    use super::https::{self, Trust};
    use super::*;
    use crate::http::review::{Gate, Reviewer, Verdict};
    use crate::http::secure::{CertSource, Secure, TlsOptions};

    /// Tokens by name: `good` may read, `other` may not, `boom` cannot be
    /// reviewed, anything else is not a token.
    struct Table;

    impl Reviewer for Table {
        fn review<'a>(
            &'a self,
            token: &'a str,
        ) -> Pin<Box<dyn Future<Output = Result<Verdict, String>> + Send + 'a>> {
            Box::pin(async move {
                match token {
                    "good" => Ok(Verdict::Allowed { user: "g".into() }),
                    "other" => Ok(Verdict::Forbidden {
                        user: "system:serviceaccount:ns:other".into(),
                    }),
                    "boom" => Err("apiserver unreachable".into()),
                    _ => Ok(Verdict::Unauthenticated),
                }
            })
        }
    }

    async fn start_secure(config: Config, options: &TlsOptions) -> Handle {
        let secure = Secure::new(
            options,
            CertSource::SelfSigned,
            Arc::new(Gate::new(Arc::new(Table))),
        )
        .unwrap();
        Server::bind("127.0.0.1:0".parse().unwrap(), config)
            .await
            .unwrap()
            .spawn_secure(
                Routes::new(Health::new(), || "a_metric 1\n".to_owned()),
                secure,
            )
            .unwrap()
    }

    #[tokio::test]
    async fn answers_metrics_to_allowed_tokens_only() {
        let server = start_secure(Config::default(), &TlsOptions::default()).await;
        let addr = server.local_addr();
        let any = https::client(Trust::Any, false);
        let get = |path: &'static str, token: Option<&'static str>| {
            let any = Arc::clone(&any);
            async move { https::get(&any, addr, path, token).await.unwrap() }
        };
        let (code, r) = get("/metrics", None).await;
        assert_eq!(code, 401, "{r}");
        assert!(r.contains("www-authenticate: Bearer\r\n"), "{r}");
        assert_eq!(get("/metrics", Some("nope")).await.0, 401);
        let (code, r) = get("/metrics", Some("other")).await;
        assert_eq!(code, 403, "{r}");
        assert!(r.contains("system:serviceaccount:ns:other"), "{r}");
        assert_eq!(get("/metrics", Some("boom")).await.0, 500);
        let (code, r) = get("/metrics", Some("good")).await;
        assert_eq!(code, 200, "{r}");
        assert!(
            https::body(&r).starts_with("a_metric 1\n# HELP ferrolb_live "),
            "{r}"
        );
        // Only /metrics, and only GET and HEAD, whoever asks.
        assert_eq!(get("/healthz", Some("good")).await.0, 404);
        assert_eq!(get("/readyz", None).await.0, 404);
        let post = https::request(&any, addr, "POST", "/metrics", Some("good"))
            .await
            .unwrap();
        assert_eq!(post.0, 405, "{}", post.1);
        // MetalLB's default minimum is TLS 1.3: a TLS 1.2 client is refused.
        let old = https::client(Trust::Any, true);
        let e = https::get(&old, addr, "/metrics", Some("good"))
            .await
            .unwrap_err();
        assert!(e.starts_with("handshake"), "{e}");
        // Plain HTTP gets no HTTP answer.
        let plain = get_from(source(1), addr, "GET", "/metrics").await;
        assert!(!plain.starts_with("HTTP/1.1"), "{plain}");
        server.shutdown().await;
    }

    #[tokio::test]
    async fn tls12_is_offered_when_asked_for() {
        let options = TlsOptions::parse(
            Some("VersionTLS12"),
            Some("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
            None,
        )
        .unwrap();
        let server = start_secure(Config::default(), &options).await;
        let old = https::client(Trust::Any, true);
        let (code, _) = https::get(&old, server.local_addr(), "/metrics", Some("good"))
            .await
            .unwrap();
        assert_eq!(code, 200);
        server.shutdown().await;
    }

    #[tokio::test]
    async fn a_silent_handshake_is_closed_after_the_header_timeout() {
        let config = Config {
            header_timeout: Duration::from_millis(300),
            ..Config::default()
        };
        let server = start_secure(config.clone(), &TlsOptions::default()).await;
        let t0 = Instant::now();
        let mut silent = connect_from(source(1), server.local_addr()).await;
        closed(&mut silent).await;
        assert!(t0.elapsed() >= config.header_timeout, "{:?}", t0.elapsed());
        server.shutdown().await;
    }
}

/// `n` lines of 100 bytes, written in pieces as asked.
struct Hundreds {
    n: usize,
    at: usize,
}

impl Chunks for Hundreds {
    fn fill(&mut self, out: &mut String, min: usize) -> bool {
        let start = out.len();
        while self.at < self.n && out.len() - start < min {
            out.push_str(&format!("{:099}\n", self.at));
            self.at += 1;
        }
        self.at < self.n
    }

    fn rewind(&mut self) {
        self.at = 0;
    }
}

#[tokio::test]
async fn a_streamed_body_lets_the_task_go_before_each_written_piece() {
    let mut text = Text::from("head\n".to_owned());
    // Three pieces: two of a chunk (and less than a line more), the rest.
    let lines = 2 * CHUNK.div_ceil(100) + 5;
    text.push_chunks(Hundreds { n: lines, at: 0 });
    text.push_str("tail\n".to_owned());
    let len = text.measure().await;
    assert_eq!(len, (5 + 100 * lines + 5) as u64);
    let mut body = Streamed {
        text,
        len,
        yielded: false,
        done: None,
    };
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut poll = || match Pin::new(&mut body).poll_frame(&mut cx) {
        Poll::Pending => None,
        Poll::Ready(Some(Ok(frame))) => Some(frame.into_data().unwrap().len()),
        Poll::Ready(None) => Some(0),
        Poll::Ready(Some(Err(e))) => match e {},
    };
    let pieces = (CHUNK.div_ceil(100)) * 100;
    // The whole part at once; before each written piece, a turn for the
    // other tasks.
    let seen: Vec<Option<usize>> = (0..9).map(|_| poll()).collect();
    assert_eq!(
        seen,
        [
            Some(5),
            None,
            Some(pieces),
            None,
            Some(pieces),
            None,
            Some(500),
            Some(5),
            Some(0),
        ]
    );
    assert!(body.is_end_stream());
    assert_eq!(body.size_hint().exact(), Some(0));
}
