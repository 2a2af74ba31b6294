//! Helpers shared by the controller's testenv tests.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `f` every 50 ms until it gives a value; fails naming `what` once
/// `timeout` has passed.
pub(crate) async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
