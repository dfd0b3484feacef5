/// A file create made or opened: its entry, the open handle, and the file made (nil when an
/// existing file was opened).
struct CreatedFile {
    let entry: Entry
    let handle: OpenFile
    let made: MadeObject?
}
