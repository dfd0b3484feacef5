import Foundation
import MAMProtection

/// Publishes `ProtectionEvent`s as `MamfsInterface` signals on the session bus, and (for a
/// mount with `-o notify`) tells the desktop about blocked accesses.
///
/// Without a session bus (`SessionBusAddress.resolve` finds none) or when it cannot be
/// reached, nothing is published and one line says so through `debug`; publishing never
/// fails the request that caused the event. A lost connection is reported once (`log`) and
/// not reopened.
///
/// Synchronous (the CLI: each event is sent and flushed before `deliver` returns) or
/// asynchronous (the mount daemon: events go to one serial queue, so a FUSE request never
/// waits for the bus; at most `pendingLimit` events wait, more are dropped with one log line).
public final class BusEventPublisher: ProtectionEventSink, @unchecked Sendable {
    public struct Options: Sendable {
        /// Own `MamfsInterface.busName` (queued behind another owner).
        public var ownsName = false
        /// Call `org.freedesktop.Notifications.Notify` for each `.accessBlocked` (at most one per
        /// file every `notificationInterval` seconds).
        public var desktopNotifications = false
        /// Seconds between two desktop notifications about the same file.
        public var notificationInterval: TimeInterval = 5
        /// Seconds a Notify call may take before it counts as failed.
        public var notifyTimeout: TimeInterval = 2
        /// Send from a serial queue instead of the caller's thread.
        public var asynchronous = false

        public init(ownsName: Bool = false, desktopNotifications: Bool = false, asynchronous: Bool = false) {
            self.ownsName = ownsName
            self.desktopNotifications = desktopNotifications
            self.asynchronous = asynchronous
        }
    }

    /// Events that may wait for an asynchronous publisher's queue.
    public static let pendingLimit = 1024

    private let environment: [String: String]
    private let options: Options
    private let log: @Sendable (String) -> Void
    private let debug: @Sendable (String) -> Void
    private let queue = DispatchQueue(label: "mamfs-bus")
    private let lock = NSLock()
    private var pending = 0
    private var reportedDrop = false
    // Used on the queue (asynchronous) or under `lock` (synchronous) only.
    private var connection: BusConnection?
    private var attempted = false
    private var reportedSendFailure = false
    private var rateLimit: NotificationRateLimit

    /// - Parameters:
    ///   - environment: where the session bus address is looked up.
    ///   - log: failures after connecting (a lost bus, a failed Notify), one line each.
    ///   - debug: no bus, a bus that cannot be reached, the name's owner.
    public init(environment: [String: String], options: Options, log: @escaping @Sendable (String) -> Void,
                debug: @escaping @Sendable (String) -> Void) {
        self.environment = environment
        self.options = options
        self.log = log
        self.debug = debug
        rateLimit = NotificationRateLimit(interval: options.notificationInterval)
    }

    /// Connects now (and requests the name) instead of at the first event; returns when that
    /// is done.
    public func start() {
        perform { $0.connectIfNeeded() }
        if options.asynchronous { queue.sync {} }
    }

    /// Waits until every queued event is sent, then closes the connection (releasing the name).
    public func stop() {
        perform { publisher in
            publisher.connection?.close()
            publisher.connection = nil
        }
        if options.asynchronous { queue.sync {} }
    }

    public func deliver(_ event: ProtectionEvent) {
        if options.asynchronous {
            lock.lock()
            guard pending < Self.pendingLimit else {
                let first = !reportedDrop
                reportedDrop = true
                lock.unlock()
                if first { log("D-Bus: more than \(Self.pendingLimit) events wait for the bus; dropping events until it catches up") }
                return
            }
            pending += 1
            lock.unlock()
        }
        perform { publisher in
            publisher.publish(event)
            if publisher.options.asynchronous {
                publisher.lock.lock()
                publisher.pending -= 1
                if publisher.pending == 0 { publisher.reportedDrop = false }
                publisher.lock.unlock()
            }
        }
    }

    /// Publishes `KeysDropped` (the account's keys left memory: `reason` says why).
    public func publishKeysDropped(accountId: String, upn: String, reason: String) {
        deliver(.keysDropped(accountId: accountId, upn: upn, reason: reason))
    }

    /// Publishes `ComplianceResult`: `result` is the remediation's name (Compliant, NotCompliant,
    /// NetworkFailure, ServiceFailure, UserCancelled, InteractionRequired), `code` its number.
    public func publishComplianceResult(accountId: String, upn: String, result: String, code: UInt32, error: String) {
        deliver(.complianceResult(accountId: accountId, upn: upn, result: result, code: code, error: error))
    }

    private func perform(_ work: @escaping @Sendable (BusEventPublisher) -> Void) {
        if options.asynchronous {
            queue.async { work(self) }
        } else {
            lock.lock()
            defer { lock.unlock() }
            work(self)
        }
    }

    private func connectIfNeeded() {
        guard !attempted else { return }
        attempted = true
        guard let address = SessionBusAddress.resolve(environment) else {
            debug("\(SessionBusAddress.missingReason): D-Bus signals are not published")
            return
        }
        do {
            let bus = try BusConnection(address: address)
            connection = bus
            guard options.ownsName else { return }
            switch try bus.requestName(MamfsInterface.busName) {
            case .owner:
                debug("D-Bus: \(bus.uniqueName) owns \(MamfsInterface.busName) on \(address)")
            case .queued, .taken:
                log("D-Bus: \(MamfsInterface.busName) is owned by another connection (another mount); this mount's signals come from \(bus.uniqueName), and it takes the name over when the owner releases it")
            }
        } catch {
            debug("D-Bus: session bus \(address) cannot be reached (\(error)): D-Bus signals are not published")
        }
    }

    private func publish(_ event: ProtectionEvent) {
        connectIfNeeded()
        guard let bus = connection else { return }
        do {
            try bus.send(try MamfsInterface.message(for: event))
        } catch {
            if !reportedSendFailure {
                reportedSendFailure = true
                log("D-Bus: cannot send \(MamfsInterface.signal(for: event).0.rawValue): \(error) (further failures are not reported)")
            }
        }
        if options.desktopNotifications, case .accessBlocked(let blocked) = event,
           rateLimit.allows(blocked.path, at: Date()) {
            do {
                _ = try bus.call(try DesktopNotification.call(for: blocked), timeout: options.notifyTimeout)
            } catch {
                log("desktop notification about \(blocked.path) failed: \(error)")
            }
        }
        bus.discardIncoming()
    }
}
