/// The two numbers `--version` prints (permissionsd and permissionsctl), each
/// written here and nowhere else.
public enum Versions {
    /// The package's release.
    public static let package = "0.1.0"
    /// The org.example.Permissions interface's, which the service's `version`
    /// property announces: it grows when the interface changes (2: decisions per
    /// user, the *ForUser methods, Subscribe, GetDiagnostics; 3: StartRequest
    /// and its RequestHandle objects, the parent_window option; 4:
    /// OpenPipeWireRemote and ListPipeWireRemotes; 5: GetDetailsForApp and the
    /// "disabled-by" detail; 6: a user's decisions loaded when first needed, and
    /// a failed load answered StorageFailed).
    public static let interface: UInt32 = 6
}

extension Versions {
    /// What `PROGRAM --version` prints.
    public static func line(program: String) -> String {
        "\(program) \(package)\n\(BusNames.interfaceName) interface version \(interface)"
    }
}
