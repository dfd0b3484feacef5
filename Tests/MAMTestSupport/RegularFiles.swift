import Foundation
import Glibc

/// Every regular file below `directory` (relative paths, sorted; symlinks and other node kinds
/// left out, never followed).
public func regularFiles(under directory: String) -> [String] {
    var result: [String] = []
    guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [] }
    while let relative = enumerator.nextObject() as? String {
        var st = stat()
        if lstat(directory + "/" + relative, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG { result.append(relative) }
    }
    return result.sorted()
}
