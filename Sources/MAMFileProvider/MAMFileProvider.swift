import MAMProtection

/// File providers over a cloud store (NSFileProviderExtension / NSFileProviderReplicatedExtension
/// semantics). Built in the file-provider issue.
public enum MAMFileProviderModule {}
