/// The names the service is reached by on the bus: one place for the daemon and
/// permissionsctl (dbus/org.example.Permissions.xml is the interface itself).
public enum BusNames {
    /// The well-known bus name the daemon owns.
    public static let busName = "org.example.Permissions"
    /// The one object it exports.
    public static let objectPath = "/org/example/Permissions"
    public static let interfaceName = "org.example.Permissions"
    /// The interface of a StartRequest's object (RequestHandles.swift); not
    /// "….Request", so that it cannot be taken for the method.
    public static let requestHandleInterfaceName = "org.example.Permissions.RequestHandle"
    /// The interface an agent exports (permissionsctl agent is one) and the daemon calls.
    public static let agentInterfaceName = "org.example.Permissions.Agent"
    /// Every named error is this prefix plus one of `ErrorName`.
    public static let errorPrefix = "org.example.Permissions.Error."
}

/// The service's named errors, without the prefix (BusNames.errorPrefix).
public enum ErrorName {
    public static let unknownPermission = "UnknownPermission"
    public static let invalidArgument = "InvalidArgument"
    public static let notAuthorized = "NotAuthorized"
    public static let unknownCaller = "UnknownCaller"
    public static let storageFailed = "StorageFailed"
    public static let cancelled = "Cancelled"
    public static let limitExceeded = "LimitExceeded"
    public static let notSupported = "NotSupported"
    public static let unavailable = "Unavailable"
}
