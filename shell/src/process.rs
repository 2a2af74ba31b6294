//! A binary's `main`: logging, the runtime, the program, the exit code.

use std::fmt::Display;
use std::future::Future;
use std::process::ExitCode;

use crate::{LogArgs, task};

/// Which tokio runtime the program runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// One thread: the speaker and the lab tools, whose tasks are I/O-bound
    /// and small.
    CurrentThread,
    /// A worker per core: the controller, whose reconciles run in parallel.
    MultiThread,
}

/// Sets up logging from `log`, installs the panic hook
/// ([`task::abort_on_panic`]: a panic anywhere is logged, then the process
/// aborts), builds the runtime, runs `program` on it and
/// turns its result into the exit code: 0 on `Ok`; on `Err`, the error is
/// logged (`error!`) and printed as `NAME: error` on standard error, and the
/// code is 1. Logging or runtime set-up failures are printed the same way.
pub fn main<E: Display>(
    name: &str,
    runtime: Runtime,
    log: &LogArgs,
    program: impl Future<Output = Result<(), E>>,
) -> ExitCode {
    if let Err(e) = log.init() {
        eprintln!("{name}: {e}");
        return ExitCode::FAILURE;
    }
    task::abort_on_panic();
    #[cfg(feature = "fault-injection")]
    if let Ok(spec) = std::env::var("FERROLB_FAULT_INJECT") {
        tracing::warn!(spec, "test build: fault injection armed");
    }
    let built = match runtime {
        Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Runtime::MultiThread => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    };
    let rt = match built {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the runtime");
            eprintln!("{name}: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(program) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "{name} failed");
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}
