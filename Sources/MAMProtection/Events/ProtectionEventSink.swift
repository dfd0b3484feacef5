/// Where a `ProtectionContext` hands its `ProtectionEvent`s (set with `ProtectionContext.eventSink`).
///
/// The library only calls `deliver`; the component that owns the context implements it (the
/// CLI and the mount daemon publish on the session bus). `deliver` is called on the thread
/// that caused the event (a FUSE worker, the CLI's main thread) after the change is stored,
/// and must neither throw nor wait for anything slow: a failure to pass an event on is the
/// sink's to log, never an error of the request.
public protocol ProtectionEventSink: Sendable {
    func deliver(_ event: ProtectionEvent)
}
