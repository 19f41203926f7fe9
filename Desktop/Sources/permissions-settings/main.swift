// permissions-settings: the privacy page. Every permission of the service with
// the state of its device, and every app the user decided for, changed live.
internal import CAdw
internal import DesktopSupport
internal import Glibc
internal import PermissionsModel

/// The usage text, one literal (the translation template reads it as C).
func usage() -> String {
    tr("Usage: permissions-settings [--system | --session | --address ADDRESS]\n       permissions-settings --version\n\nShows every permission and the apps you decided for, and changes your decisions.\n\n  --system                 the service on the system bus (the default)\n  --session                the service on the session bus\n  --address ADDRESS        the service on the bus at ADDRESS\n  --gapplication-service   start as a D-Bus service (D-Bus activation does)\n  --version                show the package and interface versions\n  -h, --help               show this help\n\nWithout a bus option, PERMISSIONS_BUS names the bus: system, session, or a\nD-Bus address. The page is one application (org.example.Permissions.Settings)\non the session bus: starting it again shows the running one.\n")
}

func runSettings() -> Never {
    setUpTranslations()
    let arguments = Array(CommandLine.arguments.dropFirst())
    if arguments.contains("--help") || arguments.contains("-h") {
        print(usage(), terminator: "")
        exit(0)
    }
    if arguments.contains("--version") {
        print(Versions.line(program: "permissions-settings"))
        exit(0)
    }
    let choice: BusChoice
    do throws(BusChoice.Problem) {
        choice = try BusChoice.parse(arguments)
    } catch {
        switch error {
        case .usage(let message): printError("permissions-settings", "\(message)\n\(usage())")
        case .environment(let message): printError("permissions-settings", message)
        }
        exit(2)
    }
    // What is left goes to GApplication, which knows --gapplication-service alone.
    if let extra = choice.rest.first(where: { $0 != "--gapplication-service" }) {
        printError("permissions-settings", "unexpected argument \(extra)\n\(usage())")
        exit(2)
    }
    g_set_prgname("permissions-settings")
    g_set_application_name(tr("Privacy"))
    exit(SettingsApplication(choice: choice).run(["permissions-settings"] + choice.rest))
}

runSettings()
