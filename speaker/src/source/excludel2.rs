//! MetalLB's `metallb-excludel2` ConfigMap: the interfaces layer 2 never
//! answers on, as regular expressions over interface names
//! (`announcedInterfacesToExclude`), mounted at
//! `/etc/metallb/excludel2.yaml` by MetalLB's manifests.
//!
//! Without the file the speaker uses the list MetalLB's manifests ship
//! ([`DEFAULT`]): container, CNI and virtual bridges, veths, tunnels and
//! loopback are never where a service IP belongs. A file whose list is
//! empty excludes nothing.

use std::io;
use std::path::Path;

use serde::Deserialize;

/// The list MetalLB's manifests put in the ConfigMap.
pub const DEFAULT: &[&str] = &[
    "^docker.*",
    "^cbr.*",
    "^dummy.*",
    "^virbr.*",
    "^lxcbr.*",
    "^veth.*",
    "^lo$",
    "^cali.*",
    "^tunl.*",
    "^flannel.*",
    "^kube-ipvs.*",
    "^cni.*",
    "^nodelocaldns.*",
    "^lxc.*",
];

/// Where MetalLB's manifests mount the ConfigMap.
pub const PATH: &str = "/etc/metallb/excludel2.yaml";

/// The file's shape (other keys are ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    #[serde(default)]
    announced_interfaces_to_exclude: Vec<String>,
}

/// Why the file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// It exists but cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
    /// It is not the ConfigMap's YAML.
    #[error("{path}: announcedInterfacesToExclude: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// The patterns in `text` (the file's contents).
///
/// # Errors
/// When `text` is not YAML with a list of strings under
/// `announcedInterfacesToExclude`.
pub fn parse(text: &str) -> Result<Vec<String>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_saphyr::from_str::<File>(text)
        .map(|f| f.announced_interfaces_to_exclude)
        .map_err(|e| e.to_string())
}

/// The patterns of the file at `path`, or [`DEFAULT`] when it does not
/// exist.
///
/// # Errors
/// When the file exists but cannot be read or parsed.
pub fn load(path: &Path) -> Result<Vec<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text).map_err(|message| Error::Parse {
            path: path.display().to_string(),
            message,
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Ok(DEFAULT.iter().map(|s| (*s).to_owned()).collect())
        }
        Err(source) => Err(Error::Read {
            path: path.display().to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::l2::Exclude;

    #[test]
    fn the_configmap_data_parses_and_matches_as_metallb_does() {
        let text = r#"announcedInterfacesToExclude: ["^docker.*", "^veth.*", "^lo$", "cni"]"#;
        let patterns = parse(text).unwrap();
        assert_eq!(patterns.len(), 4);
        let exclude = Exclude::new(&patterns).unwrap();
        for name in ["docker0", "veth1234", "lo", "mycni0"] {
            assert!(exclude.matches(name), "{name}");
        }
        for name in ["eth0", "bond0", "br0", "lo0", "ens3"] {
            assert!(!exclude.matches(name), "{name}");
        }
    }

    #[test]
    fn empty_and_missing() {
        assert!(parse("").unwrap().is_empty());
        assert!(
            parse("announcedInterfacesToExclude: []")
                .unwrap()
                .is_empty()
        );
        let dir = std::env::temp_dir().join(format!("excludel2-{}", std::process::id()));
        let defaults = load(&dir.join("absent.yaml")).unwrap();
        assert_eq!(defaults.len(), DEFAULT.len());
        let exclude = Exclude::new(&defaults).unwrap();
        assert!(exclude.matches("cni0") && exclude.matches("cali123") && !exclude.matches("eth0"));
    }

    #[test]
    fn bad_files_are_refused_with_the_key_named() {
        let err = parse("announcedInterfacesToExclude: 3").unwrap_err();
        assert!(!err.is_empty());
        assert!(Exclude::new(&["(".to_owned()]).is_err());
        let path = std::env::temp_dir().join(format!("excludel2-bad-{}.yaml", std::process::id()));
        std::fs::write(&path, "announcedInterfacesToExclude: {a: 1}").unwrap();
        let err = load(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains("announcedInterfacesToExclude"), "{err}");
    }
}
