//! Reads any text as a multi-document YAML configuration and validates it
//! into the model. Must never panic: file-mode configurations and
//! `controller plan` inputs are this text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(cfg) = api::validate::Config::from_yaml(text) {
        let (model, _problems) = api::validate::config(&cfg);
        // The model answers every question without panicking.
        for pool in &model.pools {
            for range in &pool.ranges {
                let _ = model.pool_for(&[range.first(), range.last()]);
            }
        }
    }
});
