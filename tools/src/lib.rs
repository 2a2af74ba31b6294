//! ferrolb-tools' library: what the documentation site generates from the
//! code and the manifests ([`docs`]). The lab binaries in `src/bin/` do
//! not use it.

pub mod docs;
