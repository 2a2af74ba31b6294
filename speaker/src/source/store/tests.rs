//! The cache's handling of watch events, against a table and against a
//! model map over random histories.

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::announce::k8s::Converted;
use crate::announce::stored::Name;
use crate::announce::{ClusterView, Endpoint, TrafficPolicy};

fn slice(ns: &str, name: &str, node: &str) -> EndpointSlice {
    EndpointSlice::new(
        ns.into(),
        name,
        Some(name.split('-').next().unwrap_or_default().into()),
        vec![
            Endpoint {
                node: Some(node.into()),
                has_address: true,
                ready: Some(true),
                serving: None,
                terminating: None,
            }
            .into(),
        ],
    )
}

/// The cache's (namespace, name, first endpoint's node) in key order.
fn contents(store: &Store<EndpointSlice>) -> Vec<(String, String, String)> {
    store
        .state()
        .iter()
        .map(|e| {
            let node = e.endpoints().next().and_then(|ep| ep.node.as_deref());
            (
                e.namespace().to_string(),
                e.name().to_string(),
                node.unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn row(ns: &str, name: &str, node: &str) -> (String, String, String) {
    (ns.into(), name.into(), node.into())
}

/// Each event against what readers see, what [`Writer::apply`] returns,
/// and the lists the snapshot task takes: a new one after a change, the
/// same `Arc` after none.
#[tokio::test]
async fn events_as_kubes_store_applies_them() {
    let (store, mut w) = store::<EndpointSlice>();
    assert!(!*store.ready.borrow());

    // The first list: nothing visible, not ready, until InitDone.
    assert!(!w.apply(Event::Init));
    assert!(!w.apply(Event::InitApply(slice("a", "web-1", "n1"))));
    assert!(!w.apply(Event::InitApply(slice("a", "db-1", "n0"))));
    // Of two of one key in a list, the later.
    assert!(!w.apply(Event::InitApply(slice("a", "db-1", "n1"))));
    assert!(store.is_empty());
    assert!(!*store.ready.borrow());
    assert!(w.apply(Event::InitDone));
    assert!(store.wait_until_ready().await);
    assert_eq!(
        contents(&store),
        [row("a", "db-1", "n1"), row("a", "web-1", "n1")]
    );
    let first = store.list();
    assert_eq!(first.len(), 2);

    // Apply replaces the object of its key; an equal one is no change.
    assert!(!w.apply(Event::Apply(slice("a", "db-1", "n1"))));
    assert!(Arc::ptr_eq(&store.list(), &first));
    assert!(w.apply(Event::Apply(slice("a", "web-1", "n2"))));
    assert_eq!(
        contents(&store),
        [row("a", "db-1", "n1"), row("a", "web-1", "n2")]
    );
    // Delete of a key the cache does not hold: no change.
    assert!(!w.apply(Event::Delete(slice("b", "web-1", "n1"))));
    let second = store.list();
    assert!(!Arc::ptr_eq(&second, &first));
    // The record that did not change is the same `Arc`.
    assert_eq!(second[0].addr(), first[0].addr());
    assert!(Arc::ptr_eq(&store.list(), &second));

    // A relist: the old contents stay visible until InitDone swaps the
    // new list in; an object missing from it is gone after.
    assert!(!w.apply(Event::Init));
    assert!(!w.apply(Event::InitApply(slice("b", "api-1", "n3"))));
    assert!(!w.apply(Event::InitApply(slice("a", "web-1", "n2"))));
    assert_eq!(
        contents(&store),
        [row("a", "db-1", "n1"), row("a", "web-1", "n2")]
    );
    assert!(w.apply(Event::Apply(slice("a", "db-1", "n4"))));
    assert!(w.apply(Event::InitDone));
    assert_eq!(
        contents(&store),
        [row("a", "web-1", "n2"), row("b", "api-1", "n3")]
    );
    let third = store.list();
    assert!(!Arc::ptr_eq(&third, &second));
    // After a relist, a Delete of what it dropped changes nothing; of
    // what it brought, removes it.
    assert!(!w.apply(Event::Delete(slice("a", "db-1", "n4"))));
    assert!(Arc::ptr_eq(&store.list(), &third));
    assert!(w.apply(Event::Delete(slice("b", "api-1", "n3"))));
    assert_eq!(contents(&store), [row("a", "web-1", "n2")]);
    assert_eq!(
        store
            .get(&ObjectKey::new("a", "web-1"))
            .map(|e| e.order() == ("a", Name::whole("web-1"))),
        Some(true)
    );
    assert_eq!(store.get(&ObjectKey::new("b", "api-1")), None);
    assert_eq!(store.list().len(), 1);
}

/// A cache whose writer went away before its first list is never ready.
#[tokio::test]
async fn a_cache_without_a_list_is_never_ready() {
    let (store, mut w) = store::<EndpointSlice>();
    w.apply(Event::Init);
    drop(w);
    assert!(!store.wait_until_ready().await);
}

/// Nodes are cluster-scoped: their keys share one empty namespace, and
/// they are listed by name.
#[test]
fn nodes_are_keyed_by_name() {
    let (store, mut w) = store::<Node>();
    let node = |name: &str| Node {
        name: name.into(),
        ..Node::default()
    };
    w.apply(Event::Init);
    w.apply(Event::InitApply(node("b")));
    w.apply(Event::InitApply(node("a")));
    w.apply(Event::InitDone);
    let names: Vec<String> = store.list().iter().map(|n| n.name.to_string()).collect();
    assert_eq!(names, ["a", "b"]);
    let (a, b) = (node("a").key(), node("b").key());
    assert!(Arc::ptr_eq(&a.namespace, &b.namespace));
}

/// Issue 18: after every step of seeded random histories of watch events
/// (EndpointSlices and Services applied, some equal to what is held, and
/// deleted, known or not, in two namespaces; the slices relisted with some
/// gone, some new, Applies between Init and InitDone), the cache holds
/// what a model map that applies the same events holds; each list the
/// snapshot task builds by patching the last one with the keys that
/// changed is the cache in key order, the same objects (by pointer); the
/// same `Arc` when nothing changed; and the view [`Converted`] builds from
/// the patched lists is the view from scratch (`ClusterView::from_k8s`).
#[test]
fn caches_and_their_lists_are_a_model_map() {
    type Model<T> = BTreeMap<(String, String), T>;
    fn model_key<T: Record>(o: &T) -> (String, String) {
        let (ns, name) = o.order();
        (ns.to_owned(), name.to_string())
    }
    fn same<P: Held>(a: &[P], b: &[P]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.addr() == y.addr())
    }
    fn check<T: Record + PartialEq + std::fmt::Debug>(
        store: &Store<T>,
        model: &Model<T>,
        at: &str,
    ) {
        let held = store.state();
        let want: Vec<&T> = model.values().collect();
        let got: Vec<&T> = held.iter().map(Held::record).collect();
        assert_eq!(got, want, "{at}");
    }
    let names = |rng: &mut SmallRng| {
        let ns = ["a", "b"][rng.random_range(0..2)];
        (ns, format!("s{}", rng.random_range(0..6)))
    };
    // Names of both shapes a record keeps (`<service>-<short suffix>`,
    // or whole), in one order; up to six endpoints.
    let random_slice = |rng: &mut SmallRng| {
        let (ns, svc) = names(rng);
        let k = rng.random_range(0..3);
        let name = match rng.random_range(0..4) {
            0 => format!("{svc}{k}"),
            1 => format!("{svc}-longer-than-seven-{k}"),
            _ => format!("{svc}-{k}"),
        };
        let endpoints = (0..rng.random_range(0..7))
            .map(|_| {
                Endpoint {
                    node: Some(format!("n{}", rng.random_range(0..3)).into()),
                    has_address: true,
                    ready: Some(rng.random_bool(0.7)),
                    serving: None,
                    terminating: None,
                }
                .into()
            })
            .collect();
        EndpointSlice::new(ns.into(), &name, Some(svc.into()), endpoints)
    };
    let random_service = |rng: &mut SmallRng| {
        let (ns, name) = names(rng);
        Service {
            key: ObjectKey::new(ns, name),
            load_balancer: true,
            external_traffic_policy: if rng.random_bool(0.5) {
                TrafficPolicy::Local
            } else {
                TrafficPolicy::Cluster
            },
            ingress: [format!("192.0.2.{}", rng.random_range(1..4))
                .parse()
                .unwrap()]
            .into(),
            ..Service::default()
        }
    };
    let mut patches = 0;
    let mut unchanged = 0;
    for seed in 0..30 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let (slices, mut slices_w) = store::<EndpointSlice>();
        let (services, mut services_w) = store::<Service>();
        let mut slice_model: Model<EndpointSlice> = Model::new();
        let mut service_model: Model<Service> = Model::new();
        slices_w.apply(Event::Init);
        slices_w.apply(Event::InitDone);
        services_w.apply(Event::Init);
        services_w.apply(Event::InitDone);
        let mut sl = slices.list();
        let mut sv = services.list();
        let mut converted = Converted::default();
        for step in 0..200 {
            let events = rng.random_range(0..4);
            let mut moved = false;
            for _ in 0..events {
                match rng.random_range(0..20) {
                    0..8 => {
                        let o = random_slice(&mut rng);
                        let changes = slice_model.get(&model_key(&o)) != Some(&o);
                        slice_model.insert(model_key(&o), o.clone());
                        assert_eq!(slices_w.apply(Event::Apply(o)), changes);
                        moved |= changes;
                    }
                    8..11 => {
                        let o = random_slice(&mut rng);
                        let changes = slice_model.remove(&model_key(&o)).is_some();
                        assert_eq!(slices_w.apply(Event::Delete(o)), changes);
                        moved |= changes;
                    }
                    11..15 => {
                        let o = random_service(&mut rng);
                        let changes = service_model.get(&model_key(&o)) != Some(&o);
                        service_model.insert(model_key(&o), o.clone());
                        assert_eq!(services_w.apply(Event::Apply(o)), changes);
                        moved |= changes;
                    }
                    15..18 => {
                        let o = random_service(&mut rng);
                        let changes = service_model.remove(&model_key(&o)).is_some();
                        assert_eq!(services_w.apply(Event::Delete(o)), changes);
                        moved |= changes;
                    }
                    _ => {
                        // A relist: what is left of the cache, some of it
                        // gone, some of it new; the cache shows the old
                        // contents until InitDone.
                        let mut listed = Model::new();
                        slices_w.apply(Event::Init);
                        for o in slice_model.values() {
                            if rng.random_bool(0.8) {
                                listed.insert(model_key(o), o.clone());
                                slices_w.apply(Event::InitApply(o.clone()));
                            }
                        }
                        let new = random_slice(&mut rng);
                        listed.insert(model_key(&new), new.clone());
                        slices_w.apply(Event::InitApply(new));
                        check(&slices, &slice_model, "before InitDone");
                        assert!(slices_w.apply(Event::InitDone));
                        slice_model = listed;
                        moved = true;
                    }
                }
            }
            let at = format!("seed {seed} step {step}");
            check(&slices, &slice_model, &at);
            check(&services, &service_model, &at);
            let (new_sl, new_sv) = (slices.list(), services.list());
            if moved {
                patches += 1;
            } else {
                unchanged += 1;
                assert!(Arc::ptr_eq(&new_sl, &sl), "{at}: slices listed again");
                assert!(Arc::ptr_eq(&new_sv, &sv), "{at}: services listed again");
            }
            (sl, sv) = (new_sl, new_sv);
            assert!(same(&sl, &slices.state()), "{at}: {sl:?}");
            assert!(same(&sv, &services.state()), "{at}: {sv:?}");
            let none: Shared<Node> = Arc::default();
            let secrets: Shared<Secret> = Arc::default();
            let (view, problems) = converted.view("n1", Arc::default(), &none, &sv, &sl, &secrets);
            let (scratch, scratch_problems) =
                ClusterView::from_k8s("n1", Arc::default(), &none, &sv, &sl, &secrets);
            assert_eq!(view.services, scratch.services, "{at}");
            assert_eq!(problems, scratch_problems, "{at}");
        }
    }
    assert!(patches > 3_000 && unchanged > 500, "{patches} {unchanged}");
}
