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

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
/// `shutdown` turns true. `lead` is dropped (cancelled) when leadership is
/// lost and called again when it is regained; the Lease is released on
/// shutdown. Returns `lead`'s error if it fails.
pub async fn run<F, Fut, E>(
    client: Client,
    cfg: Config,
    status: Arc<Status>,
    mut shutdown: watch::Receiver<bool>,
    mut lead: F,
) -> Result<(), E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let mut observer = Observer::default();
    // No Lease round has succeeded yet.
    let mut first = true;
    loop {
        // Stand by until we hold the Lease.
        loop {
            if *shutdown.borrow() {
                return Ok(());
            }
            match try_round(&api, &cfg, &mut observer).await {
                Ok(true) => {
                    status.lease_ok.store(true, Ordering::Relaxed);
                    break;
                }
                Ok(false) => {
                    first = false;
                    status.lease_ok.store(true, Ordering::Relaxed);
                }
                Err(Error::Kube(kube::Error::Api(e))) if first && e.code == 403 => {
                    warn!(
                        lease = %cfg.name,
                        error = %e.message,
                        "the controller may not use Leases (MetalLB's role grants none): running without leader election, as MetalLB's controller does; run one replica, or grant get, create and update on coordination.k8s.io leases to run more"
                    );
                    status.lease_ok.store(true, Ordering::Relaxed);
                    status.leader.store(true, Ordering::Relaxed);
                    return unelected(shutdown, lead).await;
                }
                Err(e) => {
                    status.lease_ok.store(false, Ordering::Relaxed);
                    warn!(error = %e, "lease round failed");
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
        let mut last_renew = Instant::now();
        // Boxed so that dropping it cancels `lead` before the Lease is
        // released.
        let mut leading = Box::pin(lead());
        let outcome = loop {
            tokio::select! {
                r = &mut leading => break Some(r),
                _ = shutdown.changed() => {
                    if *shutdown.borrow() { break None; }
                }
                _ = tokio::time::sleep(cfg.retry_period) => {
                    match try_round(&api, &cfg, &mut observer).await {
                        Ok(true) => last_renew = Instant::now(),
                        Ok(false) => {
                            warn!(identity = %cfg.identity, "lease taken by another candidate");
                            break Some(Ok(()));
                        }
                        Err(e) => warn!(error = %e, "lease renewal failed"),
                    }
                    if last_renew.elapsed() >= cfg.renew_deadline {
                        warn!(identity = %cfg.identity, "could not renew the lease in time");
                        break Some(Ok(()));
                    }
                }
            }
        };
        status.leader.store(false, Ordering::Relaxed);
        info!(identity = %cfg.identity, "stopped leading");
        match outcome {
            None => {
                drop(leading);
                if let Err(e) = release(&api, &cfg).await {
                    warn!(error = %e, "could not release the lease");
                }
                return Ok(());
            }
            Some(Err(e)) => {
                drop(leading);
                if let Err(e) = release(&api, &cfg).await {
                    warn!(error = %e, "could not release the lease");
                }
                return Err(e);
            }
            Some(Ok(())) => drop(leading),
        }
    }
}

/// Runs `lead` until `shutdown` turns true, with no election (the Lease
/// API is forbidden): `lead` ending well is called again.
async fn unelected<F, Fut, E>(mut shutdown: watch::Receiver<bool>, mut lead: F) -> Result<(), E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    loop {
        let mut leading = Box::pin(lead());
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
