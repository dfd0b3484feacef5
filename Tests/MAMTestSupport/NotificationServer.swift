import Foundation
import MAMBus

/// A test-owned `org.freedesktop.Notifications` service on a bus: it owns the name, answers
/// each `Notify` call with a new id and records its arguments.
public final class NotificationServer: @unchecked Sendable {
    /// One `Notify` call received.
    public struct Call: Sendable, Equatable {
        public let appName: String
        public let summary: String
        public let body: String
    }

    private let bus: BusConnection
    private let lock = NSLock()
    private var received: [Call] = []
    private var running = true
    private let finished = DispatchSemaphore(value: 0)

    /// Connects to `address`, owns the name and starts answering on a thread of its own.
    /// - Throws: `TestSupportError` when the name is taken; `BusError` when the bus cannot be reached.
    public init(address: String) throws {
        bus = try BusConnection(address: address)
        guard try bus.requestName("org.freedesktop.Notifications") == .owner else {
            throw TestSupportError("org.freedesktop.Notifications is owned by another connection")
        }
        Thread { [self] in serve() }.start()
    }

    deinit { stop() }

    private func serve() {
        var next: UInt32 = 1
        while isRunning {
            guard let message = try? bus.nextMessage(timeout: 0.1) else { continue }
            guard message.kind == .methodCall, message.interface == "org.freedesktop.Notifications" else { continue }
            let arguments = message.arguments
            if message.member == "Notify", message.signature == "susssasa{sv}i" {
                lock.lock()
                received.append(Call(appName: arguments[0].string ?? "", summary: arguments[3].string ?? "",
                                     body: arguments[4].string ?? ""))
                lock.unlock()
                if let reply = try? message.methodReturn([.uint32(next)]) { try? bus.send(reply) }
                next += 1
            } else if let reply = try? message.errorReply(name: "org.freedesktop.DBus.Error.UnknownMethod", text: "not served") {
                try? bus.send(reply)
            }
        }
        finished.signal()
    }

    private var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        return running
    }

    /// The calls so far.
    public var calls: [Call] {
        lock.lock()
        defer { lock.unlock() }
        return received
    }

    /// Stops answering and leaves the bus. Idempotent.
    public func stop() {
        lock.lock()
        let was = running
        running = false
        lock.unlock()
        guard was else { return }
        _ = finished.wait(timeout: .now() + 5)
        bus.close()
    }
}
