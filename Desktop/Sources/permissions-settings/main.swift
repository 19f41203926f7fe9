// permissions-settings: the privacy page. Every permission of the service with
// the state of its device, and every app the user decided for, changed live.
internal import CAdw
internal import DesktopSupport
internal import Glibc

/// The usage text, one literal (the translation template reads it as C).
func usage() -> String {
    tr("Usage: permissions-settings [--system | --session | --address ADDRESS]\n       permissions-settings --version\n\nShows every permission and the apps you decided for, and changes your decisions.\n\n  --system                 the service on the system bus (the default)\n  --session                the service on the session bus\n  --address ADDRESS        the service on the bus at ADDRESS\n  --gapplication-service   start as a D-Bus service (D-Bus activation does)\n  --version                show the package and interface versions\n  -h, --help               show this help\n\nWithout a bus option, PERMISSIONS_BUS names the bus: system, session, or a\nD-Bus address. The page is one application (org.example.Permissions.Settings)\non the session bus: starting it again shows the running one.\n")
}

func runSettings() -> Never {
    setUpTranslations()
    // GApplication gets what is left, which may only be its own --gapplication-service.
    let choice = parseCommandLine(program: "permissions-settings", usage: usage(), allowed: ["--gapplication-service"])
    g_set_prgname("permissions-settings")
    g_set_application_name(tr("Privacy"))
    exit(SettingsApplication(choice: choice).run(["permissions-settings"] + choice.rest))
}

runSettings()
