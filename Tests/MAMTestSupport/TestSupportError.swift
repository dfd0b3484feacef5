/// A helper could not do what a test asked (a process did not start, a fixture step failed).
public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
