//! The committed CRD manifests under `config/crd/` match the Rust types.
//!
//! `UPDATE_CRDS=1 cargo test -p api --test crds` rewrites them.

use std::path::PathBuf;

#[test]
fn committed_crds_match_the_types() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/crd");
    let update = std::env::var_os("UPDATE_CRDS").is_some_and(|v| v == "1");
    if update {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut drifted = Vec::new();
    let mut expected_files = Vec::new();
    for crd in api::crds() {
        let name = api::crd::file_name(&crd);
        let path = dir.join(&name);
        let yaml = api::crd::to_yaml(&crd).unwrap();
        if update {
            std::fs::write(&path, &yaml).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(yaml.as_str()) {
            drifted.push(name.clone());
        }
        expected_files.push(name);
    }
    // No stale manifests for kinds that no longer exist.
    let mut present: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    present.sort();
    expected_files.sort();
    assert_eq!(
        present, expected_files,
        "config/crd/ holds exactly one manifest per kind"
    );
    assert!(
        drifted.is_empty(),
        "config/crd/ is out of date for {drifted:?}; run UPDATE_CRDS=1 cargo test -p api --test crds, \
         then cargo run -p ferrolb-tools --bin ferrolb-docs (the documentation's reference)"
    );
}

#[test]
fn committed_crds_parse_back() {
    for crd in api::crds() {
        let yaml = api::crd::to_yaml(&crd).unwrap();
        let back: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back, crd);
    }
}
