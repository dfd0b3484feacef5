import Foundation

/// A place data may be opened (imported) from into a managed account, named as in the reference SDK.
///
/// Mirrors `IntuneMAMOpenLocation` (`IntuneMAMOpenLocationOther`, ...). The raw values are the
/// names used in policy JSON and on the command line.
public enum OpenLocation: String, CaseIterable, PolicyName, Sendable, Codable {
    /// Any location not listed below.
    case other = "Other"
    /// OneDrive for Business.
    case oneDriveForBusiness = "OneDriveForBusiness"
    /// SharePoint.
    case sharePoint = "SharePoint"
    /// The camera.
    case camera = "Camera"
    /// Local storage (on a workstation: any local path outside the protected tree).
    case localStorage = "LocalStorage"
    /// The photo library.
    case photos = "Photos"
    /// A storage location that belongs to the same account (the account's own documents).
    case accountDocument = "AccountDocument"
    /// Box.
    case box = "Box"
    /// iManage.
    case iManage = "IManage"
    /// Egnyte.
    case egnyte = "Egnyte"
}
