import Foundation
import Glibc

/// The `encryptedBackingDevice` check: does a directory live on a dm-crypt (LUKS or plain)
/// block device?
///
/// The directory's st_dev is followed through `/sys/dev/block/MAJ:MIN`: the device is
/// encrypted when its `dm/uuid` starts with `CRYPT-` (what cryptsetup gives LUKS and plain
/// mappings), or when one below it is: its `slaves/` (LVM or RAID on top of dm-crypt),
/// recursively, and for a partition its whole disk. A filesystem without a block device
/// (tmpfs, overlay, FUSE, NFS, btrfs subvolumes' anonymous devices) or a device sysfs does not
/// know is not encrypted.
enum EncryptedDeviceCheck {
    /// Where sysfs is (tests point it elsewhere only to read a copy).
    static let sysfs = "/sys"

    static func evaluate(directory: String, sysfs: String = sysfs) -> ComplianceOutcome {
        let name = "encryptedBackingDevice"
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            return ComplianceOutcome(check: name, status: .notCompliant,
                                     reason: "\(directory): cannot open: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            return ComplianceOutcome(check: name, status: .notCompliant, reason: "\(directory): cannot stat: \(String(cString: strerror(errno)))")
        }
        let dev = UInt64(st.st_dev)
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~UInt64(0xfff))
        let minor = (dev & 0xff) | ((dev >> 12) & ~UInt64(0xff))
        let number = "\(major):\(minor)"
        // The filesystem's type, for the reason: the mount with this device number.
        let type = MountInfo.current()?.entries.last { $0.device == number }?.filesystemType ?? "an unknown filesystem"
        guard major != 0 else {
            return ComplianceOutcome(check: name, status: .notCompliant,
                                     reason: "\(directory) is on \(type), which has no block device (not a dm-crypt device)")
        }
        guard let device = realpath(sysfs + "/dev/block/" + number) else {
            return ComplianceOutcome(check: name, status: .notCompliant,
                                     reason: "\(directory) is on \(type), device \(number) unknown to sysfs (not a dm-crypt device)")
        }
        if let crypt = cryptDevice(at: device, depth: 0) {
            return ComplianceOutcome(check: name, status: .compliant,
                                     reason: "\(directory) is on \(type) on \(deviceName(device)), encrypted by dm-crypt (\(crypt))")
        }
        return ComplianceOutcome(check: name, status: .notCompliant,
                                 reason: "\(directory) is on \(type) on \(deviceName(device)) (\(number)), not a dm-crypt device")
    }

    /// The name of the dm-crypt device at or below the sysfs device directory `path`, or nil.
    private static func cryptDevice(at path: String, depth: Int) -> String? {
        guard depth < 16 else { return nil }
        if let uuid = read(path + "/dm/uuid"), uuid.hasPrefix("CRYPT-") {
            return read(path + "/dm/name") ?? deviceName(path)
        }
        for slave in (try? FileManager.default.contentsOfDirectory(atPath: path + "/slaves")) ?? [] {
            if let resolved = realpath(path + "/slaves/" + slave), let found = cryptDevice(at: resolved, depth: depth + 1) {
                return found
            }
        }
        if FileManager.default.fileExists(atPath: path + "/partition") {
            return cryptDevice(at: (path as NSString).deletingLastPathComponent, depth: depth + 1)
        }
        return nil
    }

    private static func realpath(_ path: String) -> String? {
        guard let resolved = Glibc.realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func read(_ path: String) -> String? {
        (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingWhitespace()
    }

    private static func deviceName(_ path: String) -> String { (path as NSString).lastPathComponent }
}
