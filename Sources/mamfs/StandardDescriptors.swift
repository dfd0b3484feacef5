import Glibc

/// Descriptors 0, 1 and 2 that the process was started without. Left closed, the first file
/// mamfs opens (the state database, an input file) would take the lowest free number and be
/// read as stdin or written as stdout: `mamfs protect-data <&-` would protect whatever file
/// got descriptor 0. `occupyClosed` gives each closed one /dev/null opened the wrong way round
/// (stdin write-only, stdout read-only), so that reading stdin and writing stdout still fail
/// with EBADF, as they would have, and no other file can take their numbers.
enum StandardDescriptors {
    /// Opens /dev/null in every closed standard descriptor (stdin write-only, stdout and
    /// stderr read-only). Called first thing in `main`; a descriptor that cannot be filled is
    /// left as it is.
    static func occupyClosed() {
        for (fd, access) in [(STDIN_FILENO, O_WRONLY), (STDOUT_FILENO, O_RDONLY), (STDERR_FILENO, O_RDONLY)] {
            guard fcntl(fd, F_GETFD) < 0, errno == EBADF else { continue }
            let opened = open("/dev/null", access)
            guard opened >= 0, opened != fd else { continue }
            // Not the lowest free number (cannot happen while 0...fd-1 are open): move it there.
            dup2(opened, fd)
            close(opened)
        }
    }
}
