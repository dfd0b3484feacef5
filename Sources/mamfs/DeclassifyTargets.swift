import Foundation
import MAMProtection

/// The objects a `protect` or `decrypt` would take from a managed account, with their owners
/// now: what the declassification check (`CommandAudit.requireDeclassifyAllowed`) looks at
/// before anything is changed.
enum DeclassifyTargets {
    /// The regular files and tagged directories `protect PATH [-R]` retags (as
    /// `FileProtectionManager.protect` walks them: symbolic links are not followed, below the
    /// top only tagged directories are retagged) whose owner is a managed account.
    /// Objects that cannot be read are left out: `protect` reports them itself.
    static func managedObjects(at path: String, recursive: Bool, context: ProtectionContext) -> [(path: String, owner: String?)] {
        let evaluator = context.policyEvaluator
        var found: [(path: String, owner: String?)] = []
        func note(_ path: String, _ owner: String?) {
            if let owner, evaluator.isManaged(accountId: owner) { found.append((path, owner)) }
        }
        func walk(_ directory: String) {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
            for name in names.sorted() {
                let child = directory + "/" + name
                var st = stat()
                guard lstat(child, &st) == 0 else { continue }
                switch st.st_mode & S_IFMT {
                case S_IFDIR:
                    note(child, DirectoryOwner.read(path: child))
                    walk(child)
                case S_IFREG:
                    note(child, try? context.files.protectionInfo(path: child))
                default:
                    continue
                }
            }
        }
        guard let info = try? context.files.info(path: path) else { return [] }
        note(path, info.owner)
        if info.isDirectory && recursive { walk(path) }
        return found
    }
}
