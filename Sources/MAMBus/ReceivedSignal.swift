/// A signal of `MamfsInterface` as `mamfs events` shows it: its name and its arguments by name,
/// in the interface's order, with the status's name beside its code.
public struct ReceivedSignal: Sendable, Equatable {
    /// One argument: a string or a number.
    public enum Field: Sendable, Equatable {
        case text(String)
        case number(UInt32)
    }

    public let signal: MamfsInterface.Signal
    /// The unique name of the sender (":1.42").
    public let sender: String
    /// (name, value) in order: accountId, upn, status (name), statusCode, error, then the
    /// signal's own arguments.
    public let fields: [(name: String, value: Field)]

    public static func == (a: ReceivedSignal, b: ReceivedSignal) -> Bool {
        a.signal == b.signal && a.sender == b.sender && a.fields.map(\.name) == b.fields.map(\.name)
            && a.fields.map(\.value) == b.fields.map(\.value)
    }

    /// The signal `message` carries, nil when it is not one of the interface's or its
    /// arguments do not have the signal's signature.
    public init?(_ message: BusMessage) {
        guard message.kind == .signal, message.interface == MamfsInterface.interface,
              let member = message.member, let signal = MamfsInterface.Signal(rawValue: member),
              message.signature == signal.signature else { return nil }
        let arguments = message.arguments
        let code = arguments[2].uint32 ?? 0
        var fields: [(String, Field)] = [
            ("accountId", .text(arguments[0].string ?? "")),
            ("upn", .text(arguments[1].string ?? "")),
            ("status", .text(MamfsInterface.statusName(signal, code: code, arguments: arguments))),
            ("statusCode", .number(code)),
            ("error", .text(arguments[3].string ?? "")),
        ]
        for (name, value) in zip(signal.extraArguments, arguments.dropFirst(4)) {
            fields.append((name, value.uint32.map(Field.number) ?? .text(value.string ?? "")))
        }
        self.signal = signal
        self.sender = message.sender ?? ""
        self.fields = fields
    }

    /// The value of the field `name`.
    public subscript(_ name: String) -> Field? { fields.first { $0.name == name }?.value }
}
