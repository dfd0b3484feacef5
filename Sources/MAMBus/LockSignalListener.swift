import Foundation

/// The thread that reads one bus connection for `SessionLockMonitor`: each signal one of its
/// sources knows is checked (arguments, then the sender against the current owner of the
/// source's well-known name) and handed to `onEvent` in the order the bus delivered it.
final class LockSignalListener: @unchecked Sendable {
    /// How long one read waits, so `stop` is seen within about this long.
    static let readSlice = 0.2
    /// How long the bus may take to say who owns a name.
    static let ownerQueryTimeout = 1.0

    let bus: BusConnection
    /// "system bus", "session bus".
    let busName: String
    let sources: [LockSignalSource]
    private let log: @Sendable (String) -> Void
    private let debug: @Sendable (String) -> Void
    private let onEvent: @Sendable (SessionLockEvent) -> Void
    /// Guards `stopping`, `running` and `thread`; `running` going false is broadcast.
    private let state = NSCondition()
    private var stopping = false
    private var running = false
    private var thread: Thread?

    init(bus: BusConnection, busName: String, sources: [LockSignalSource], log: @escaping @Sendable (String) -> Void,
         debug: @escaping @Sendable (String) -> Void, onEvent: @escaping @Sendable (SessionLockEvent) -> Void) {
        self.bus = bus
        self.busName = busName
        self.sources = sources
        self.log = log
        self.debug = debug
        self.onEvent = onEvent
    }

    /// Whether its thread still reads (false after `stop` or once the bus was lost).
    var isListening: Bool {
        state.lock()
        defer { state.unlock() }
        return running && !stopping
    }

    func start() {
        let thread = Thread { [self] in
            run()
            state.lock()
            running = false
            state.broadcast()
            state.unlock()
        }
        thread.name = "mamfs-lock-\(busName)"
        state.lock()
        running = true
        self.thread = thread
        state.unlock()
        thread.start()
    }

    /// Ends the thread and closes the connection; returns when the thread is gone. Idempotent.
    /// Called from `onEvent` (on the thread itself) it cannot wait: the thread ends once
    /// `onEvent` returns.
    func stop() {
        state.lock()
        stopping = true
        if let thread, thread != Thread.current {
            while running { state.wait() }
        }
        state.unlock()
        bus.close()
    }

    private var isStopping: Bool {
        state.lock()
        defer { state.unlock() }
        return stopping
    }

    private func run() {
        while !isStopping {
            let message: BusMessage?
            do {
                message = try bus.nextMessage(timeout: Self.readSlice)
            } catch {
                if !isStopping {
                    log("session lock: lost the \(busName) (\(error)); \(sources.map(\.summary).joined(separator: ", ")) no longer heard")
                }
                return
            }
            guard let message, !isStopping else { continue }
            handle(message)
        }
    }

    private func handle(_ message: BusMessage) {
        if message.kind == .methodCall {
            // Nothing is served here; an answer spares the caller its timeout.
            if message.expectsReply, let reply = try? message.errorReply(
                name: "org.freedesktop.DBus.Error.UnknownMethod", text: "this connection only listens for lock signals") {
                try? bus.send(reply)
            }
            return
        }
        for source in sources {
            switch source.read(message) {
            case .notOurs:
                continue
            case .malformed(let reason):
                debug("session lock: ignored \(describe(message)): \(reason)")
            case .event(let event):
                if sentByOwner(message, of: source.ownerName) { onEvent(event) }
            }
            return
        }
    }

    /// Any client may send any signal, even on the system bus; only the connection that owns
    /// the well-known name now speaks for logind or the screensaver.
    private func sentByOwner(_ message: BusMessage, of name: String) -> Bool {
        let sender = message.sender ?? ""
        do {
            let call = try BusMessage.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                 interface: "org.freedesktop.DBus", member: "GetNameOwner", arguments: [.string(name)])
            let owner = try bus.call(call, timeout: Self.ownerQueryTimeout).arguments.first?.string ?? ""
            if !sender.isEmpty && owner == sender { return true }
            debug("session lock: ignored forged \(describe(message)): \(name) is owned by \(owner.isEmpty ? "nobody" : owner)")
        } catch let error as BusError where error.name == "org.freedesktop.DBus.Error.NameHasNoOwner" {
            debug("session lock: ignored forged \(describe(message)): nobody owns \(name)")
        } catch {
            debug("session lock: ignored \(describe(message)): cannot ask the \(busName) who owns \(name) (\(error))")
        }
        return false
    }

    private func describe(_ message: BusMessage) -> String {
        "\(message.interface ?? "").\(message.member ?? "") from \(message.sender ?? "an unnamed sender") on \(message.path ?? "no path")"
    }
}
