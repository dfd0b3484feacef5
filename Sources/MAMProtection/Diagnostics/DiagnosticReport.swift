import COpenSSL
import CSQLite
import Foundation

/// What `mamfs diagnose` reports: versions, state directory checks, mamfs mounts, accounts
/// with a summary of their policies, the allowed accounts and the last audit records.
///
/// Never holds key material: the master key and account keys are reported by presence, mode
/// and count only. Every string in the tree has the state's scrub values replaced
/// (`Scrubber`). The tree is JSON-shaped (dictionaries, arrays, strings, integers, booleans,
/// `NSNull`) so it can be printed as JSON or as text.
public struct DiagnosticReport {
    /// The report; see docs for its keys: `versions`, `state`, `mounts`, `accounts`,
    /// `allowedAccounts`, `audit`.
    public let tree: [String: Any]
    /// The scrubber that was applied (to scrub other text the caller prints alongside).
    public let scrubber: Scrubber

    /// Collects the report.
    /// - Parameters:
    ///   - context: the opened state.
    ///   - toolVersion: the mamfs version string.
    ///   - libraryVersions: versions of libraries the layers above link (libfuse, libcurl,
    ///     libxml2: name -> version), reported beside SQLite's and OpenSSL's.
    ///   - auditRecords: how many of the newest audit records to include.
    ///   - mountTable: the mount table (default: this namespace's /proc/self/mountinfo).
    /// - Throws: `MAMError.internalError` when the state's scrub list is malformed (nothing is
    ///   printed then, so no value meant to be scrubbed leaks); other failures become
    ///   `"error"` entries in the tree.
    public static func collect(context: ProtectionContext, toolVersion: String, libraryVersions: [String: String] = [:],
                               auditRecords: Int = 10, mountTable: MountInfo? = MountInfo.current()) throws -> DiagnosticReport {
        let scrubber = Scrubber(values: try context.state.scrubValues())
        var tree: [String: Any] = [:]
        tree["versions"] = versions(toolVersion).merging(libraryVersions) { ours, _ in ours }
        tree["state"] = stateChecks(context)
        tree["mounts"] = mounts(mountTable)
        tree["accounts"] = accounts(context)
        tree["allowedAccounts"] = (try? context.state.allowedAccounts()) ?? []
        tree["audit"] = audit(context, last: auditRecords)
        return DiagnosticReport(tree: scrubber.scrubTree(tree) as? [String: Any] ?? [:], scrubber: scrubber)
    }

    static func versions(_ toolVersion: String) -> [String: Any] {
        ["mamfs": toolVersion,
         "sqlite": String(cString: sqlite3_libversion()),
         "openssl": String(cString: OpenSSL_version(OPENSSL_VERSION)),
         "stateSchema": StateStore.schemaVersion]
    }

    /// Mode, owner and presence of the state directory and its files; SQLite's integrity check;
    /// how the master key is kept; account key counts.
    static func stateChecks(_ context: ProtectionContext) -> [String: Any] {
        let directory = context.stateDirectory
        var files: [[String: Any]] = []
        for name in [StateDirectory.databaseFileName, StateDirectory.databaseFileName + "-wal",
                     StateDirectory.databaseFileName + "-shm", StateDirectory.masterKeyFileName, "audit.log"] {
            files.append(fileCheck(directory.url.appendingPathComponent(name).path, name: name, privateMode: 0o600))
        }
        let kdf = (try? context.state.metaValue(MasterKey.kdfMetaKey)).flatMap { $0 }
            .map { String(decoding: $0, as: UTF8.self) } ?? "keyfile"
        let counts = (try? context.state.accountKeyCounts()) ?? [:]
        return ["path": directory.url.path,
                "directory": fileCheck(directory.url.path, name: ".", privateMode: 0o700),
                "files": files,
                "integrityCheck": context.state.integrityCheck() ? "ok" : "failed",
                "masterKey": ["kind": kdf == "keyfile" ? "keyfile" : "passphrase",
                              "keyFilePresent": FileManager.default.fileExists(atPath: directory.masterKeyURL.path)],
                "accountKeys": counts]
    }

    /// `lstat` of one state file: present, mode (octal text), owner uid, and whether the mode
    /// gives group or others nothing (what `privateMode` asks).
    static func fileCheck(_ path: String, name: String, privateMode: mode_t) -> [String: Any] {
        var st = stat()
        guard lstat(path, &st) == 0 else { return ["name": name, "present": false] }
        let mode = st.st_mode & 0o7777
        return ["name": name, "present": true, "mode": String(format: "%04o", mode), "uid": Int(st.st_uid),
                "private": mode & 0o077 == 0 && (st.st_mode & S_IFMT) != S_IFLNK && mode & privateMode == mode]
    }

    /// The `fuse.mamfs` mounts of the table with their options.
    static func mounts(_ table: MountInfo?) -> Any {
        guard let table else { return ["error": "cannot read \(MountInfo.procPath)"] }
        return table.entries.filter { $0.filesystemType == "fuse.mamfs" }.map { entry -> [String: Any] in
            ["mountPoint": entry.mountPoint, "source": entry.source, "device": entry.device,
             "options": entry.options, "superOptions": entry.superOptions]
        }
    }

    /// Every account with its state and, when enrolled, a summary of its policy.
    static func accounts(_ context: ProtectionContext) -> Any {
        guard let records = try? context.state.allAccounts() else { return ["error": "cannot read the accounts"] }
        let compliance = try? context.state.complianceResults()
        return records.map { record -> [String: Any] in
            var object: [String: Any] = [
                "accountId": record.knownAccountId.map { $0 as Any } ?? NSNull(),
                "upn": record.upn.map { $0 as Any } ?? NSNull(),
                "managed": record.managed, "registered": record.registered,
                "wiped": record.wipedAt != nil,
            ]
            if record.managed, let json = record.policyJSON {
                if let policy = try? Policy.parse(Data(json.utf8), source: "state") {
                    object["policy"] = summary(policy)
                } else {
                    object["policy"] = ["error": "the stored policy does not parse"]
                }
            }
            if let accountId = record.knownAccountId {
                object["compliance"] = complianceSummary(compliance.map { $0[accountId] })
            }
            return object
        }
    }

    /// The account's last compliance result (`mamfs compliance status`): nil when it was never
    /// checked; an error entry when the results cannot be read (`results` nil).
    static func complianceSummary(_ results: ComplianceResult??) -> Any {
        guard let results else { return ["error": "cannot read the compliance results"] }
        guard let result = results else { return NSNull() }
        return ["status": result.status.rawValue, "checkedAt": AuditTime.format(result.checkedAt),
                "failedCheck": result.failedCheck.map { $0 as Any } ?? NSNull(), "reason": result.reason]
    }

    static func summary(_ policy: Policy) -> [String: Any] {
        ["fileEncryptionRequired": policy.fileEncryptionRequired,
         "fileProviderEncryptFiles": policy.fileProviderEncryptFiles,
         "receiveData": policy.receiveData.rawValue,
         "sendData": policy.sendData.rawValue,
         "allowUserDecrypt": policy.allowUserDecrypt,
         "protectionLevel": policy.protectionLevel.rawValue,
         "managedApps": policy.managedApps.map { $0.count as Any } ?? NSNull(),
         "locations": policy.locations.table.keys.sorted(),
         "appConfigKeys": policy.appConfig.keys.sorted(),
         "complianceChecks": policy.compliance?.count ?? 0]
    }

    /// The newest `last` audit records, oldest first.
    static func audit(_ context: ProtectionContext, last: Int) -> Any {
        do {
            return try context.auditLog.records().suffix(last).map { record -> [String: Any] in
                ["seq": Int(record.seq), "time": record.time, "action": record.action, "path": record.path,
                 "owner": record.owner, "decision": record.decision, "rule": record.rule, "executable": record.executable]
            }
        } catch {
            return ["error": "\(error)"]
        }
    }
}
