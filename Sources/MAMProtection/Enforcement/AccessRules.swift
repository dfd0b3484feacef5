import Foundation

/// The caller-aware rules: which program may open, create, save and declassify which files.
///
/// Terms: a *managed app* (M) is a process whose executable matches the relevant policy's
/// `managedApps` (every process when the key is absent, none when it is `[]`); any other
/// process is U. A *work* file (W) is owned by a managed account; every other file (untagged,
/// tagged "" or owned by an account not managed here) is *personal* (P).
///
/// Whose policy decides: for a W object its owner's; for a P object and for `.create` the
/// `appAccount`'s (for `.create` by an unmanaged app account in a directory that gives a W
/// owner: that owner's). No policy (an unmanaged account) means allowed. The policy's
/// `protectionLevel` then turns a would-be denial into `.denied` (block), `.allowedAudited`
/// (audit) or `.allowed` without a record (off, the default).
///
/// | action | M | U |
/// |---|---|---|
/// | open W (read or write) | allowed | allowed iff `sendData` is `allApps`, else "sendData=managedApps" |
/// | open P for reading (O_RDONLY, O_RDWR) | allowed iff the app account may receive it ("receiveData") and its location's open side is in `openFromLocations` ("openFromLocations") | allowed |
/// | open P write-only (O_WRONLY) | allowed | allowed |
/// | create / O_TRUNC | allowed, new owner = the app account when it is managed, else the inherited owner | allowed with the inherited owner when it is not W, else "workDirectory" |
/// | save a W file into a location | allowed iff the location is in the owner's `saveToLocations` ("saveToLocations") | the same |
/// | declassify a W file | allowed iff `allowUserDecrypt` ("allowUserDecrypt=false", EPERM) | the same |
/// | metadata | allowed | allowed |
///
/// At level `off` a create keeps the inherited owner (what mamfs did before these rules).
/// Mirrors the app-protection checks of Intune (`isSaveToAllowedForLocation:`,
/// `isOpenFromAllowedForLocation:`, `canReceiveSharedFile:`, "Send org data to other apps",
/// "policy managed apps") and the Block / Audit / Off levels of Windows Information Protection.
public struct AccessRules: Sendable {
    private let evaluator: PolicyEvaluator

    /// - Parameter evaluator: the policies of the managed accounts (e.g. `ProtectionContext.policyEvaluator`).
    public init(evaluator: PolicyEvaluator) {
        self.evaluator = evaluator
    }

    /// Whether `executable` is a managed app for `accountId`'s policy: true when the account has
    /// no policy or the policy no `managedApps` key; false for `[]`; otherwise whether a rule
    /// matches (the executable's digest is asked only when a path-matching rule has one).
    public func isManagedApp(_ executable: any ExecutableIdentity, forAccount accountId: String) -> Bool {
        guard let rules = evaluator.policy(forAccountId: accountId)?.managedApps else { return true }
        return rules.matches(executablePath: executable.path, sha256: executable.sha256)
    }

    /// Decides `request` (see the table on the type). Never throws; the decision says which
    /// rule denied and the errno a filesystem answers.
    public func decide(_ request: AccessRequest) -> AccessDecision {
        switch request.action {
        case .metadata:
            return .allowed()
        case .open(let reading, _):
            return decideOpen(request, reading: reading)
        case .create:
            return decideCreate(request)
        case .save(let location):
            guard let (owner, policy) = work(request.owner) else { return .allowed() }
            if evaluator.isSaveToAllowed(location: location.save, dataOwner: owner) { return .allowed() }
            return outcome(policy, rule: "saveToLocations", errno: EACCES)
        case .declassify(let newOwner):
            guard let (owner, policy) = work(request.owner),
                  AccountIdentity.canonical(newOwner) != owner,
                  !policy.allowUserDecrypt else { return .allowed() }
            return outcome(policy, rule: "allowUserDecrypt=false", errno: EPERM)
        }
    }

    private func decideOpen(_ request: AccessRequest, reading: Bool) -> AccessDecision {
        if let (owner, policy) = work(request.owner) {
            if policy.sendData == .allApps || isManagedApp(request.executable, forAccount: owner) { return .allowed() }
            return outcome(policy, rule: "sendData=managedApps", errno: EACCES)
        }
        // A personal file: only a managed app reading it (O_RDONLY or O_RDWR) brings personal
        // data into the work account.
        guard reading, let policy = evaluator.policy(forAccountId: request.appAccount),
              isManagedApp(request.executable, forAccount: request.appAccount) else { return .allowed() }
        if !evaluator.canReceiveSharedFile(fileOwner: request.owner, receiver: request.appAccount) {
            return outcome(policy, rule: "receiveData", errno: EACCES)
        }
        if !evaluator.isOpenFromAllowed(location: request.location.open, receiver: request.appAccount) {
            return outcome(policy, rule: "openFromLocations", errno: EACCES)
        }
        return .allowed()
    }

    private func decideCreate(_ request: AccessRequest) -> AccessDecision {
        let inherited = request.owner
        let appAccount = AccountIdentity.canonical(request.appAccount)
        let deciding: (account: String, policy: Policy)
        if let policy = evaluator.policy(forAccountId: appAccount) {
            deciding = (appAccount, policy)
        } else if let (owner, policy) = work(inherited) {
            deciding = (owner, policy)
        } else {
            return .allowed(newOwner: inherited)
        }
        if deciding.policy.protectionLevel == .off { return .allowed(newOwner: inherited) }
        if isManagedApp(request.executable, forAccount: deciding.account) {
            return .allowed(newOwner: evaluator.isManaged(accountId: appAccount) ? appAccount : inherited)
        }
        if work(inherited) == nil { return .allowed(newOwner: inherited) }
        return outcome(deciding.policy, rule: "workDirectory", errno: EACCES, newOwner: inherited)
    }

    /// The canonical owner and its policy when `owner` is a managed account (a W object).
    private func work(_ owner: String?) -> (String, Policy)? {
        guard let owner else { return nil }
        let canonical = AccountIdentity.canonical(owner)
        return evaluator.policy(forAccountId: canonical).map { (canonical, $0) }
    }

    /// A would-be denial under `policy`'s protection level.
    private func outcome(_ policy: Policy, rule: String, errno: Int32, newOwner: String? = nil) -> AccessDecision {
        switch policy.protectionLevel {
        case .off: return .allowed(newOwner: newOwner)
        case .audit: return AccessDecision(verdict: .allowedAudited, rule: rule, newOwner: newOwner, errno: errno)
        case .block: return AccessDecision(verdict: .denied, rule: rule, newOwner: newOwner, errno: errno)
        }
    }
}
