import Foundation
import Glibc
import Testing
@testable import MAMProtection

@Suite("WriterTemporaryName")
struct WriterTemporaryNameTests {
    @Test("a temp name carries the writer's PID; only names of that form with a gone writer are left-overs")
    func writerAndLeftOver() throws {
        let name = WriterTemporaryName.make(for: "report.txt", pid: 4321, suffix: "k3x9q")
        #expect(name == ".report.txt.mamfs-tmp-p4321-k3x9q")
        #expect(WriterTemporaryName.writer(of: name) == 4321)
        #expect(WriterTemporaryName.target(of: name) == "report.txt")
        #expect(WriterTemporaryName.target(of: ".a.mamfs-tmp-p1.mamfs-tmp-p12-x") == "a.mamfs-tmp-p1")
        let long = WriterTemporaryName.make(for: String(repeating: "n", count: 300), suffix: "z")
        #expect(long.utf8.count < 255)
        #expect(WriterTemporaryName.writer(of: long) == getpid())
        #expect(WriterTemporaryName.target(of: long) == nil, "a cut name does not tell its target")
        #expect(!WriterTemporaryName.isLeftOver(long), "this process runs")
        for other in [".report.txt.mamfs-tmp-zz91", "report.txt.mamfs-tmp-p12-a", ".x.mamfs-tmp-p-a",
                      ".x.mamfs-tmp-p12", ".x.mamfs-tmp-p12-", ".x.mamfs-tmp-p0-a", ".report.txt"] {
            #expect(WriterTemporaryName.writer(of: other) == nil, "\(other)")
            #expect(!WriterTemporaryName.isLeftOver(other), "\(other)")
        }
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { argv.forEach { free($0) } }
        #expect(posix_spawn(&pid, "/bin/true", nil, nil, argv, nil) == 0)
        var status: Int32 = 0
        #expect(waitpid(pid, &status, 0) == pid)
        #expect(WriterTemporaryName.isLeftOver(".f.mamfs-tmp-p\(pid)-q"))
    }
}
