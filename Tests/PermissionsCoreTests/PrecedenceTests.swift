import Testing
@testable import PermissionsModel

@Suite("Effective status precedence")
struct PrecedenceTests {
    static let services: [ServiceState] = [.available, .disabled, .unsupported]
    static let policies: [Policy] = [.none, .restricted, .allow]
    static let decisions: [Decision?] = [nil, .authorized, .denied]

    /// PRODUCT.md, written out as plain ifs: unsupported > disabled > restricted >
    /// admin allow > stored decision > not-determined.
    static func rule(_ service: ServiceState, _ policy: Policy, _ decision: Decision?) -> Status {
        if service == .unsupported { return .unsupported }
        if service == .disabled { return .disabled }
        if policy == .restricted { return .restricted }
        if policy == .allow { return .authorized }
        if decision == .authorized { return .authorized }
        if decision == .denied { return .denied }
        return .notDetermined
    }

    @Test("every combination follows the rule", arguments: services, policies)
    func combination(service: ServiceState, policy: Policy) {
        for decision in Self.decisions {
            #expect(effectiveStatus(service: service, policy: policy, decision: decision)
                    == Self.rule(service, policy, decision),
                    "service \(service), policy \(policy), decision \(String(describing: decision))")
        }
    }

    @Test func spotChecks() {
        #expect(effectiveStatus(service: .available, policy: .none, decision: nil) == .notDetermined)
        #expect(effectiveStatus(service: .available, policy: .none, decision: .denied) == .denied)
        #expect(effectiveStatus(service: .available, policy: .none, decision: .authorized) == .authorized)
        #expect(effectiveStatus(service: .available, policy: .allow, decision: .denied) == .authorized)
        #expect(effectiveStatus(service: .available, policy: .restricted, decision: .authorized) == .restricted)
        #expect(effectiveStatus(service: .disabled, policy: .allow, decision: .authorized) == .disabled)
        #expect(effectiveStatus(service: .unsupported, policy: .restricted, decision: .denied) == .unsupported)
    }

    @Test func everyStatusIsReachable() {
        var seen: Set<String> = []
        for s in Self.services { for p in Self.policies { for d in Self.decisions {
            seen.insert(effectiveStatus(service: s, policy: p, decision: d).rawValue)
        } } }
        #expect(seen == Set(Status.allCases.map(\.rawValue)))
    }

    @Test func wireWords() {
        #expect(Status.allCases.map(\.rawValue)
                == ["authorized", "denied", "not-determined", "restricted", "disabled", "unsupported"])
        #expect(Status(rawValue: "not-determined") == .notDetermined)
        #expect(Status(rawValue: "notDetermined") == nil)
        #expect(Status(rawValue: "Authorized") == nil)
        #expect(ServiceState.available.rawValue == "available")
        #expect(Policy.restricted.rawValue == "restricted")
        #expect(Decision(rawValue: "denied") == .denied)
        #expect(Decision(rawValue: "not-determined") == nil)
    }

    @Test("service-level status ignores per-app entries", arguments: [
        (ServiceState.available, Status.notDetermined),
        (.disabled, .disabled),
        (.unsupported, .unsupported),
    ])
    func serviceLevel(service: ServiceState, expected: Status) {
        let snapshot = Snapshot(permission: "camera", service: service,
                                policies: ["org.gnome.Maps": .allow, "/usr/bin/evil": .restricted])
        #expect(snapshot.serviceLevelStatus == expected)
    }

    @Test func snapshotPolicyLookup() {
        let snapshot = Snapshot(permission: "location", service: .available,
                                policies: ["org.gnome.Maps": .allow, "/usr/bin/evil": .restricted])
        #expect(snapshot.policy(for: "org.gnome.Maps") == .allow)
        #expect(snapshot.policy(for: "/usr/bin/evil") == .restricted)
        #expect(snapshot.policy(for: "org.other") == Policy.none)
        #expect(Snapshot.unpublished("camera") == Snapshot(permission: "camera", service: .unsupported))
        #expect(Snapshot.unpublished("camera").serviceLevelStatus == .unsupported)
    }
}
