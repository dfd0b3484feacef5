import Foundation
import Glibc
import Testing
import MAMTestSupport

/// A user who may rename entries in a backing directory races the daemon (root, `allow_other`)
/// while it makes objects for that user through the mount: between the create and the moment
/// the daemon gave the new object to its caller, the user exchanges the new name with root's
/// file. An object is born the caller's (made as the caller), so root's file keeps its owner
/// and mode however the race falls.
@Suite("Security: objects made for a user are never handed over by name")
struct SecurityCreateRaceTests {
    static let seconds = 4

    /// argv: the directory on the mount, the same directory in the backing tree, the seconds.
    /// One process creates x0, x1, ... (mode 04755) through the mount; another exchanges root's
    /// file `victim` in the backing directory with each new name as soon as it exists. Prints
    /// the creates made and the exchanges that took.
    static let race = """
    import ctypes, os, sys, time, multiprocessing as mp
    mounted, backing, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    libc = ctypes.CDLL(None, use_errno=True)
    def exchange(a, b): return libc.renameat2(-100, a.encode(), -100, b.encode(), 2) == 0
    def creator(stop, index, made):
        i = 0; end = time.time() + seconds
        while time.time() < end:
            index.value = i
            try:
                os.close(os.open(os.path.join(mounted, "x%d" % i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o4755)); made.value += 1
            except OSError: pass
            i += 1; time.sleep(0.0002)
        stop.value = 1
    def swapper(stop, index, swaps):
        current = "victim"; i = 0
        while not stop.value:
            i = max(i, index.value); name = "x%d" % i
            if exchange(os.path.join(backing, current), os.path.join(backing, name)):
                current = name; i += 1; swaps.value += 1
    if __name__ == "__main__":
        stop, index, made, swaps = mp.Value("i", 0), mp.Value("i", 0), mp.Value("i", 0), mp.Value("i", 0)
        a = mp.Process(target=creator, args=(stop, index, made)); b = mp.Process(target=swapper, args=(stop, index, swaps))
        a.start(); b.start(); a.join(); b.join()
        print(made.value, swaps.value)
    """

    @Test("root's file exchanged with a new object's name while the daemon makes it keeps its owner and mode",
          .enabled(if: geteuid() == 0, "acts as user nobody"))
    func createRaceLeavesRootsFileAlone() throws {
        try withMount(.unmanaged, options: ["allow_other"]) { m in
            let setUp = try m.sh("""
            chmod 755 "$BASE" && mkdir shared && chmod 777 shared && cp /usr/bin/id shared/victim && chmod 755 shared/victim && \
            chown root:root shared/victim && stat -c %i shared/victim
            """)
            try #require(setUp.status == 0, "\(setUp.err)")
            let victim = setUp.out.trimmingCharacters(in: .whitespacesAndNewlines)
            let script = m.base + "/create-race.py"
            try Data(Self.race.utf8).write(to: URL(fileURLWithPath: script))
            let race = try m.sh("""
            chmod 644 \(shellQuote(script)) && setpriv --reuid=65534 --regid=65534 --clear-groups timeout 60 /usr/bin/python3 \
            \(shellQuote(script)) "$PWD/shared" \(shellQuote(m.backing + "/shared")) \(Self.seconds)
            """, timeout: 120)
            #expect(race.status == 0, "\(race.err)")
            let counts = race.out.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
            #expect(counts.count == 2 && counts[0] > 100 && counts[1] > 10, "creates and exchanges: \(race.out)")
            // Root's file, wherever the exchanges left it: still root's, still 0755.
            let found = try shell("find \(shellQuote(m.backing + "/shared")) -inum \(victim) -printf '%u:%g %m\\n'", environment: m.environment)
            #expect(found.out == "root:root 755\n", "\(found.out) \(found.err)")
            // Every object the creates made is nobody's.
            let others = try shell("find \(shellQuote(m.backing + "/shared")) -type f ! -inum \(victim) ! -user nobody", environment: m.environment)
            #expect(others.out.isEmpty, "objects made for nobody but not nobody's: \(others.out)")
        }
    }
}
