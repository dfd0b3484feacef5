/// A value of the policy vocabulary named by a string (a location, a receive rule): the raw
/// value is the name used in policy JSON and on the command line.
public protocol PolicyName: RawRepresentable, CaseIterable where RawValue == String {}

extension PolicyName {
    /// Parses a name case-insensitively ("localdrive" -> `.localDrive`). Surrounding whitespace
    /// is ignored. Returns nil for an unknown name.
    public init?(parsing name: String) {
        let wanted = name.trimmingWhitespace().lowercased()
        guard let match = Self.allCases.first(where: { $0.rawValue.lowercased() == wanted }) else { return nil }
        self = match
    }
}
