//! Events in the core/v1 shape, for clusters whose roles grant `events`
//! in the core API group only (MetalLB's roles do; ferrolb's own grant
//! `events.k8s.io`). The programs write `events.k8s.io/v1` Events and,
//! when that is forbidden, the same content as a core/v1 Event built here
//! (pure: the caller creates it). [`events_v1`] builds the former the same
//! way, for a caller that creates it without kube-runtime's `Recorder`
//! (whose cache keeps every event for six minutes).

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::api::events::v1::Event as EventV1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

/// What an event says, and who says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// `Normal` or `Warning`.
    pub type_: String,
    /// The machine-readable reason (`IPAllocated`, `nodeAssigned`).
    pub reason: String,
    /// What was done (`Allocate`, `Announce`).
    pub action: String,
    /// The human-readable message.
    pub message: String,
    /// The reporting component (`metallb-controller`, `metallb-speaker`).
    pub component: String,
    /// Which instance of it (a Pod or node name).
    pub instance: String,
}

/// The core/v1 Event for `note` about `regarding` at `now`: named as
/// client-go names events (the object's name, a dot, the time in hex
/// nanoseconds), in the object's namespace, counted once.
pub fn core_v1(regarding: ObjectReference, note: Note, now: Timestamp) -> Event {
    let name = regarding.name.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: regarding.namespace.clone(),
            ..ObjectMeta::default()
        },
        involved_object: regarding,
        type_: Some(note.type_),
        reason: Some(note.reason),
        action: Some(note.action),
        message: Some(note.message),
        source: Some(EventSource {
            component: Some(note.component.clone()),
            host: None,
        }),
        reporting_component: Some(note.component),
        reporting_instance: Some(note.instance),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        count: Some(1),
        ..Event::default()
    }
}

/// The `events.k8s.io/v1` Event for `note` about `regarding` at `now`,
/// as kube-runtime's `Recorder` makes a first (not repeated) one: named as
/// [`core_v1`] names it, in the object's namespace, with no series.
pub fn events_v1(regarding: ObjectReference, note: Note, now: Timestamp) -> EventV1 {
    let name = regarding.name.clone().unwrap_or_default();
    EventV1 {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: regarding.namespace.clone(),
            ..ObjectMeta::default()
        },
        regarding: Some(regarding),
        type_: Some(note.type_),
        reason: Some(note.reason),
        action: Some(note.action),
        note: Some(note.message),
        reporting_controller: Some(note.component),
        reporting_instance: Some(note.instance),
        event_time: Some(MicroTime(now)),
        ..EventV1::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_the_object_and_the_note() {
        let reference = ObjectReference {
            kind: Some("Service".into()),
            name: Some("web".into()),
            namespace: Some("demo".into()),
            uid: Some("u1".into()),
            ..ObjectReference::default()
        };
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let ev = core_v1(
            reference.clone(),
            Note {
                type_: "Normal".into(),
                reason: "IPAllocated".into(),
                action: "Allocate".into(),
                message: "Assigned IP [\"10.0.0.1\"]".into(),
                component: "metallb-controller".into(),
                instance: "controller-1".into(),
            },
            now,
        );
        assert_eq!(ev.involved_object, reference);
        assert_eq!(ev.metadata.namespace.as_deref(), Some("demo"));
        assert!(ev.metadata.name.unwrap().starts_with("web."));
        assert_eq!(ev.reason.as_deref(), Some("IPAllocated"));
        assert_eq!(ev.count, Some(1));
        assert_eq!(
            ev.source.unwrap().component.as_deref(),
            Some("metallb-controller")
        );
    }

    #[test]
    fn events_v1_carries_the_object_and_the_note() {
        let reference = ObjectReference {
            kind: Some("Service".into()),
            name: Some("web".into()),
            namespace: Some("demo".into()),
            uid: Some("u1".into()),
            ..ObjectReference::default()
        };
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let ev = events_v1(
            reference.clone(),
            Note {
                type_: "Normal".into(),
                reason: "IPAllocated".into(),
                action: "Allocate".into(),
                message: "Assigned IP [\"10.0.0.1\"]".into(),
                component: "ferrolb-controller".into(),
                instance: "controller-1".into(),
            },
            now,
        );
        assert_eq!(ev.regarding, Some(reference));
        assert_eq!(ev.metadata.namespace.as_deref(), Some("demo"));
        assert_eq!(
            ev.metadata.name.as_deref(),
            Some(format!("web.{:x}", now.as_nanosecond()).as_str())
        );
        assert_eq!(ev.reason.as_deref(), Some("IPAllocated"));
        assert_eq!(ev.note.as_deref(), Some("Assigned IP [\"10.0.0.1\"]"));
        assert_eq!(
            ev.reporting_controller.as_deref(),
            Some("ferrolb-controller")
        );
        assert_eq!(ev.reporting_instance.as_deref(), Some("controller-1"));
        assert_eq!(ev.event_time, Some(MicroTime(now)));
        assert!(ev.series.is_none());
    }
}
