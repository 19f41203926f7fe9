// What counts as a camera or a microphone in a PipeWire graph.

/// The two permissions the PipeWire plugin provides, and which PipeWire nodes give them.
public enum DevicePermission: String, CaseIterable, Sendable {
    case camera, microphone

    /// The permission a node of this `media.class` gives, or nil for any other node.
    ///
    /// Only sources count: the permissions are about capturing, so sinks, streams
    /// (`Stream/Input/*`, `Stream/Output/*`, apps' own nodes) and duplex devices do
    /// not. The `/Virtual` sources count too: an app can open and record from them
    /// exactly as from a hardware device (an Easy Effects or echo-cancelled mic, a
    /// loopback, a virtual camera), so calling them "unsupported" would tell the app
    /// there is nothing to ask for while there is, and the user's decision about
    /// capture must apply to them as well (see README.md). Matching is exact:
    /// an unknown subclass is not guessed at.
    public init?(mediaClass: String) {
        switch mediaClass {
        case "Video/Source", "Video/Source/Virtual": self = .camera
        case "Audio/Source", "Audio/Source/Virtual": self = .microphone
        default: return nil
        }
    }
}
