import Foundation
import Testing

@Suite("CLI: protect, info, encrypt, decrypt on real files")
struct FileTests {
    @Test("encrypt -o then decrypt -o round-trips GPL-3 byte for byte; the ciphertext hides the text")
    func encryptDecryptCopies() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let original = try Data(contentsOf: URL(fileURLWithPath: Fixtures.gpl3))
        let source = try sandbox.write("GPL-3", original)
        let encrypted = sandbox.path("GPL-3.mam")
        let decrypted = sandbox.path("GPL-3.plain")

        let encrypt = try sandbox.run(["encrypt", source, "--account", Fixtures.upn, "-o", encrypted])
        #expect(encrypt.status == 0, "\(encrypt.err)")
        #expect(encrypt.stderr.isEmpty)
        #expect(try sandbox.read(source) == original, "the source is left as it was")
        let ciphertext = try sandbox.read(encrypted)
        #expect(!ciphertext.contains(Fixtures.gplPhrase))
        #expect(!ciphertext.contains("Free Software Foundation"))

        let decrypt = try sandbox.run(["decrypt", encrypted, "-o", decrypted])
        #expect(decrypt.status == 0, "\(decrypt.err)")
        #expect(try sandbox.read(decrypted) == original)
        #expect(try sandbox.read(encrypted) == ciphertext, "decrypt -o leaves the encrypted file alone")
    }

    @Test("encrypt and decrypt in place", arguments: [0, 1, 4095, 4096, 4097, 3 * 1024 * 1024 + 5])
    func inPlace(size: Int) throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let content = Fixtures.binary(max(0, size - 256)).prefix(size)
        let file = try sandbox.write("data.bin", Data(content))
        #expect(try sandbox.run(["encrypt", file, "--account", Fixtures.account]).status == 0)
        let info = try jsonArray(try sandbox.run(["info", "--json", file]))
        #expect(info.first?["encrypted"] as? Bool == true)
        #expect((info.first?["size"] as? NSNumber)?.intValue == size)
        #expect((info.first?["storedSize"] as? NSNumber)?.intValue ?? 0 > size)
        if size > 0 { #expect(try sandbox.read(file) != Data(content)) }
        let decrypt = try sandbox.run(["decrypt", file])
        #expect(decrypt.status == 0, "\(decrypt.err)")
        #expect(try sandbox.read(file) == Data(content))
        let after = try jsonArray(try sandbox.run(["info", "--json", file]))
        #expect(after.first?["owner"] is NSNull)
        #expect(after.first?["encrypted"] as? Bool == false)
    }

    @Test("info --json: one object per path with exactly path, owner, encrypted, size, storedSize")
    func infoJSON() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let untagged = try sandbox.write("untagged.txt", "hello\n")
        let unmanaged = try sandbox.write("unmanaged.txt", "personal\n")
        let managed = try sandbox.write("managed.txt", "corporate\n")
        #expect(try sandbox.run(["protect", unmanaged, "--account", ""]).status == 0)
        #expect(try sandbox.run(["protect", managed, "--account", Fixtures.upn]).status == 0)

        let result = try sandbox.run(["info", "--json", untagged, unmanaged, managed])
        #expect(result.status == 0, "\(result.err)")
        let objects = try jsonArray(result)
        #expect(objects.count == 3)
        for object in objects {
            #expect(Set(object.keys) == ["path", "owner", "encrypted", "size", "storedSize"])
        }
        #expect(objects.map { $0["path"] as? String } == [untagged, unmanaged, managed])

        #expect(objects[0]["owner"] is NSNull)
        #expect(objects[0]["encrypted"] as? Bool == false)
        #expect((objects[0]["size"] as? NSNumber)?.intValue == 6)
        #expect((objects[0]["storedSize"] as? NSNumber)?.intValue == 6)

        #expect(objects[1]["owner"] as? String == "")
        #expect(objects[1]["encrypted"] as? Bool == false)
        #expect((objects[1]["size"] as? NSNumber)?.intValue == 9)
        let unmanagedStored = try FileManager.default.attributesOfItem(atPath: unmanaged)[.size] as? NSNumber
        #expect((objects[1]["storedSize"] as? NSNumber) == unmanagedStored)
        #expect(unmanagedStored?.intValue ?? 0 > 9)
        #expect(try sandbox.read(unmanaged).contains("personal"), "unmanaged files stay plain")

        #expect(objects[2]["owner"] as? String == Fixtures.account)
        #expect(objects[2]["encrypted"] as? Bool == true)
        #expect((objects[2]["size"] as? NSNumber)?.intValue == 10)
        #expect(!(try sandbox.read(managed).contains("corporate")))

        let human = try sandbox.run(["info", untagged, unmanaged, managed])
        #expect(human.status == 0)
        let lines = human.out.split(separator: "\n").map(String.init)
        #expect(lines.count == 4)
        #expect(lines[0].hasPrefix("OWNER"))
        #expect(lines[3].contains(Fixtures.account) && lines[3].contains("yes") && lines[3].hasSuffix(managed))
        #expect(lines[2].contains("(unmanaged)"))
    }

    @Test("protect --account '' makes a managed file unmanaged and decrypts it")
    func protectUnmanaged() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let file = try sandbox.write("note.txt", "meeting notes\n")
        #expect(try sandbox.run(["protect", file, "--account", Fixtures.account]).status == 0)
        #expect(!(try sandbox.read(file).contains("meeting notes")))
        let result = try sandbox.run(["protect", file, "--account", ""])
        #expect(result.status == 0, "\(result.err)")
        let info = try jsonArray(try sandbox.run(["info", "--json", file]))
        #expect(info.first?["owner"] as? String == "")
        #expect(info.first?["encrypted"] as? Bool == false)
        let plain = sandbox.path("plain.txt")
        #expect(try sandbox.run(["decrypt", file, "-o", plain]).status == 0)
        #expect(try sandbox.read(plain) == Data("meeting notes\n".utf8))
    }

    @Test("missing input exits 66 with one line naming the file")
    func missingInput() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let missing = sandbox.path("no-such-file")
        for arguments in [["encrypt", missing, "--account", Fixtures.account],
                          ["decrypt", missing],
                          ["info", missing],
                          ["protect", missing, "--account", Fixtures.account]] {
            let result = try sandbox.run(arguments)
            #expect(result.status == 66, "\(arguments[0]): \(result.err)")
            #expect(result.errLines.count == 1)
            #expect(result.err.hasPrefix("mamfs: \(arguments[0]): "))
            #expect(result.err.contains(missing))
        }
        let directory = try sandbox.run(["decrypt", sandbox.root])
        #expect(directory.status == 66)
        #expect(directory.err.contains(sandbox.root))
    }

    @Test("info reports the paths it can and exits with the first error")
    func infoPartial() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let file = try sandbox.write("ok.txt", "ok\n")
        let result = try sandbox.run(["info", "--json", sandbox.path("missing"), file])
        #expect(result.status == 66)
        #expect(try jsonArray(result).count == 1)
    }

    @Test("a flipped byte in an encrypted file is an authentication failure, exit 65; no output is left")
    func tampered() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let original = try Data(contentsOf: URL(fileURLWithPath: Fixtures.gpl3))
        let file = try sandbox.write("GPL-3", original)
        #expect(try sandbox.run(["encrypt", file, "--account", Fixtures.account]).status == 0)
        let stored = try sandbox.read(file)
        for offset in [stored.count / 2, stored.count - 1] {
            var tampered = stored
            tampered[offset] ^= 0x01
            try tampered.write(to: URL(fileURLWithPath: file))
            let copy = sandbox.path("copy-\(offset)")
            let result = try sandbox.run(["decrypt", file, "-o", copy])
            #expect(result.status == 65, "offset \(offset): \(result.err)")
            #expect(result.errLines.count == 1)
            #expect(result.err.hasPrefix("mamfs: decrypt: "))
            #expect(result.err.contains(file))
            #expect(result.err.contains("authentication failed"))
            #expect(!sandbox.exists(copy), "no partial plaintext is left behind")
            let inPlace = try sandbox.run(["decrypt", file])
            #expect(inPlace.status == 65)
            #expect(try sandbox.read(file) == tampered, "a failed in-place decrypt leaves the file unchanged")
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: sandbox.root).filter { $0.hasPrefix(".") }
        #expect(leftovers.isEmpty, "no temp files: \(leftovers)")
    }

    @Test("encrypting for an unregistered UPN or an unmanaged identity is denied, exit 77")
    func encryptDenied() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let file = try sandbox.write("f.txt", "x\n")
        let unknown = try sandbox.run(["encrypt", file, "--account", "nobody@contoso.com"])
        #expect(unknown.status == 77)
        #expect(unknown.errLines.count == 1)
        #expect(unknown.err.contains("nobody@contoso.com"))
        let unmanaged = try sandbox.run(["encrypt", file, "--account", ""])
        #expect(unmanaged.status == 77)
        let unregisteredGuid = try sandbox.run(["encrypt", file, "--account", Fixtures.otherAccount])
        #expect(unregisteredGuid.status == 77)
        #expect(try sandbox.read(file) == Data("x\n".utf8))
        let protectUnknown = try sandbox.run(["protect", file, "--account", "nobody@contoso.com"])
        #expect(protectUnknown.status == 77)
    }

    @Test("decrypting an untagged file fails with 65; writing to a missing directory fails with 73")
    func decryptErrors() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let plain = try sandbox.write("plain.txt", "plain\n")
        let notProtected = try sandbox.run(["decrypt", plain])
        #expect(notProtected.status == 65)
        #expect(notProtected.err.contains(plain))
        let encrypted = sandbox.path("enc")
        #expect(try sandbox.run(["encrypt", plain, "--account", Fixtures.account, "-o", encrypted]).status == 0)
        let badOutput = try sandbox.run(["decrypt", encrypted, "-o", sandbox.path("no/such/dir/out")])
        #expect(badOutput.status == 73, "\(badOutput.err)")
        #expect(badOutput.errLines.count == 1)
    }
}
