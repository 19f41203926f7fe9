import DBusKit
import Dispatch
import PermissionsClient
import SystemPrimitives

/// `status` goes through the PermissionsClient library, as an app would; the admin
/// commands stay plain calls (Client.swift). `request` makes its StartRequest
/// itself (HandleRequest.swift): it reports a dismissal and an ended request
/// apart from an answer, which the library's `request` folds into the status.
struct AppCommands {
    let client: PermissionsClient

    /// On `bus`, or without one where an app's `PermissionsClient()` is: the bus
    /// PERMISSIONS_BUS names, else the system bus.
    init(bus: Bus?) throws(BusError) {
        do throws(PermissionsClientError) {
            client = if let bus { try PermissionsClient(bus: bus.clientBus) } else { try PermissionsClient() }
        } catch {
            throw BusError(error.name, error.message)
        }
    }

    /// Runs one async library call to its end from this synchronous tool; the
    /// library's error comes back as the D-Bus error it was, for the same output.
    func wait<T: Sendable>(_ body: @escaping @Sendable (PermissionsClient) async throws -> T)
        throws(BusError) -> T
    {
        let result = Locked<Result<T, BusError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let client = client
        Task {
            let outcome: Result<T, BusError>
            do {
                outcome = .success(try await body(client))
            } catch let error as PermissionsClientError {
                outcome = .failure(BusError(error.name, error.message))
            } catch {
                outcome = .failure(BusError(BusError.failed, "\(error)"))
            }
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        switch result.withLock({ $0 })! {
        case .success(let value): return value
        case .failure(let error): throw error
        }
    }
}

extension Bus {
    var clientBus: PermissionsClient.Bus {
        switch self {
        case .session: .session
        case .system: .system
        case .address(let address): .address(address)
        }
    }
}

extension PermissionsClient.Bus {
    var dbusKitBus: Bus {
        switch self {
        case .session: .session
        case .system: .system
        case .address(let address): .address(address)
        }
    }
}
