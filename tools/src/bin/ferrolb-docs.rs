//! `ferrolb-docs`: writes the generated pages of the documentation site
//! (the configuration reference from `config/crd/`), or with `--check`
//! fails if the committed ones differ.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Generates docs/src/reference/ from the CRD manifests in config/crd/.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// The repository's root (default: this crate's parent directory).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Write nothing; exit 1 and name the pages that differ.
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let root = args
        .root
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."));
    match run(&root, args.check) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("ferrolb-docs: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes (or checks) every generated page; `Ok(false)` when `check` found
/// a difference.
fn run(root: &std::path::Path, check: bool) -> Result<bool, Box<dyn std::error::Error>> {
    let pages = ferrolb_tools::docs::generated(root)?;
    let dir = root.join(ferrolb_tools::docs::REFERENCE_DIR);
    let mut clean = true;
    // Pages no longer generated (a CRD removed) go too.
    if dir.is_dir() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let rel = path.strip_prefix(root)?.to_path_buf();
            if !pages.iter().any(|(p, _)| *p == rel) {
                clean = false;
                if check {
                    eprintln!("ferrolb-docs: {} is not generated any more", rel.display());
                } else {
                    std::fs::remove_file(&path)?;
                }
            }
        }
    }
    std::fs::create_dir_all(&dir)?;
    for (rel, text) in &pages {
        let path = root.join(rel);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        clean = false;
        if check {
            eprintln!("ferrolb-docs: {} is out of date", rel.display());
        } else {
            std::fs::write(&path, text)?;
            eprintln!("ferrolb-docs: wrote {}", rel.display());
        }
    }
    Ok(!check || clean)
}
