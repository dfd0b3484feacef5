import Foundation

/// A place a managed account's data may be saved to, named as in the reference SDK.
///
/// Mirrors `IntuneMAMSaveLocation` (`IntuneMAMSaveLocationOther`, ...). The raw values are the
/// names used in policy JSON and on the command line.
public enum SaveLocation: String, CaseIterable, PolicyName, Sendable, Codable {
    /// Any location not listed below.
    case other = "Other"
    /// OneDrive for Business.
    case oneDriveForBusiness = "OneDriveForBusiness"
    /// SharePoint.
    case sharePoint = "SharePoint"
    /// Box.
    case box = "Box"
    /// Dropbox.
    case dropbox = "Dropbox"
    /// Google Drive.
    case googleDrive = "GoogleDrive"
    /// The local drive (on a workstation: any local path outside the protected tree).
    case localDrive = "LocalDrive"
    /// The camera roll / photo library.
    case cameraRoll = "CameraRoll"
    /// A storage location that belongs to the same account (the account's own documents).
    case accountDocument = "AccountDocument"
    /// iManage.
    case iManage = "IManage"
    /// Egnyte.
    case egnyte = "Egnyte"
}
