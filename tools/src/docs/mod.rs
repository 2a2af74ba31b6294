//! The generated pages of the documentation site (`docs/`).
//!
//! Pure: manifests in, Markdown out. `ferrolb-docs` writes the pages, and
//! `tools/tests/docs.rs` checks that the committed ones are current, as
//! `api/tests/crds.rs` does for the CRDs.

pub mod reference;

use std::path::{Path, PathBuf};

/// Where the generated configuration reference lives, under the repository.
pub const REFERENCE_DIR: &str = "docs/src/reference";

/// Every generated page (its path under the repository, its text), from the
/// CRD manifests in `config/crd/` of the repository at `root`.
pub fn generated(root: &Path) -> Result<Vec<(PathBuf, String)>, reference::Error> {
    let dir = root.join("config/crd");
    let mut manifests = Vec::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| reference::Error::Read {
        path: dir.display().to_string(),
        error: e.to_string(),
    })?;
    for entry in entries {
        let path = entry
            .map_err(|e| reference::Error::Read {
                path: dir.display().to_string(),
                error: e.to_string(),
            })?
            .path();
        if path.extension().is_some_and(|x| x == "yaml") {
            let text = std::fs::read_to_string(&path).map_err(|e| reference::Error::Read {
                path: path.display().to_string(),
                error: e.to_string(),
            })?;
            manifests.push(text);
        }
    }
    let pages = reference::pages(&manifests)?;
    Ok(pages
        .into_iter()
        .map(|(name, text)| (Path::new(REFERENCE_DIR).join(name), text))
        .collect())
}
