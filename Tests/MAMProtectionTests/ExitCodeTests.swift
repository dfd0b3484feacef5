import Foundation
import Testing
import MAMProtection

@Suite("ExitCode")
struct ExitCodeTests {
    @Test("the numbers are a public contract (README lists them): each name keeps its sysexits value")
    func pinnedNumbers() {
        let expected: [(ExitCode, Int32)] = [(.ok, 0), (.failure, 1), (.usage, 64), (.dataErr, 65), (.noInput, 66),
                                             (.unavailable, 69), (.software, 70), (.cantCreate, 73), (.ioErr, 74), (.tempFail, 75),
                                             (.noPerm, 77), (.notCompliant, 80), (.networkFailure, 81), (.serviceFailure, 82),
                                             (.userCancelled, 83), (.interactionRequired, 84)]
        #expect(ExitCode.allCases.count == expected.count)
        for (code, number) in expected {
            #expect(code.rawValue == number, "\(code)")
            #expect(code.description == String(number))
        }
    }

    @Test("MAMError maps to its exit code")
    func errorCodes() {
        #expect(MAMError.invalidArguments("x").exitCode == .usage)
        #expect(MAMError.authenticationFailed("x").exitCode == .dataErr)
        #expect(MAMError.fileNotFound("x").exitCode == .noInput)
        #expect(MAMError.internalError("x").exitCode == .software)
        #expect(MAMError.cannotCreateOutput("x").exitCode == .cantCreate)
        #expect(MAMError.keyUnavailable("x").exitCode == .noPerm)
        #expect(MAMError.system("x", errno: ENOTDIR).exitCode == .noInput)
        #expect(MAMError.system("x", errno: EPERM).exitCode == .noPerm)
        #expect(MAMError.system("x", errno: EMLINK).exitCode == .cantCreate)
        #expect(MAMError.system("x", errno: EIO).exitCode == .ioErr)
    }
}

extension ExitCodeTests {
    @Test("README's exit-code table lists exactly the codes of ExitCode")
    func readmeTable() throws {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        let section = try #require(text.components(separatedBy: "## Exit codes").dropFirst().first)
        let body = section.components(separatedBy: "\n## ").first ?? section
        let listed = body.split(separator: "\n").compactMap { line -> Int32? in
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            return cells.first.flatMap { Int32($0) }
        }
        #expect(listed == ExitCode.allCases.map(\.rawValue))
    }
}
