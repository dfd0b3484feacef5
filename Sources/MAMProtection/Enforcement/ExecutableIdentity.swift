import Foundation

/// The program behind a request: the resolved path of its executable and, on demand, the
/// executable's SHA-256.
///
/// The mount supplies one per caller (from `/proc/PID/exe`), the CLI one for itself. A script
/// counts as its interpreter: the executable of `python3 script.py` is the python3 binary.
/// `AccessRules` calls `sha256()` only when a `managedApps` rule has a digest, so an
/// implementation may hash lazily (and should cache). Mirrors the app identity Intune and
/// Windows Information Protection match their managed / allowed app lists against.
public protocol ExecutableIdentity: Sendable {
    /// The absolute, resolved executable path (e.g. "/usr/lib/libreoffice/program/soffice.bin").
    var path: String { get }
    /// The executable's SHA-256 as 64 lowercase hex digits, or nil when it cannot be read.
    func sha256() -> String?
}
