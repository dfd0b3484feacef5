/// A command line the user got wrong: unknown option, missing value, wrong number of
/// arguments. The CLI prints the message and a hint and exits with `ExitCode.usage`.
struct UsageError: Error, Equatable {
    let message: String
    init(_ message: String) { self.message = message }
}
