import Foundation

/// Byte counts, rates and durations as a progress line shows them: binary units (B, KiB, MiB,
/// GiB, TiB), one decimal above bytes.
enum HumanUnits {
    private static let units = ["B", "KiB", "MiB", "GiB", "TiB"]

    /// The unit `bytes` is shown in: its index in B, KiB, ... and its size in bytes.
    static func unit(for bytes: Int64) -> (name: String, size: Double) {
        var index = 0
        var size = 1.0
        while index < units.count - 1 && Double(bytes) >= size * 1024 { index += 1; size *= 1024 }
        return (units[index], size)
    }

    /// `bytes` in `unit` (no unit name): "512" for bytes, "1.5" above.
    static func number(_ bytes: Int64, in unit: (name: String, size: Double)) -> String {
        unit.size == 1 ? String(bytes) : String(format: "%.1f", Double(bytes) / unit.size)
    }

    /// "512 B", "1.5 KiB", "2.9 MiB".
    static func bytes(_ bytes: Int64) -> String {
        let unit = unit(for: bytes)
        return number(bytes, in: unit) + " " + unit.name
    }

    /// "done/total UNIT" in the unit of `total`: "0.4/2.9 MiB", "100/512 B".
    static func bytes(_ done: Int64, of total: Int64) -> String {
        let unit = unit(for: total)
        return number(done, in: unit) + "/" + number(total, in: unit) + " " + unit.name
    }

    /// Seconds as "m:ss" or "h:mm:ss" (rounded up to the second); "--:--" for nil.
    static func duration(_ seconds: Double?) -> String {
        guard let seconds, seconds.isFinite, seconds >= 0 else { return "--:--" }
        let whole = Int(min(seconds.rounded(.up), 359_999))
        let (h, m, s) = (whole / 3600, whole / 60 % 60, whole % 60)
        return h > 0 ? String(format: "%d:%02d:%02d", h, m, s) : String(format: "%d:%02d", m, s)
    }
}
