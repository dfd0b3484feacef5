import Foundation
import MAMBus

/// A test-owned service on a bus: a connection that owns a well-known name and reads its
/// messages on a thread of its own, answering each method call with what `answer` returns
/// (nil: an `UnknownMethod` error). What `FakeLogind` and `FakeScreenSaver` are built on; their
/// signals go out from this connection, the name's owner.
final class BusServiceFixture: @unchecked Sendable {
    let bus: BusConnection
    let name: String
    private let answer: @Sendable (BusMessage) -> [BusValue]?
    private let state = NSCondition()
    private var running = true
    private var serving = true

    /// Connects to `address`, owns `name` and starts reading.
    /// - Throws: `TestSupportError` when another connection owns `name`; `BusError` when the
    ///   bus cannot be reached or its policy refuses the name.
    init(address: String, name: String, answer: @escaping @Sendable (BusMessage) -> [BusValue]?) throws {
        bus = try BusConnection(address: address)
        self.name = name
        self.answer = answer
        guard try bus.requestName(name) == .owner else {
            bus.close()
            throw TestSupportError("\(name) is owned by another connection")
        }
        Thread { [self] in
            serve()
            state.lock()
            serving = false
            state.broadcast()
            state.unlock()
        }.start()
    }

    deinit { stop() }

    /// Sends the signal `interface.member(arguments)` from `path`, flushed to the bus.
    func emit(path: String, interface: String, member: String, arguments: [BusValue]) throws {
        try bus.send(try BusMessage.signal(path: path, interface: interface, member: member, arguments: arguments))
    }

    /// Stops reading and leaves the bus (the name is released). Idempotent.
    func stop() {
        state.lock()
        running = false
        while serving { state.wait() }
        state.unlock()
        bus.close()
    }

    private var isRunning: Bool {
        state.lock()
        defer { state.unlock() }
        return running
    }

    private func serve() {
        while isRunning {
            guard let message = try? bus.nextMessage(timeout: 0.1) else { continue }
            guard message.kind == .methodCall, message.expectsReply else { continue }
            let reply = answer(message).flatMap { try? message.methodReturn($0) }
                ?? (try? message.errorReply(name: "org.freedesktop.DBus.Error.UnknownMethod",
                                            text: "\(message.interface ?? "").\(message.member ?? "") is not served by this \(name)"))
            if let reply { try? bus.send(reply) }
        }
    }
}
