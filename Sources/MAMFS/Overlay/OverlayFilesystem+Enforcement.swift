import Glibc
import MAMProtection
import MAMSystem

extension CallerExecutable: ExecutableIdentity {}

/// The caller-aware rules on a mount: requests mapped onto `AccessRules` questions, asked for
/// the caller's executable (/proc/PID/exe) with the mount's `--account` as the app account,
/// and every denial (and at level audit every would-be denial) recorded in the audit log.
///
/// | request | question |
/// |---|---|
/// | open of an existing file | `.open(reading:writing:)` with the owner of the header the handle is opened on (a placeholder's once materialized); the location of its mount path |
/// | open with O_TRUNC | a work file: `.open(reading: false, writing: true)`; otherwise `.create` (new owner by the writer) and, for a work owner, `.save` |
/// | create, mknod of a file | `.create` with the inherited owner, then `.save` when the new owner is a work account |
/// | rename, link of a work file | `.save(into:)` the location of the target's mount path |
/// | rename over (or exchange with) a work file | `.open(reading: false, writing: true)` with that file's owner |
/// | rename (into another directory) or link of anything else into a work directory (but a directory that is work by its tag or the one it inherits); symlink, mknod of a FIFO, socket or device there | `.create` with the directory's inherited owner |
/// | `user.mam.owner` of a file or directory | `.declassify(newOwner:)` for each work owner it rewrites (a directory: its tag, or the owner it inherits, and everything below it; EPERM) |
///
/// Locations: a provider mount is its `--location` as a whole; a plain mount's objects are
/// where the deciding policy's `locations` prefixes put their mount path (mountpoint +
/// relative path), else the local drive. A directory renamed is asked to save each work owner
/// found below it where its files land (`decideDirectoryMove`).
extension OverlayFilesystem {
    /// The decision behind `admit` for the operations that have one (see the table).
    /// - Throws: `FilesystemError` with the decision's errno when it denies.
    func decideAccess(_ operation: Operation, on inode: Inode, by caller: Caller) throws -> Admission {
        let asker = Asker(executable: callers.executable(of: caller.pid), caller: caller)
        switch operation {
        case .open(let flags, let known):
            guard inode.isRegular else { return .unchanged }
            let owner: String?
            switch known {
            case .tag(let tag): owner = tag
            case .unread: owner = try ownerTag(of: inode)
            }
            return try decideOpen(inode, flags: flags, owner: owner, asker)
        case .createFile(let name):
            let inherited = try inheritedOwner(of: inode)
            return try decideNewContent(inheritedOwner: inherited, path: try self.mountPath(inode, name), asker)
        case .moveEntry(let name, let target, let newName):
            if let replaced = workOwner(ofFile: newName, in: target) {
                // The work file at the new name is replaced (or exchanged): its content is
                // written, as by an open with O_TRUNC.
                try asker.enforce(self, .open(reading: false, writing: true), owner: replaced, location: .localDrive,
                                  path: try mountPath(target, newName))
            }
            guard let owner = workOwner(ofFile: name, in: inode) else {
                // Anything else but a directory that is work already (by its tag or the one it
                // inherits) moved into another directory that is work is put there as a create
                // would be (a rename within one directory brings nothing new into it).
                if target !== inode, try !isWorkDirectory(name, in: inode) { try decidePutInto(target, newName, asker) }
                try decideDirectoryMove(name, in: inode, to: target, newName, asker)
                return .unchanged
            }
            try decideSave(owner: owner, path: try self.mountPath(target, newName), asker)
            return .unchanged
        case .linkInto(let target, let name):
            guard inode.isRegular, let owner = workOwner(try ownerTag(of: inode)) else {
                try decidePutInto(target, name, asker)
                return .unchanged
            }
            try decideSave(owner: owner, path: try self.mountPath(target, name), asker)
            return .unchanged
        case .makeSpecial(let name):
            // A symlink or FIFO in a work directory would lead a managed app's save elsewhere.
            try decidePutInto(inode, name, asker)
            return .unchanged
        case .changeOwner(let value):
            let owners = try workOwnersChanged(by: inode)
            guard !owners.isEmpty else { return .unchanged }
            let newOwner = (try? context.resolveOwner(value)) ?? value
            let path = try mountPath(inode)
            for owner in owners.sorted() {
                try asker.enforce(self, .declassify(newOwner: newOwner), owner: owner,
                                  location: try location(ofMountPath: path, forAccount: owner), path: path)
            }
            return .unchanged
        default:
            return .unchanged
        }
    }

    /// One request's executable and caller.
    struct Asker {
        let executable: CallerExecutable
        let caller: Caller

        /// Asks `action` (`AccessRules`, or the executable's decision for the same question
        /// under the same policies), records a recorded decision, throws its errno when it denies.
        @discardableResult
        func enforce(_ fs: OverlayFilesystem, _ action: AccessAction, owner: String?, location: StorageLocation,
                     path: @autoclosure () throws -> String) throws -> AccessDecision {
            let key = CallerExecutable.DecisionKey(action: action, owner: owner, location: location)
            let decision = executable.decision(key, generation: fs.generation) {
                AccessRules(evaluator: fs.context.policyEvaluator).decide(
                    AccessRequest(action: action, executable: executable, owner: owner,
                                  location: location, appAccount: fs.options.account))
            }
            if decision.isRecorded {
                // The mount path (a readlink of the backing descriptor) only for a record.
                let event = AuditEvent(uid: caller.uid, pid: caller.pid, executable: executable.shownPath,
                                       action: action.auditName, path: (try? path()) ?? "", owner: owner ?? "",
                                       decision: decision.verdict.auditName, rule: decision.rule)
                fs.recordAccess(event)
                if !decision.permits { fs.reportBlocked(event, errno: decision.errno) }
            }
            guard decision.permits else { throw FilesystemError(code: decision.errno) }
            return decision
        }
    }

    /// The one place a decision goes to the audit log (the context's `AuditLog`; written at
    /// once, or counted into a burst and written by the log's timer or when the mount stops).
    func recordAccess(_ event: AuditEvent) {
        recordedAccess.store(true, ordering: .relaxed)
        context.auditLog.record(event)
    }

    /// Tells the context's event sink (the session bus, the desktop) about a denial the
    /// audit log just recorded.
    func reportBlocked(_ event: AuditEvent, errno: Int32) {
        context.report(.accessBlocked(.init(accountId: event.owner, upn: context.accountRecord(event.owner)?.upn ?? "",
                                            path: event.path, executable: event.executable, action: event.action,
                                            rule: event.rule, errno: errno)))
    }

    /// open: a work file is opened (sendData); a personal one by a managed app for reading is
    /// received (receiveData, openFromLocations). With O_TRUNC the content is new: a work file
    /// keeps its owner once it may be written; any other gets the writer's owner.
    private func decideOpen(_ inode: Inode, flags: Int32, owner: String?, _ asker: Asker) throws -> Admission {
        let writing = flags & O_ACCMODE != O_RDONLY
        // The rules ask a work file's open nothing of its location (only a personal file's
        // receive does), so its mount path is worked out only for a record.
        let isWork = workOwner(owner) != nil
        func openLocation() throws -> StorageLocation {
            isWork ? .localDrive : try location(ofMountPath: try self.mountPath(inode), forAccount: options.account)
        }
        if flags & O_TRUNC != 0 {
            if isWork {
                try asker.enforce(self, .open(reading: false, writing: true), owner: owner,
                                  location: try openLocation(), path: try mountPath(inode))
                return .unchanged
            }
            let inherited = try owner ?? inheritedOwner(directoryPath: parentPath(try backingPath(inode)))
            return try decideNewContent(inheritedOwner: inherited, path: try self.mountPath(inode), asker)
        }
        try asker.enforce(self, .open(reading: flags & O_ACCMODE != O_WRONLY, writing: writing), owner: owner,
                          location: try openLocation(), path: try mountPath(inode))
        return .unchanged
    }

    /// New content at `path` (create, O_TRUNC of a personal file): its owner by the writer's
    /// identity, and, for a work owner, whether it may be saved there. The path is worked out
    /// only when a location or a record needs it.
    private func decideNewContent(inheritedOwner inherited: String, path: @autoclosure () throws -> String,
                                  _ asker: Asker) throws -> Admission {
        let decision = try asker.enforce(self, .create, owner: inherited,
                                         location: try location(ofMountPath: try path(), forAccount: options.account), path: try path())
        let newOwner = decision.newOwner ?? inherited
        if let owner = workOwner(newOwner) { try decideSave(owner: owner, path: try path(), asker) }
        return Admission(newOwner: newOwner)
    }

    /// Something that is not work data put into `directory` as `name` by a rename or link: in
    /// a work directory, asked as a create there (an unmanaged program may not).
    private func decidePutInto(_ directory: Inode, _ name: UnsafePointer<CChar>, _ asker: Asker) throws {
        let inherited = try inheritedOwner(of: directory)
        guard workOwner(inherited) != nil else { return }
        let path = try mountPath(directory, name)
        try asker.enforce(self, .create, owner: inherited, location: try location(ofMountPath: path, forAccount: options.account),
                          path: path)
    }

    /// Whether `name` in `parent` is a directory whose owner (its tag, else the one it
    /// inherits there) is a work account.
    private func isWorkDirectory(_ name: UnsafePointer<CChar>, in parent: Inode) throws -> Bool {
        guard let child = try? FileDescriptor.open(in: try parent.descriptor(), name,
                                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) else { return false }
        return workOwner(try context.directoryOwner(backingDirectoryFD: child.rawValue) ?? inheritedOwner(of: parent)) != nil
    }

    /// A directory moved takes the work files below it along: for each work owner there (its
    /// tag's, every file's and tagged directory's) whose policy's `locations` split the mount,
    /// a save is asked at the directory's new path and at the new path of every location
    /// prefix inside it (where those files land). A provider mount is one location: nothing is
    /// walked there, nor where no managed account's `locations` split the mount (a save
    /// anywhere in it is a save where the files already are).
    private func decideDirectoryMove(_ name: UnsafePointer<CChar>, in parent: Inode, to target: Inode,
                                     _ newName: UnsafePointer<CChar>, _ asker: Asker) throws {
        guard options.provider == nil, someLocationsSplitTheMount(),
              let child = try? FileDescriptor.open(in: try parent.descriptor(), name,
                                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) else { return }
        var owners = Set<String>()
        if let owner = workOwner(context.directoryOwner(backingDirectoryFD: child.rawValue)) { owners.insert(owner) }
        try collectWorkOwners(below: child, depth: 0, into: &owners)
        let from = try mountPath(parent, name), to = try mountPath(target, newName)
        let inside = from.hasSuffix("/") ? from : from + "/"
        for owner in owners.sorted() where policyFact(owner).mountLocation == nil {
            let locations = context.policyEvaluator.policy(forAccountId: owner)?.locations ?? StorageLocations()
            try decideSave(owner: owner, path: to, asker)
            for entry in locations.entries where entry.prefix.hasPrefix(inside) {
                try decideSave(owner: owner, path: to + "/" + entry.prefix.dropFirst(inside.count), asker)
            }
        }
    }

    /// Whether a managed account's policy puts parts of this mount in different locations
    /// (true when the accounts are not known).
    private func someLocationsSplitTheMount() -> Bool {
        guard let policies = context.policyEvaluator.managedPolicies else { return true }
        return policies.contains { !$0.locations.isEmpty && $0.locations.uniformLocation(below: options.mountpoint) == nil }
    }

    /// A work file of `owner` saved at mount path `path` (saveToLocations of the owner).
    private func decideSave(owner: String, path: @autoclosure () throws -> String, _ asker: Asker) throws {
        let location = try location(ofMountPath: try path(), forAccount: owner)
        try asker.enforce(self, .save(into: location), owner: owner, location: location, path: try path())
    }

    /// `owner` when it is a managed account here (a work owner), else nil.
    private func workOwner(_ owner: String?) -> String? {
        guard let owner, !owner.isEmpty else { return nil }
        let fact = policyFact(owner)
        return fact.isManaged ? fact.account : nil
    }

    /// What the policies say about `account` in this state generation (`PolicyFacts`).
    func policyFact(_ account: String) -> PolicyFacts.Fact {
        let canonical = AccountIdentity.canonical(account)
        return policyFacts.fact(canonical, generation: generation) {
            let policy = context.policyEvaluator.policy(forAccountId: canonical)
            let locations = policy?.locations ?? StorageLocations()
            return PolicyFacts.Fact(account: canonical, isManaged: policy != nil,
                                    mountLocation: locations.isEmpty ? .localDrive : locations.uniformLocation(below: options.mountpoint))
        }
    }

    /// The work owner of the regular file `name` in `directory` (nil for anything else).
    private func workOwner(ofFile name: UnsafePointer<CChar>, in directory: Inode) -> String? {
        guard let directoryFD = try? directory.descriptor() else { return nil }
        return workOwner(ofFile: name, in: directoryFD)
    }

    /// The work owner of the regular file `name` in the directory open as `directoryFD`.
    private func workOwner(ofFile name: UnsafePointer<CChar>, in directoryFD: Int32) -> String? {
        guard let file = try? FileDescriptor.open(in: directoryFD, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC),
              let st = try? file.stat(), (st.st_mode & S_IFMT) == S_IFREG,
              let header = try? ProtectedFileHeader.read(fd: file.rawValue) else { return nil }
        return workOwner(header.owner)
    }

    /// The work owners an owner change of `inode` rewrites: a file's own; for a directory its
    /// tag's (without one, the owner it inherits: what new files in it get) and those of every
    /// file and tagged directory below it (the recursive protect's walk: by descriptors,
    /// symlinks not followed).
    private func workOwnersChanged(by inode: Inode) throws -> Set<String> {
        var owners = Set<String>()
        if inode.isRegular {
            if let owner = workOwner(try ownerTag(of: inode)) { owners.insert(owner) }
        } else if inode.isDirectory {
            if let owner = workOwner(try directoryTag(of: inode) ?? inheritedOwner(of: inode)) { owners.insert(owner) }
            let directory = try FileDescriptor.open(in: try inode.descriptor(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            try collectWorkOwners(below: directory, depth: 0, into: &owners)
        }
        return owners
    }

    /// - Throws: ENAMETOOLONG below `TreeDepth.maximum` levels (the protect refuses such a tree).
    private func collectWorkOwners(below directory: consuming FileDescriptor, depth: Int, into owners: inout Set<String>) throws {
        guard depth < TreeDepth.maximum else { throw FilesystemError(code: ENAMETOOLONG) }
        let dirFD = directory.rawValue
        var entries = try DirectoryIterator(adopting: directory)
        while let entry = try entries.next() {
            try entry.cName.withUnsafeBufferPointer { buffer in
                guard let name = buffer.baseAddress, let st = try? SystemCall.stat(in: dirFD, name) else { return }
                switch st.st_mode & S_IFMT {
                case S_IFREG:
                    if let owner = workOwner(ofFile: name, in: dirFD) { owners.insert(owner) }
                case S_IFDIR:
                    let child = try FileDescriptor.open(in: dirFD, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                    if let owner = workOwner(context.directoryOwner(backingDirectoryFD: child.rawValue)) { owners.insert(owner) }
                    try collectWorkOwners(below: child, depth: depth + 1, into: &owners)
                default:
                    return
                }
            }
        }
    }

    /// The owner tag of a regular file's header (nil when untagged).
    private func ownerTag(of inode: Inode) throws -> String? {
        try inode.contentLock.reading { () throws -> String? in
            let st = try SystemCall.stat(fd: try inode.descriptor())
            return try header(inode, ctime: st.st_ctim)?.owner
        }
    }

    /// The `user.mam.owner` tag of a directory (nil when untagged).
    private func directoryTag(of inode: Inode) throws -> String? {
        guard inode.isDirectory else { return nil }
        let directory = try FileDescriptor.open(in: try inode.descriptor(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        return context.directoryOwner(backingDirectoryFD: directory.rawValue)
    }

    /// Where `path` (in the mount) is for `account`'s policy: a provider mount's `--location`,
    /// else the location its `locations` prefixes give (the local drive when none does). The
    /// path is asked for only when the prefixes put parts of the mount in different locations.
    func location(ofMountPath path: @autoclosure () throws -> String, forAccount account: String) throws -> StorageLocation {
        if options.provider != nil { return options.location }
        if let uniform = policyFact(account).mountLocation { return uniform }
        let locations = context.policyEvaluator.policy(forAccountId: account)?.locations ?? StorageLocations()
        return locations.location(ofPath: try path())
    }

    /// The path of `inode` in the mount: the mountpoint and the path below the backing root.
    func mountPath(_ inode: Inode) throws -> String {
        let backing = try backingPath(inode)
        guard let relative = PathName.relative(backing, below: rootPath) else { return options.mountpoint }
        return PathName.appending(relative, to: options.mountpoint)
    }

    /// The mount path of `name` in the directory `directory`.
    func mountPath(_ directory: Inode, _ name: UnsafePointer<CChar>) throws -> String {
        let parent = try mountPath(directory)
        return (parent.hasSuffix("/") ? parent : parent + "/") + String(cString: name)
    }
}
