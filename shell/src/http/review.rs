//! Who may read the secure metrics: a bearer token, checked against the
//! Kubernetes API as kube-rbac-proxy and controller-runtime's secure
//! metrics check it (MetalLB's `--port` listener).
//!
//! 1. The `Authorization: Bearer <token>` header; without one, 401.
//! 2. A `TokenReview` (authentication.k8s.io/v1) of the token: not
//!    authenticated, 401.
//! 3. A `SubjectAccessReview` (authorization.k8s.io/v1) for that user, its
//!    groups, uid and extra: may it `get` the non-resource URL `/metrics`?
//!    No, 403; yes, the metrics.
//!
//! A review that fails (the API unreachable, the reviews forbidden to this
//! program) answers 500 and is not remembered. Verdicts are remembered in
//! a [`Cache`] keyed by the token's SHA-256 (the token itself is not kept):
//! allowed ones for [`ALLOWED_TTL`], refused ones for [`DENIED_TTL`], at
//! most [`CACHE_ENTRIES`] of them, so that a scrape every few seconds costs
//! no API call after its first. At most [`CONCURRENT_REVIEWS`] reviews are
//! in flight at once: a client sending new tokens fast queues behind them
//! (and is cut by the request timeout) instead of multiplying API calls.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hyper::header::{self, HeaderMap};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

/// How long an allowed verdict is remembered.
pub const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a refusal (401 or 403) is remembered.
pub const DENIED_TTL: Duration = Duration::from_secs(10);
/// Verdicts remembered at most.
pub const CACHE_ENTRIES: usize = 256;
/// Reviews in flight at most.
pub const CONCURRENT_REVIEWS: usize = 4;

/// What a token may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Authenticated, and may `get` the path.
    Allowed {
        /// The user the token belongs to.
        user: String,
    },
    /// No token, or one the API does not authenticate (401).
    Unauthenticated,
    /// Authenticated, but may not `get` the path (403).
    Forbidden {
        /// The user the token belongs to.
        user: String,
    },
}

/// Asks the API about a token: a TokenReview, then a SubjectAccessReview.
/// A trait so that the server's tests can answer without an apiserver.
pub trait Reviewer: Send + Sync + 'static {
    /// The verdict for `token` (never empty); `Err` when the API could not
    /// answer (the error says why).
    fn review<'a>(
        &'a self,
        token: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Verdict, String>> + Send + 'a>>;
}

/// The [`Reviewer`] that asks the Kubernetes API with `client` whether the
/// token's user may `get` the non-resource URL `path`.
#[derive(Clone)]
pub struct KubeReviewer {
    client: kube::Client,
    path: String,
}

impl KubeReviewer {
    /// Reviews with `client` (whose identity needs `create` on
    /// `tokenreviews` and `subjectaccessreviews`) for `get` on `path`.
    pub fn new(client: kube::Client, path: impl Into<String>) -> Self {
        Self {
            client,
            path: path.into(),
        }
    }

    async fn ask(&self, token: &str) -> Result<Verdict, String> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let tokens: Api<TokenReview> = Api::all(self.client.clone());
        let reviewed = tokens
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| format!("TokenReview: {e}"))?;
        count(&COUNTERS.api_calls);
        let status = reviewed.status.unwrap_or_default();
        let user = match status.user {
            Some(user) if status.authenticated == Some(true) => user,
            _ => return Ok(Verdict::Unauthenticated),
        };
        let name = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(self.path.clone()),
                    verb: Some("get".into()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let accesses: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let decided = accesses
            .create(&PostParams::default(), &access)
            .await
            .map_err(|e| format!("SubjectAccessReview: {e}"))?;
        count(&COUNTERS.api_calls);
        let allowed = decided
            .status
            .is_some_and(|s| s.allowed && s.denied != Some(true));
        Ok(if allowed {
            Verdict::Allowed { user: name }
        } else {
            Verdict::Forbidden { user: name }
        })
    }
}

impl Reviewer for KubeReviewer {
    fn review<'a>(
        &'a self,
        token: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Verdict, String>> + Send + 'a>> {
        Box::pin(self.ask(token))
    }
}

/// Remembered verdicts, by the SHA-256 of the token. Pure: the clock is
/// passed in.
#[derive(Debug)]
pub struct Cache {
    capacity: usize,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    entries: HashMap<[u8; 32], (Verdict, Instant)>,
}

impl Cache {
    /// At most `capacity` verdicts (at least 1), allowed ones kept for
    /// `allowed_ttl`, refusals for `denied_ttl`.
    pub fn new(capacity: usize, allowed_ttl: Duration, denied_ttl: Duration) -> Self {
        Self {
            capacity: capacity.max(1),
            allowed_ttl,
            denied_ttl,
            entries: HashMap::new(),
        }
    }

    /// The verdict remembered for `key` at `now`, if it has not expired.
    pub fn get(&mut self, key: &[u8; 32], now: Instant) -> Option<Verdict> {
        match self.entries.get(key) {
            Some((verdict, until)) if now < *until => Some(verdict.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Remembers `verdict` for `key` from `now`. When full, expired entries
    /// go first, then the one closest to expiring.
    pub fn insert(&mut self, key: [u8; 32], verdict: Verdict, now: Instant) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, until)| now < *until);
            if self.entries.len() >= self.capacity
                && let Some(soonest) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(k, _)| *k)
            {
                self.entries.remove(&soonest);
            }
        }
        let ttl = match verdict {
            Verdict::Allowed { .. } => self.allowed_ttl,
            Verdict::Unauthenticated | Verdict::Forbidden { .. } => self.denied_ttl,
        };
        self.entries.insert(key, (verdict, now + ttl));
    }

    /// Verdicts held (expired ones included until they are looked up or
    /// make room).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no verdict is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The check in front of the secure metrics: the header, the cache, then
/// the reviewer.
pub struct Gate {
    reviewer: Arc<dyn Reviewer>,
    cache: Mutex<Cache>,
    permits: Semaphore,
    /// A review failed and no review has succeeded since: later failures
    /// are logged at debug only.
    failing: AtomicBool,
}

impl Gate {
    /// A gate asking `reviewer`, with the default cache ([`CACHE_ENTRIES`],
    /// [`ALLOWED_TTL`], [`DENIED_TTL`]).
    pub fn new(reviewer: Arc<dyn Reviewer>) -> Self {
        Self::with_cache(reviewer, Cache::new(CACHE_ENTRIES, ALLOWED_TTL, DENIED_TTL))
    }

    /// A gate asking `reviewer`, remembering verdicts in `cache`.
    pub fn with_cache(reviewer: Arc<dyn Reviewer>, cache: Cache) -> Self {
        Self {
            reviewer,
            cache: Mutex::new(cache),
            permits: Semaphore::new(CONCURRENT_REVIEWS),
            failing: AtomicBool::new(false),
        }
    }

    /// The verdict for a request with `headers`; `Err` when it could not
    /// be reviewed (answer 500).
    pub async fn check(&self, headers: &HeaderMap) -> Result<Verdict, String> {
        let Some(token) = bearer(headers) else {
            count(&COUNTERS.unauthenticated);
            return Ok(Verdict::Unauthenticated);
        };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(v) = self.cached(&key) {
            count(&COUNTERS.cache_hits);
            count_verdict(&v);
            return Ok(v);
        }
        let permit = self.permits.acquire().await;
        // Another request may have reviewed the same token meanwhile.
        if let Some(v) = self.cached(&key) {
            count(&COUNTERS.cache_hits);
            count_verdict(&v);
            return Ok(v);
        }
        let reviewed = self.reviewer.review(token).await;
        drop(permit);
        match reviewed {
            Ok(v) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    info!("secure metrics: token reviews work again");
                }
                debug!(verdict = ?v, "secure metrics: token reviewed");
                self.lock().insert(key, v.clone(), Instant::now());
                count_verdict(&v);
                Ok(v)
            }
            Err(e) => {
                count(&COUNTERS.errors);
                if self.failing.swap(true, Ordering::Relaxed) {
                    debug!(error = %e, "secure metrics: token review failed");
                } else {
                    warn!(error = %e, "secure metrics: token review failed (answering 500; does this program's service account have create on tokenreviews and subjectaccessreviews?)");
                }
                Err(e)
            }
        }
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Verdict> {
        self.lock().get(key, Instant::now())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        // Each cache operation leaves it consistent.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in
/// any case, as RFC 7235 §2.1 has it).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The process's secure-metrics counters (one secure listener per
/// process), for [`render`].
struct Counters {
    allowed: AtomicU64,
    unauthenticated: AtomicU64,
    forbidden: AtomicU64,
    errors: AtomicU64,
    cache_hits: AtomicU64,
    api_calls: AtomicU64,
}

static COUNTERS: Counters = Counters {
    allowed: AtomicU64::new(0),
    unauthenticated: AtomicU64::new(0),
    forbidden: AtomicU64::new(0),
    errors: AtomicU64::new(0),
    cache_hits: AtomicU64::new(0),
    api_calls: AtomicU64::new(0),
};

fn count(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn count_verdict(v: &Verdict) {
    count(match v {
        Verdict::Allowed { .. } => &COUNTERS.allowed,
        Verdict::Unauthenticated => &COUNTERS.unauthenticated,
        Verdict::Forbidden { .. } => &COUNTERS.forbidden,
    });
}

/// The secure metrics' counters in the exposition format, for a binary's
/// `/metrics` (on both listeners, as `process_*` are):
/// `ferrolb_secure_metrics_requests_total` by `result` (`allowed`,
/// `unauthenticated`, `forbidden`, `error`),
/// `ferrolb_secure_metrics_cache_hits_total` (verdicts taken from the
/// cache) and `ferrolb_secure_metrics_reviews_total` (TokenReview and
/// SubjectAccessReview calls answered). Empty while no secure listener
/// has been started.
pub fn render() -> String {
    if !STARTED.load(Ordering::Relaxed) {
        return String::new();
    }
    let c = &COUNTERS;
    let mut out = String::new();
    let name = "ferrolb_secure_metrics_requests_total";
    let _ = writeln!(
        out,
        "# HELP {name} Requests to the HTTPS metrics port, by the verdict on their bearer token\n# TYPE {name} counter"
    );
    for (result, n) in [
        ("allowed", &c.allowed),
        ("unauthenticated", &c.unauthenticated),
        ("forbidden", &c.forbidden),
        ("error", &c.errors),
    ] {
        let _ = writeln!(
            out,
            "{name}{{result=\"{result}\"}} {}",
            n.load(Ordering::Relaxed)
        );
    }
    for (name, help, n) in [
        (
            "ferrolb_secure_metrics_cache_hits_total",
            "Verdicts on bearer tokens taken from the cache, without an API call",
            &c.cache_hits,
        ),
        (
            "ferrolb_secure_metrics_reviews_total",
            "TokenReview and SubjectAccessReview calls the API answered",
            &c.api_calls,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
            n.load(Ordering::Relaxed)
        );
    }
    out
}

/// Set once a secure listener runs: [`render`] reports from then on.
static STARTED: AtomicBool = AtomicBool::new(false);

/// Marks the secure listener as started, for [`render`].
pub(crate) fn started() {
    STARTED.store(true, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> [u8; 32] {
        [n; 32]
    }

    fn allowed() -> Verdict {
        Verdict::Allowed { user: "u".into() }
    }

    #[test]
    fn verdicts_expire_after_their_ttl() {
        let t0 = Instant::now();
        let mut c = Cache::new(8, Duration::from_secs(60), Duration::from_secs(10));
        c.insert(key(1), allowed(), t0);
        c.insert(key(2), Verdict::Unauthenticated, t0);
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(c.get(&key(1), at(59)), Some(allowed()));
        assert_eq!(c.get(&key(2), at(9)), Some(Verdict::Unauthenticated));
        assert_eq!(c.get(&key(2), at(10)), None, "a refusal is kept 10 s");
        assert_eq!(c.get(&key(1), at(60)), None, "a grant is kept 60 s");
        assert!(c.is_empty(), "expired entries are dropped when looked up");
    }

    #[test]
    fn a_full_cache_drops_expired_entries_then_the_soonest_to_expire() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut c = Cache::new(3, Duration::from_secs(60), Duration::from_secs(10));
        c.insert(key(1), Verdict::Unauthenticated, at(0)); // until 10
        c.insert(key(2), allowed(), at(0)); // until 60
        c.insert(key(3), allowed(), at(5)); // until 65
        // Full, nothing expired: the refusal (closest to expiring) goes.
        c.insert(key(4), allowed(), at(6));
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&key(1), at(6)), None);
        assert_eq!(c.get(&key(2), at(6)), Some(allowed()));
        // Full, two expired at 61: both go, nothing else.
        c.insert(key(5), Verdict::Unauthenticated, at(61));
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&key(3), at(61)), Some(allowed()));
        assert_eq!(c.get(&key(4), at(61)), Some(allowed()));
        // Updating a held key never evicts another.
        c.insert(key(3), allowed(), at(62));
        assert_eq!(c.len(), 3);
        let mut tiny = Cache::new(0, Duration::from_secs(1), Duration::from_secs(1));
        tiny.insert(key(1), allowed(), t0);
        tiny.insert(key(2), allowed(), t0);
        assert_eq!(tiny.len(), 1, "a capacity of 0 means 1");
    }

    #[test]
    fn bearer_tokens_are_read_from_the_authorization_header() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        for (value, want) in [
            ("Bearer abc.def", Some("abc.def")),
            ("bearer  abc ", Some("abc")),
            ("Basic dXNlcjpwYXNz", None),
            ("Bearer ", None),
            ("Bearer", None),
        ] {
            h.insert(header::AUTHORIZATION, value.parse().unwrap());
            assert_eq!(bearer(&h), want, "{value:?}");
        }
    }

    /// Answers from a table and counts its calls.
    struct Table {
        calls: AtomicU64,
        fail: AtomicBool,
    }

    impl Reviewer for Table {
        fn review<'a>(
            &'a self,
            token: &'a str,
        ) -> Pin<Box<dyn Future<Output = Result<Verdict, String>> + Send + 'a>> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            let fail = self.fail.load(Ordering::Relaxed);
            Box::pin(async move {
                if fail {
                    return Err("apiserver unreachable".into());
                }
                Ok(match token {
                    "good" => allowed(),
                    "other" => Verdict::Forbidden { user: "o".into() },
                    _ => Verdict::Unauthenticated,
                })
            })
        }
    }

    #[tokio::test]
    async fn the_gate_reviews_a_token_once_then_answers_from_the_cache() {
        let table = Arc::new(Table {
            calls: AtomicU64::new(0),
            fail: AtomicBool::new(false),
        });
        let gate = Gate::new(table.clone());
        let with = |token: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                header::AUTHORIZATION,
                format!("Bearer {token}").parse().unwrap(),
            );
            h
        };
        // No header: no review at all.
        assert_eq!(
            gate.check(&HeaderMap::new()).await,
            Ok(Verdict::Unauthenticated)
        );
        assert_eq!(table.calls.load(Ordering::Relaxed), 0);
        for _ in 0..5 {
            assert_eq!(gate.check(&with("good")).await, Ok(allowed()));
            assert_eq!(
                gate.check(&with("other")).await,
                Ok(Verdict::Forbidden { user: "o".into() })
            );
            assert_eq!(gate.check(&with("bad")).await, Ok(Verdict::Unauthenticated));
        }
        assert_eq!(
            table.calls.load(Ordering::Relaxed),
            3,
            "one review per token"
        );
        // A failed review answers an error and is not remembered.
        table.fail.store(true, Ordering::Relaxed);
        assert!(gate.check(&with("new")).await.is_err());
        assert!(gate.check(&with("new")).await.is_err());
        assert_eq!(table.calls.load(Ordering::Relaxed), 5);
        table.fail.store(false, Ordering::Relaxed);
        assert_eq!(gate.check(&with("new")).await, Ok(Verdict::Unauthenticated));
    }
}
