use api::validate::{Config, config};

use super::*;

/// A configuration of one pool and one BGPAdvertisement whose
/// `serviceSelectors` are `selectors` (YAML; empty: none).
fn model(selectors: &str) -> Arc<Model> {
    let mut yaml = "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: m}\nspec: {addresses: [192.0.2.0/24]}\n---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: b, namespace: m}\n".to_owned();
    if !selectors.is_empty() {
        yaml.push_str(&format!("spec: {{serviceSelectors: [{selectors}]}}\n"));
    }
    let (model, problems) = config(&Config::from_yaml(&yaml).unwrap_or_else(|e| panic!("{e}")));
    assert!(problems.is_empty(), "{problems:?}");
    Arc::new(model)
}

fn keys(k: &[&str]) -> Keys {
    Arc::new(k.iter().map(|k| (*k).to_owned()).collect())
}

fn sent(step: &Step) -> Option<&Model> {
    step.model.as_deref()
}

const APP: &str = "{matchLabels: {app: web}}";
const NOT_LEGACY: &str = "{matchExpressions: [{key: legacy, operator: DoesNotExist}]}";
const TIER: &str = "{matchExpressions: [{key: tier, operator: NotIn, values: [back]}]}";

#[test]
fn the_first_list_is_made_with_the_first_configurations_keys() {
    for (selectors, want) in [("", keys(&[])), (APP, keys(&["app"]))] {
        let mut s = Selected::default();
        let m = model(selectors);
        let step = s.step(Some(&m), None);
        assert_eq!(
            step,
            Step {
                model: Some(Arc::clone(&m)),
                keep: Some((1, want.clone())),
                relist: true,
            }
        );
        // Its list done: the configuration stays, nothing else moves.
        let step = s.step(Some(&m), Some(1));
        assert!(Arc::ptr_eq(step.model.as_ref().unwrap(), &m));
        assert_eq!((step.keep, step.relist), (None, false));
        assert_eq!(s.keep(), (1, want));
        assert_eq!(s.relists(), 0);
    }
}

#[test]
fn a_new_key_holds_the_configuration_until_the_list_with_it() {
    let mut s = Selected::default();
    let old = model("");
    s.step(Some(&old), None);
    s.step(Some(&old), Some(1));
    let new = model(&format!("{APP}, {NOT_LEGACY}"));
    let step = s.step(Some(&new), Some(1));
    assert_eq!(sent(&step), Some(&*old), "the old one stays in force");
    assert_eq!(step.keep, Some((2, keys(&["app", "legacy"]))));
    assert!(step.relist);
    assert_eq!(s.relists(), 1);
    // Events and snapshots before the list is whole: still the old one,
    // and no second list.
    for _ in 0..3 {
        let step = s.step(Some(&new), Some(1));
        assert_eq!(sent(&step), Some(&*old));
        assert_eq!((step.keep, step.relist), (None, false));
    }
    // The list made with the new keys: the new configuration.
    let step = s.step(Some(&new), Some(2));
    assert_eq!(sent(&step), Some(&*new));
    assert_eq!((step.keep, step.relist), (None, false));
    assert_eq!(s.relists(), 1);
}

#[test]
fn while_listing_the_keys_of_the_configuration_in_force_stay() {
    let mut s = Selected::default();
    let tier = model(TIER);
    s.step(Some(&tier), None);
    s.step(Some(&tier), Some(1));
    assert_eq!(s.keep(), (1, keys(&["tier"])));
    let app = model(APP);
    let step = s.step(Some(&app), Some(1));
    assert_eq!(sent(&step), Some(&*tier));
    // `tier` stays: the records made meanwhile serve the decisions of
    // the configuration in force.
    assert_eq!(step.keep, Some((2, keys(&["app", "tier"]))));
    // The list done, `app` goes into force and `tier` is no longer kept
    // (lazily: records made from now on).
    let step = s.step(Some(&app), Some(2));
    assert_eq!(sent(&step), Some(&*app));
    assert_eq!(step.keep, Some((3, keys(&["app"]))));
    assert!(!step.relist);
}

#[test]
fn fewer_keys_go_into_force_at_once() {
    let mut s = Selected::default();
    let both = model(&format!("{APP}, {NOT_LEGACY}"));
    s.step(Some(&both), None);
    s.step(Some(&both), Some(1));
    let app = model(APP);
    let step = s.step(Some(&app), Some(1));
    assert_eq!(sent(&step), Some(&*app));
    assert_eq!(step.keep, Some((2, keys(&["app"]))));
    assert!(!step.relist);
    // And back: `legacy` is no longer on every record (those made since
    // lack it): a list again.
    let step = s.step(Some(&both), Some(1));
    assert_eq!(sent(&step), Some(&*app));
    assert_eq!(step.keep, Some((3, keys(&["app", "legacy"]))));
    assert!(step.relist);
    // The same configuration again, with the same list under way: no
    // second list.
    let step = s.step(Some(&both), Some(2));
    assert_eq!(sent(&step), Some(&*app));
    assert_eq!((step.keep, step.relist), (None, false));
    assert_eq!(s.relists(), 1);
}

#[test]
fn a_configuration_reverted_while_listing_goes_into_force_at_once() {
    let mut s = Selected::default();
    let old = model("");
    s.step(Some(&old), None);
    s.step(Some(&old), Some(1));
    let new = model(APP);
    assert!(s.step(Some(&new), Some(1)).relist);
    let again = model("");
    let step = s.step(Some(&again), Some(1));
    assert_eq!(sent(&step), Some(&*again));
    assert_eq!(step.keep, Some((3, keys(&[]))));
    assert!(!step.relist);
    // The list of generation 2, done late, changes nothing.
    let step = s.step(Some(&again), Some(2));
    assert_eq!(sent(&step), Some(&*again));
    assert_eq!((step.keep, step.relist), (None, false));
}

#[test]
fn a_refused_configuration_keeps_the_one_in_force() {
    let mut s = Selected::default();
    // Refused from the start: the Services are listed, keeping no label;
    // there is no configuration to send.
    let step = s.step(None, None);
    assert_eq!(
        step,
        Step {
            model: None,
            keep: Some((1, keys(&[]))),
            relist: true,
        }
    );
    assert_eq!(s.step(None, Some(1)).model, None);
    // The first valid one names a key: it waits for its list (nothing in
    // force to send meanwhile).
    let app = model(APP);
    let step = s.step(Some(&app), Some(1));
    assert_eq!((step.model.clone(), step.relist), (None, true));
    assert_eq!(sent(&s.step(Some(&app), Some(2))), Some(&*app));
    // Refused while a list for a new key is under way: the one in force
    // stays, before the list and after it.
    let both = model(&format!("{APP}, {NOT_LEGACY}"));
    assert!(s.step(Some(&both), Some(2)).relist);
    assert_eq!(sent(&s.step(None, Some(2))), Some(&*app));
    let step = s.step(None, Some(3));
    assert_eq!(sent(&step), Some(&*app));
    assert_eq!((step.keep, step.relist), (None, false));
}

#[test]
fn only_the_selected_keys_are_kept() {
    let labels: Labels = [
        ("app.kubernetes.io/name", "web"),
        ("ferrolb-loadgen", "fill"),
        ("tier", "front"),
    ]
    .into_iter()
    .collect();
    /// Keys, and the pairs kept.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);
    let cases: [Case<'_>; 4] = [
        (&[], &[]),
        (&["tier", "zone"], &[("tier", "front")]),
        (
            &["ferrolb-loadgen", "tier"],
            &[("ferrolb-loadgen", "fill"), ("tier", "front")],
        ),
        (
            &["app.kubernetes.io/name", "ferrolb-loadgen", "tier", "x"],
            &[
                ("app.kubernetes.io/name", "web"),
                ("ferrolb-loadgen", "fill"),
                ("tier", "front"),
            ],
        ),
    ];
    for (k, want) in cases {
        let got = only(&labels, &keys(k));
        let want: Labels = want.iter().copied().collect();
        assert_eq!(got, want, "{k:?}");
    }
    // Every pair kept: the same shared set; none: no set at all.
    let all = keys(&["app.kubernetes.io/name", "ferrolb-loadgen", "tier"]);
    assert!(only(&labels, &all).ptr_eq(&labels));
    assert!(only(&labels, &keys(&["zone"])).ptr_eq(&Labels::default()));
}
