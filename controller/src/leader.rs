//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's
//! `leaderelection` does it: acquire when the Lease is free or its holder
//! has not renewed for `leaseDurationSeconds` (timed on our own clock from
//! when we saw the record change, so clock skew does not matter), renew
//! every retry period, step down when renewing fails for the renew
//! deadline, and release on shutdown so a standby takes over at once.
//!
//! [`Observer`] is the pure part (records seen, `now` passed in);
//! [`run`] is the thin driver: it reads and writes the Lease with
//! optimistic concurrency (`resourceVersion`), so two candidates can never
//! both win one round.
//!
//! Fencing: the leader may write only while its [`Fence`] holds, that is
//! until the renew deadline counted from the *start* of its last
//! successful Lease round. A standby takes over no earlier than a lease
//! duration after it read that round's record, which is later than the
//! start; the renew deadline is shorter than the lease duration, so the
//! old leader's fence is down before anyone else can lead. Each Lease round
//! is bounded by the time left on the fence, renewing runs alongside the
//! leader's work (a stalled round does not freeze it, nor extend it), and
//! every write checks the fence before it is sent and is bounded by the
//! time left ([`Fence::guard`]).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// Lease election settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// Our identity, written to `holderIdentity`.
    pub identity: String,
    /// `leaseDurationSeconds`: how long a standby waits for a silent leader.
    pub lease_duration: Duration,
    /// A leader that could not renew for this long steps down.
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
}

impl Config {
    /// Checks the durations as client-go does: the renew deadline must be
    /// shorter than the lease duration (else the fence could outlive the
    /// Lease), and the retry period shorter than the renew deadline.
    pub fn check(&self) -> Result<(), String> {
        if self.renew_deadline >= self.lease_duration {
            return Err(format!(
                "the renew deadline ({:?}) must be shorter than the lease duration ({:?})",
                self.renew_deadline, self.lease_duration
            ));
        }
        if self.retry_period >= self.renew_deadline {
            return Err(format!(
                "the retry period ({:?}) must be shorter than the renew deadline ({:?})",
                self.retry_period, self.renew_deadline
            ));
        }
        Ok(())
    }
}

/// The leader's licence to write: valid until an instant that each
/// successful Lease round pushes forward, and revoked at once when
/// leadership is lost. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct Fence {
    until: Arc<Mutex<Option<Instant>>>,
}

/// A write refused because leadership may be lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not written: leadership may be lost (the lease was not renewed in time)")]
pub struct Fenced;

impl Fence {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.until.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The instant the fence falls, if it is up.
    pub fn until(&self) -> Option<Instant> {
        *self.lock()
    }

    /// How long writes may still be sent (`None`: not at all).
    pub fn remaining(&self) -> Option<Duration> {
        let until = self.until()?;
        let left = until.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// Runs `write` if the fence is up, bounded by the time left on it.
    /// A write that has not completed when the fence falls is dropped
    /// (cancelled) and reported as [`Fenced`].
    pub async fn guard<T, E, F>(&self, write: F) -> Result<Result<T, E>, Fenced>
    where
        F: Future<Output = Result<T, E>>,
    {
        let left = self.remaining().ok_or(Fenced)?;
        tokio::time::timeout(left, write).await.map_err(|_| Fenced)
    }

    fn extend_to(&self, until: Instant) {
        let mut u = self.lock();
        *u = Some(u.map_or(until, |now| now.max(until)));
    }

    fn revoke(&self) {
        *self.lock() = None;
    }
}

/// What to do after reading the Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// We hold it: renew.
    Renew,
    /// Free, released or expired: take it.
    Acquire,
    /// Someone else holds it and renewed recently: wait.
    Wait,
}

/// The pure part: remembers when the Lease record last changed, on our
/// clock, and decides.
#[derive(Debug, Clone, Default)]
pub struct Observer {
    seen: Option<(Option<String>, Option<String>, Instant)>,
}

impl Observer {
    /// Records the holder and renew time read at `now`, and decides.
    /// `duration` is the Lease's own `leaseDurationSeconds`.
    pub fn handle_record(
        &mut self,
        now: Instant,
        identity: &str,
        holder: Option<&str>,
        renew_time: Option<&str>,
        duration: Duration,
    ) -> Decision {
        let holder = holder.filter(|h| !h.is_empty());
        let record = (holder.map(str::to_owned), renew_time.map(str::to_owned));
        let changed_at = match &self.seen {
            Some((h, r, at)) if (h, r) == (&record.0, &record.1) => *at,
            _ => now,
        };
        self.seen = Some((record.0, record.1, changed_at));
        match holder {
            Some(h) if h == identity => Decision::Renew,
            None => Decision::Acquire,
            Some(_) if now.saturating_duration_since(changed_at) >= duration => Decision::Acquire,
            Some(_) => Decision::Wait,
        }
    }
}

/// Shared flags for `/readyz` and the leader gauge.
#[derive(Debug, Default)]
pub struct Status {
    /// We hold the Lease.
    pub leader: AtomicBool,
    /// The last Lease round trip succeeded.
    pub lease_ok: AtomicBool,
}

/// Why the Lease could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("lease {0}")]
    Kube(#[from] kube::Error),
}

/// Runs `lead` while we hold the Lease, and stands by otherwise, until
/// `shutdown` turns true. `lead` gets the [`Fence`] its writes must go
/// through; it is dropped (cancelled) when leadership may be lost, after
/// the fence is revoked, and called again when it is regained; the Lease
/// is released on shutdown. Returns `lead`'s error if it fails.
pub async fn run<F, Fut, E>(
    client: Client,
    cfg: Config,
    status: Arc<Status>,
    mut shutdown: watch::Receiver<bool>,
    mut lead: F,
) -> Result<(), E>
where
    F: FnMut(Fence) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let mut observer = Observer::default();
    // No Lease round has succeeded yet.
    let mut first = true;
    loop {
        let fence = Fence::default();
        // Stand by until we hold the Lease.
        loop {
            if *shutdown.borrow() {
                return Ok(());
            }
            let start = Instant::now();
            match tokio::time::timeout(cfg.renew_deadline, try_round(&api, &cfg, &mut observer))
                .await
            {
                Ok(Ok(true)) => {
                    status.lease_ok.store(true, Ordering::Relaxed);
                    fence.extend_to(start + cfg.renew_deadline);
                    if fence.remaining().is_some() {
                        break;
                    }
                    // The round took the whole deadline: not safe to lead on.
                    warn!("lease acquired too late to use; trying again");
                }
                Ok(Ok(false)) => {
                    first = false;
                    status.lease_ok.store(true, Ordering::Relaxed);
                }
                Ok(Err(Error::Kube(kube::Error::Api(e)))) if first && e.code == 403 => {
                    warn!(
                        lease = %cfg.name,
                        error = %e.message,
                        "the controller may not use Leases (MetalLB's role grants none): running without leader election, as MetalLB's controller does; run one replica, or grant get, create and update on coordination.k8s.io leases to run more"
                    );
                    status.lease_ok.store(true, Ordering::Relaxed);
                    status.leader.store(true, Ordering::Relaxed);
                    return unelected(shutdown, lead).await;
                }
                Ok(Err(e)) => {
                    status.lease_ok.store(false, Ordering::Relaxed);
                    warn!(error = %e, "lease round failed");
                }
                Err(_) => {
                    status.lease_ok.store(false, Ordering::Relaxed);
                    warn!(timeout = ?cfg.renew_deadline, "lease round timed out");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(cfg.retry_period) => {}
                _ = shutdown.changed() => {}
            }
        }
        first = false;
        info!(identity = %cfg.identity, lease = %cfg.name, "became leader");
        status.leader.store(true, Ordering::Relaxed);
        // Boxed so that dropping it cancels `lead` before the Lease is
        // released.
        let mut leading = Box::pin(lead(fence.clone()));
        let outcome = loop {
            let Some(until) = fence.until() else {
                break Some(Ok(()));
            };
            // The next round, run alongside `leading` and bounded by the
            // fence: a round that does not return in time cannot renew.
            let renew = async {
                tokio::time::sleep(cfg.retry_period).await;
                let start = Instant::now();
                let left = until.saturating_duration_since(start);
                let r = tokio::time::timeout(left, try_round(&api, &cfg, &mut observer)).await;
                (start, r)
            };
            tokio::select! {
                r = &mut leading => break Some(r),
                _ = shutdown.changed() => {
                    if *shutdown.borrow() { break None; }
                }
                _ = tokio::time::sleep_until(until.into()) => {
                    warn!(identity = %cfg.identity, "could not renew the lease in time");
                    break Some(Ok(()));
                }
                (start, r) = renew => match r {
                    Ok(Ok(true)) => {
                        status.lease_ok.store(true, Ordering::Relaxed);
                        fence.extend_to(start + cfg.renew_deadline);
                    }
                    Ok(Ok(false)) => {
                        warn!(identity = %cfg.identity, "lease taken by another candidate");
                        break Some(Ok(()));
                    }
                    Ok(Err(e)) => {
                        status.lease_ok.store(false, Ordering::Relaxed);
                        warn!(error = %e, "lease renewal failed");
                    }
                    Err(_) => {
                        status.lease_ok.store(false, Ordering::Relaxed);
                        warn!("lease renewal timed out at the renew deadline");
                    }
                },
            }
        };
        // No write goes out from here on, even from a task still running.
        fence.revoke();
        status.leader.store(false, Ordering::Relaxed);
        info!(identity = %cfg.identity, "stopped leading");
        drop(leading);
        match outcome {
            None => {
                release_bounded(&api, &cfg).await;
                return Ok(());
            }
            Some(Err(e)) => {
                release_bounded(&api, &cfg).await;
                return Err(e);
            }
            Some(Ok(())) => {}
        }
    }
}

/// Runs `lead` until `shutdown` turns true, with no election (the Lease
/// API is forbidden): `lead` ending well is called again.
/// Its writes are not fenced: nothing else can make them stale.
async fn unelected<F, Fut, E>(mut shutdown: watch::Receiver<bool>, mut lead: F) -> Result<(), E>
where
    F: FnMut(Fence) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let fence = Fence::default();
    fence.extend_to(Instant::now() + UNFENCED);
    loop {
        let mut leading = Box::pin(lead(fence.clone()));
        loop {
            if *shutdown.borrow() {
                return Ok(());
            }
            tokio::select! {
                r = &mut leading => {
                    r?;
                    break;
                }
                changed = shutdown.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// How long the fence of an unelected controller stands (for ever, in
/// practice).
const UNFENCED: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// [`release`], bounded by the renew deadline (shutdown must not hang on a
/// cut-off apiserver).
async fn release_bounded(api: &Api<Lease>, cfg: &Config) {
    match tokio::time::timeout(cfg.renew_deadline, release(api, cfg)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => warn!(error = %e, "could not release the lease"),
        Err(_) => warn!("could not release the lease: timed out"),
    }
}

/// One read and, if due, one write. Returns whether we hold the Lease.
async fn try_round(api: &Api<Lease>, cfg: &Config, observer: &mut Observer) -> Result<bool, Error> {
    let now = Timestamp::now();
    let Some(mut lease) = api.get_opt(&cfg.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(cfg.name.clone()),
                namespace: Some(cfg.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(cfg.identity.clone()),
                lease_duration_seconds: Some(seconds(cfg.lease_duration)),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e.into()),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let renew = spec.renew_time.as_ref().map(|t| t.0.to_string());
    let duration = spec.lease_duration_seconds.map_or(cfg.lease_duration, |s| {
        Duration::from_secs(u64::try_from(s).unwrap_or(0))
    });
    let decision = observer.handle_record(
        Instant::now(),
        &cfg.identity,
        spec.holder_identity.as_deref(),
        renew.as_deref(),
        duration,
    );
    debug!(?decision, holder = ?spec.holder_identity, "lease read");
    let mut new = spec.clone();
    match decision {
        Decision::Wait => return Ok(false),
        Decision::Renew => new.renew_time = Some(MicroTime(now)),
        Decision::Acquire => {
            new.holder_identity = Some(cfg.identity.clone());
            new.acquire_time = Some(MicroTime(now));
            new.renew_time = Some(MicroTime(now));
            new.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
    }
    new.lease_duration_seconds = Some(seconds(cfg.lease_duration));
    lease.spec = Some(new);
    // `replace` sends our resourceVersion: a concurrent writer makes it 409.
    match api.replace(&cfg.name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Gives the Lease up if we hold it (client-go's `ReleaseOnCancel`).
async fn release(api: &Api<Lease>, cfg: &Config) -> Result<(), Error> {
    let Some(mut lease) = api.get_opt(&cfg.name).await? else {
        return Ok(());
    };
    let Some(spec) = lease.spec.as_mut() else {
        return Ok(());
    };
    if spec.holder_identity.as_deref() != Some(cfg.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(Timestamp::now()));
    api.replace(&cfg.name, &PostParams::default(), &lease)
        .await?;
    info!(identity = %cfg.identity, "released the lease");
    Ok(())
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_fence_lets_writes_out_only_while_it_holds() {
        let polled = AtomicBool::new(false);
        let write = || async {
            polled.store(true, Ordering::SeqCst);
            Ok::<_, ()>(1)
        };
        let f = Fence::default();
        // Never up: the write is not even started.
        assert_eq!(f.guard(write()).await, Err(Fenced));
        assert!(!polled.load(Ordering::SeqCst));
        f.extend_to(Instant::now() + Duration::from_secs(3600));
        assert_eq!(f.guard(write()).await, Ok(Ok(1)));
        // A write still running when the fence falls is cut short.
        f.revoke();
        f.extend_to(Instant::now() + Duration::from_millis(20));
        assert_eq!(
            f.clone()
                .guard(std::future::pending::<Result<(), ()>>())
                .await,
            Err(Fenced)
        );
        // Revoked: nothing goes out, whatever the deadline was.
        f.extend_to(Instant::now() + Duration::from_secs(3600));
        f.revoke();
        polled.store(false, Ordering::SeqCst);
        assert_eq!(f.guard(write()).await, Err(Fenced));
        assert!(!polled.load(Ordering::SeqCst));
    }

    #[test]
    fn the_renew_deadline_must_be_shorter_than_the_lease() {
        let cfg = |lease, renew, retry| Config {
            namespace: "ns".into(),
            name: "l".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
        };
        assert!(cfg(15, 10, 2).check().is_ok());
        assert!(cfg(10, 10, 2).check().is_err());
        assert!(cfg(15, 10, 10).check().is_err());
    }

    #[test]
    fn waits_for_a_live_holder_and_takes_an_expired_one() {
        let t0 = Instant::now();
        let d = Duration::from_secs(15);
        let mut o = Observer::default();
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(
            o.handle_record(at(0), "me", None, None, d),
            Decision::Acquire
        );
        assert_eq!(
            o.handle_record(at(0), "me", Some(""), None, d),
            Decision::Acquire
        );
        assert_eq!(
            o.handle_record(at(0), "me", Some("me"), Some("a"), d),
            Decision::Renew
        );
        assert_eq!(
            o.handle_record(at(1), "me", Some("b"), Some("r1"), d),
            Decision::Wait
        );
        // The holder renews: the clock restarts from when we saw it.
        assert_eq!(
            o.handle_record(at(14), "me", Some("b"), Some("r2"), d),
            Decision::Wait
        );
        assert_eq!(
            o.handle_record(at(28), "me", Some("b"), Some("r2"), d),
            Decision::Wait
        );
        assert_eq!(
            o.handle_record(at(29), "me", Some("b"), Some("r2"), d),
            Decision::Acquire
        );
    }
}
