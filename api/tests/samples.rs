//! Every MetalLB sample under `testdata/config/` reads and passes the pure
//! validation with no problem, and its model holds every object.

use std::path::PathBuf;

#[test]
fn samples_are_valid() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/config");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let cfg = api::validate::Config::from_yaml(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (model, problems) = api::validate::config(&cfg);
        assert!(problems.is_empty(), "{}: {problems:#?}", path.display());
        let counts = |m: &api::model::Model| {
            [
                m.pools.len(),
                m.peers.len(),
                m.bgp_advertisements.len(),
                m.l2_advertisements.len(),
                m.bfd_profiles.len(),
            ]
        };
        let want = [
            cfg.pools.len(),
            cfg.peers.len(),
            cfg.bgp_advertisements.len(),
            cfg.l2_advertisements.len(),
            cfg.bfd_profiles.len(),
        ];
        assert_eq!(counts(&model), want, "{}", path.display());
        count += 1;
    }
    assert!(count >= 8);
}
