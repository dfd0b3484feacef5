/// The answer to getxattr/listxattr: the size alone (the caller asked with size 0) or the value.
enum XattrReply {
    case size(Int)
    case value([UInt8])
}
