//! The logging flags and the `tracing` subscriber they set up.

use std::fmt;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// The logging flags every binary takes: `#[command(flatten)]` them into
/// the binary's clap arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct LogArgs {
    /// Log format on standard error.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log filter (tracing EnvFilter syntax), e.g. info or debug; MetalLB's
    /// level names work too (all = trace, none = off). RUST_LOG, when set,
    /// overrides it.
    #[arg(long, default_value = "info", value_parser = parse_filter)]
    pub log_level: String,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines, without colour codes (logs go to files and
    /// collectors).
    Text,
    /// One JSON object per line.
    Json,
}

/// Why logging could not be set up.
#[derive(Debug)]
pub enum LogError {
    /// `RUST_LOG` is set but is not a valid filter.
    Env(String),
    /// `--log-level` is not a valid filter (clap checks it first, so only
    /// when [`LogArgs`] was built by hand).
    Level(String),
    /// A global subscriber was installed already.
    AlreadySet,
}

impl LogArgs {
    /// Installs the global `tracing` subscriber: this filter and format,
    /// writing to standard error.
    pub fn init(&self) -> Result<(), LogError> {
        let filter = match std::env::var("RUST_LOG") {
            Ok(env) if !env.trim().is_empty() => {
                EnvFilter::try_new(&env).map_err(|e| LogError::Env(format!("{env:?}: {e}")))?
            }
            _ => EnvFilter::try_new(&self.log_level)
                .map_err(|e| LogError::Level(format!("{:?}: {e}", self.log_level)))?,
        };
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        let set = match self.log_format {
            LogFormat::Text => builder.with_ansi(false).try_init(),
            LogFormat::Json => builder.json().try_init(),
        };
        set.map_err(|_| LogError::AlreadySet)
    }
}

impl Default for LogArgs {
    fn default() -> Self {
        Self {
            log_format: LogFormat::Text,
            log_level: "info".into(),
        }
    }
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Env(e) => write!(f, "RUST_LOG {e}"),
            Self::Level(e) => write!(f, "--log-level {e}"),
            Self::AlreadySet => f.write_str("a log subscriber is installed already"),
        }
    }
}

impl std::error::Error for LogError {}

/// `--log-level`: any filter `EnvFilter` accepts, or one of MetalLB's level
/// names, checked when parsed.
fn parse_filter(s: &str) -> Result<String, String> {
    let s = crate::compat::log_level(s);
    EnvFilter::try_new(s)
        .map(|_| s.to_owned())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        log: LogArgs,
    }

    #[test]
    fn flags_parse_and_bad_filters_are_refused() {
        let cli =
            Cli::try_parse_from(["x", "--log-format", "json", "--log-level", "debug"]).unwrap();
        assert_eq!(cli.log.log_format, LogFormat::Json);
        assert_eq!(cli.log.log_level, "debug");
        let defaults = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(defaults.log.log_format, LogFormat::Text);
        assert_eq!(defaults.log.log_level, "info");
        let metallb = Cli::try_parse_from(["x", "--log-level", "all"]).unwrap();
        assert_eq!(metallb.log.log_level, "trace");
        let err = Cli::try_parse_from(["x", "--log-level", "info,[=x"]).unwrap_err();
        assert!(err.to_string().contains("--log-level"), "{err}");
    }
}
