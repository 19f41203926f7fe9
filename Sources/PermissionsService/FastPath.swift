internal import PermissionsModel
internal import DBusKit
internal import PermissionsIdentity
internal import PermissionsStore

// GetStatus(s) and GetAll() on DBusKit's fast path (FastPath.swift there): for a
// caller already identified, answered straight from memory, with no DBusValue
// on the way in or out and no MethodCall object. Everything else (an invalid or
// unknown permission, a caller not identified yet or whose user's decisions are
// not in memory (UserLoads), a daemon that is stopping)
// declines and takes the ordinary handlers in CallerMethods.swift, so errors and
// waiting stay in one place. Part of PermissionsService; confined to its queue.
extension PermissionsService {
    func installFastPath() {
        connection.addFastMethod(path: Self.objectPath, interface: Self.interfaceName, member: "GetStatus",
                                 signature: "s") { [unowned self] call in self.fastGetStatus(call) }
        connection.addFastMethod(path: Self.objectPath, interface: Self.interfaceName, member: "GetAll",
                                 signature: "") { [unowned self] call in self.fastGetAll(call) }
    }

    private func fastGetStatus(_ call: borrowing FastMethodCall) -> Bool {
        guard !stopping, let identity = callers.cached(call.sender), store.isLoaded(uid: identity.uid) else {
            return false
        }
        let permission = call.firstString
        guard Validate.isPermissionName(permission), isKnown(permission) else { return false }
        return call.reply(string: status(of: identity, permission: permission).rawValue)
    }

    private func fastGetAll(_ call: borrowing FastMethodCall) -> Bool {
        guard !stopping, let identity = callers.cached(call.sender), store.isLoaded(uid: identity.uid) else {
            return false
        }
        let names = permissions
        return call.reply(stringDictionary: names.count) { index in
            (names[index], self.status(of: identity, permission: names[index]).rawValue)
        }
    }
}
