import Glibc
import MAMSystem

/// The file descriptors a process inherits from whoever started it.
enum InheritedDescriptors {
    /// Closes every descriptor above stderr. `mamfs mount` leaves a daemon behind, and a daemon
    /// must not keep its caller's descriptors open: a caller that waits for a pipe or socket to
    /// close (Foundation's `Process` does, and so does `$(...)` with `2>&1`) would otherwise
    /// wait until the filesystem is unmounted. Called first thing in main, before the runtime or
    /// Foundation open descriptors of their own.
    static func closeAll() {
        guard let open = ProcessDescriptorPath.openDescriptors() else { return }
        for fd in open where fd > 2 { SystemCall.close(fd) }
    }

    /// True for a command line that starts a mount daemon (`mount` without `-f` or `--help`,
    /// after any global options: `mamfs --state DIR -v mount ...`).
    static func startsDaemon(_ arguments: [String]) -> Bool {
        guard let (globals, words) = try? GlobalOptions.parse(arguments), !globals.help, !globals.version,
              words.first == "mount" else { return false }
        let options = words.prefix { $0 != "--" }
        return !options.contains("-f") && !options.contains("--help")
    }
}
