import Foundation
import MAMBus
import MAMProtection

/// The mount's session-bus side (docs/NOTIFICATIONS.md): its `AccessBlocked` signals, the
/// well-known name `org.mamfs.Mamfs1` while it is mounted, and `-o notify`'s desktop
/// notifications.
extension MountDaemon {
    /// Connects to the session bus of the daemon's environment (when there is one), asks for
    /// the name and makes the publisher the context's event sink. Without a bus the mount
    /// works as before; with `-v` its log says there is none.
    static func startPublishing(fs: OverlayFilesystem, options: MountOptions, context: ProtectionContext) -> BusEventPublisher {
        let verbose = options.verbose
        let daemonLog = fs.daemonLog
        let publisher = BusEventPublisher(
            environment: ProcessInfo.processInfo.environment,
            options: .init(ownsName: true, desktopNotifications: options.notify, asynchronous: true),
            log: { daemonLog.write($0) },
            debug: { if verbose { daemonLog.write($0) } })
        publisher.start()
        context.eventSink = publisher
        return publisher
    }

    /// Sends what is queued, then leaves the bus (the name is released).
    static func stopPublishing(_ publisher: BusEventPublisher, context: ProtectionContext) {
        context.eventSink = nil
        publisher.stop()
    }
}
