//! Reads any text as MetalLB's legacy ConfigMap (or its bare `config`
//! text), as `kubectl ferrolb migrate-configmap` does. Must never panic:
//! an input is refused with an error or converted, and what is converted
//! prints as YAML.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(cfg) = api::legacy::convert(text, "metallb-system") {
        let _ = api::legacy::to_yaml(&cfg);
    }
});
