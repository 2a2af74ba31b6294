//! Golden files: a test compares what it produced with a reviewed file,
//! and `UPDATE_GOLDEN=1` rewrites the file instead (review the diff).

use std::path::Path;

/// Whether the golden files are to be rewritten (`UPDATE_GOLDEN=1`).
pub fn update() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1")
}

/// Compares `got` with the file at `path`, or writes it there under
/// `UPDATE_GOLDEN=1`. Panics on a difference, naming the first line that
/// differs, the whole output when it is short (up to [`SHOWN_LINES`]) and
/// `regenerate` (the command that rewrites the file, such as
/// `cargo test -p kubectl-ferrolb --test cluster`).
#[track_caller]
pub fn check(path: &Path, got: &str, regenerate: &str) {
    if update() {
        if let Err(e) = std::fs::write(path, got) {
            panic!("{}: {e}", path.display());
        }
        return;
    }
    let want = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (UPDATE_GOLDEN=1 {regenerate} writes it)",
            path.display()
        )
    });
    if want != got {
        let line = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| want.lines().count().min(got.lines().count()));
        let whole = if got.lines().count() <= SHOWN_LINES {
            format!("whole output:\n{got}\n")
        } else {
            String::new()
        };
        panic!(
            "output differs from {} from line {}:\n  want: {:?}\n  got:  {:?}\n\
             {whole}(after a deliberate change: UPDATE_GOLDEN=1 {regenerate}, and review the diff)",
            path.display(),
            line + 1,
            want.lines().nth(line),
            got.lines().nth(line)
        );
    }
}

/// The longest output a failure prints whole.
pub const SHOWN_LINES: usize = 200;
